"""A fake OpenAI Responses API on loopback that drives the real ``codex`` binary through scripted
turns (server-sent events), and keeps every request body Codex sent, so tests can check what
reached the model. Steps: ``("exec", cmd)`` (or ``("exec", {"cmd": ..., "tty": True, ...})``, the
call's arguments), ``("patch", text)``, ``("say", text)``, ``("tool", {"name": ..., "namespace": ...,
"arguments": {...}})`` (any function call: ``("tool", {"namespace": "collaboration", "name": "spawn_agent",
...})`` spawns a subagent of ``codex --enable multi_agent_v2``); after the last step every turn ends with a
final message. ``thoughts`` (turn -> text): a reasoning item, with that text as its summary, before the
main model's turn's step.

``subagents`` (marker -> steps): a request whose task from its parent (an ``agent_message`` to an agent other
than ``/root``) holds ``marker`` is that subagent's turn and takes its own script; its calls are
``<marker>_call_N``. ``by_agent[marker]`` (the main model's: ``by_agent[""]``) keeps each one's requests. A
main step ``("after", (marker, step))`` answers ``step`` once that subagent has had its final message (the
two run at once in Codex: this sets their order); ``("delay", (seconds, step))`` answers ``step`` that much
later."""

from __future__ import annotations

import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from loopback import Loopback

USAGE = {
    "input_tokens": 100,
    "output_tokens": 10,
    "total_tokens": 110,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens_details": {"reasoning_tokens": 0},
}


def decode_body(raw: bytes, encoding: str | None) -> Any:
    if encoding == "gzip":
        raw = gzip.decompress(raw)
    elif encoding == "zstd":
        import zstandard  # only if Codex compresses; it does not for a custom provider in 0.171.0

        raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    return json.loads(raw)


class FakeResponses(Loopback):
    base_path = "/v1"

    def __init__(
        self,
        steps: list[tuple[str, Any]],
        *,
        workdir: str | None = None,
        thoughts: dict[int, str] | None = None,
        subagents: dict[str, list[tuple[str, Any]]] | None = None,
    ):
        self.steps = list(steps)
        self.subagents = dict(subagents or {})
        self.by_agent: dict[str, list[dict[str, Any]]] = {"": [], **{m: [] for m in self.subagents}}
        self.finished: set[str] = set()  # subagents whose turn ended with a message
        self.thoughts = dict(thoughts or {})
        self.workdir = workdir
        self.requests: list[dict[str, Any]] = []  # every request body
        self.agent_requests: list[dict[str, Any]] = []  # the agent's turns (which take the scripted steps)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    body = decode_body(raw, self.headers.get("content-encoding"))
                except Exception as e:  # keep what came, answer an error
                    body = {"undecodable": repr(e)}
                with server._lock:
                    server.requests.append(body)
                    agent = ""
                    if is_agent_turn(body):
                        server.agent_requests.append(body)
                        agent = server.agent_of(body)
                        server.by_agent[agent].append(body)
                        turn = len(server.by_agent[agent]) - 1
                    else:  # Codex's side requests (a title for the TUI's thread): no scripted step
                        turn = -1
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                events = server.events(turn, agent)
                for event in events:
                    self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()
                if agent and events[-2]["item"]["type"] == "message":  # its turn ended, its answer sent
                    with server._lock:
                        server.finished.add(agent)

            def do_GET(self) -> None:  # model listings and the like: not offered
                self.send_response(404)
                self.end_headers()

        self.serve(Handler)

    def agent_of(self, body: dict[str, Any]) -> str:
        """Whose turn a request is: the subagent whose task (a message to it from its parent) holds its marker, else
        the main model's."""
        tasks = [
            json.dumps(i.get("content"))
            for i in body.get("input") or []
            if i.get("type") == "agent_message" and i.get("recipient") != "/root"
        ]
        return next((m for m in self.subagents if any(m in t for t in tasks)), "")

    def subagent_done(self, marker: str) -> bool:
        with self._lock:
            return marker in self.finished

    def events(self, turn: int, agent: str = "") -> list[dict[str, Any]]:
        steps = self.subagents[agent] if agent else self.steps
        if turn < 0:
            kind, arg = "say", "Fix the calculator"
        else:
            kind, arg = steps[turn] if turn < len(steps) else ("say", "All done.")
        if kind == "after":  # the subagent's end first (its final message is sent before its request returns)
            marker, (kind, arg) = arg
            deadline = time.monotonic() + 90
            while not self.subagent_done(marker) and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(1.0)  # its final message reaches Codex
        if kind == "delay":  # answered that many seconds later (the other agent's call goes first)
            seconds, (kind, arg) = arg
            time.sleep(seconds)
        rid = f"resp_{agent}{turn}"
        prefix = f"{agent}_" if agent else ""
        if kind == "exec":
            args: dict[str, Any] = dict(arg) if isinstance(arg, dict) else {"cmd": arg}  # a dict: more arguments
            if self.workdir and "workdir" not in args:
                args["workdir"] = self.workdir
            item = {
                "type": "function_call",
                "id": f"fc_{agent}{turn}",
                "call_id": f"{prefix}call_{turn}",
                "name": "exec_command",
                "arguments": json.dumps(args),
            }
        elif kind == "patch":
            item = {
                "type": "custom_tool_call",
                "id": f"ctc_{agent}{turn}",
                "call_id": f"{prefix}call_{turn}",
                "name": "apply_patch",
                "input": arg,
            }
        elif kind == "tool":
            item = {
                "type": "function_call",
                "id": f"fc_{agent}{turn}",
                "call_id": f"{prefix}call_{turn}",
                "name": arg["name"],
                "arguments": json.dumps(arg.get("arguments") or {}),
            }
            if arg.get("namespace"):
                item["namespace"] = arg["namespace"]
        else:
            item = {
                "type": "message",
                "id": f"msg_{agent}{turn}",
                "role": "assistant",
                "content": [{"type": "output_text", "text": arg}],
            }
        items = [item]
        if not agent and turn in self.thoughts:
            summary = [{"type": "summary_text", "text": self.thoughts[turn]}]
            items.insert(0, {"type": "reasoning", "id": f"rs_{turn}", "summary": summary})
        return [
            {"type": "response.created", "response": {"id": rid}},
            *[
                {"type": f"response.output_item.{stage}", "output_index": n, "item": it}
                for n, it in enumerate(items)
                for stage in ("added", "done")
            ],
            {"type": "response.completed", "response": {"id": rid, "usage": USAGE}},
        ]


def is_agent_turn(body: Any) -> bool:
    return isinstance(body, dict) and any(
        isinstance(t, dict) and t.get("name") == "exec_command" for t in body.get("tools") or []
    )


def codex_user_home(path: Path, base_url: str) -> Path:
    """A user's Codex home whose config points at the fake server (custom provider: Codex ignores a
    changed base_url of its built-in ``openai`` provider)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.toml").write_text(
        'model = "gpt-5.5"\nmodel_provider = "fake"\napproval_policy = "never"\n'
        'sandbox_mode = "danger-full-access"\n\n'
        f'[model_providers.fake]\nname = "fake"\nbase_url = "{base_url}"\nwire_api = "responses"\n'
        'env_key = "LEDGER_FAKE_KEY"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n'
        # the TUI would otherwise open by offering a newer model
        '[notice.model_migrations]\n"gpt-5.5" = "gpt-6-sol"\n'
    )
    return path


def codex_run_env(base: dict[str, str], fake: FakeResponses, home: Path, binary: str) -> dict[str, str]:
    """The environment of a ``ledger-run codex`` against ``fake``: a user Codex home of its own at
    ``home`` pointing at it, the fake's key, and the codex binary to run."""
    user_home = str(codex_user_home(home, fake.base_url))
    return {**base, "CODEX_HOME": user_home, "LEDGER_FAKE_KEY": "test", "LEDGER_CODEX_BIN": binary}


def function_outputs(body: dict[str, Any]) -> dict[str, str]:
    """call_id -> output text, of the tool results in one request."""
    return {
        i["call_id"]: i["output"] if isinstance(i.get("output"), str) else json.dumps(i.get("output"))
        for i in body.get("input", [])
        if i.get("type") in ("function_call_output", "custom_tool_call_output")
    }


def developer_texts(body: dict[str, Any]) -> list[str]:
    return [
        c.get("text", "")
        for i in body.get("input", [])
        if i.get("type") == "message" and i.get("role") == "developer"
        for c in i.get("content", [])
        if isinstance(c, dict)
    ]
