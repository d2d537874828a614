"""A fake Anthropic Messages API on loopback that drives the real ``claude`` binary (Claude Code)
through scripted turns (server-sent events, as the API streams them), and keeps every request body
Claude Code sent, so tests can check what reached the model.

Each request that streams takes the next step of the script, in order (Claude Code sends one request
at a time per agent; a subagent's requests take steps too): ``("bash", command)``, ``("tool", name,
input)``, ``("tools", [(name, input), ...])`` (calls made together), ``("say", text)``. After the last
step every request ends the turn with a final message. Requests that do not stream (token counts, a
side question) get a short answer and take no step.

Point claude at it with ``ANTHROPIC_BASE_URL`` (``base_url``) and any ``ANTHROPIC_API_KEY``;
``claude_env`` gives the whole environment, with Claude Code's non-essential traffic off.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from loopback import Loopback

USAGE = {"input_tokens": 100, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


SUMMARY = "<summary>The user asked to look at calc.py; it was read.</summary>"


def is_compaction(body: dict[str, Any]) -> bool:
    """Whether a request asks for a summary of the conversation (Claude Code compacting it): its last
    message asks for the summary inside <summary> tags."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    content = last.get("content") if isinstance(last, dict) else None
    text = content if isinstance(content, str) else json.dumps(content)
    return "<summary>" in text and "summar" in text.lower()


def sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def step_blocks(step: tuple, turn: int) -> list[tuple[str, Any]]:
    """A step as content blocks: ("text", text) or ("tool_use", (id, name, input))."""
    kind = step[0]
    if kind == "say":
        return [("text", step[1])]
    if kind == "bash":
        return [("tool_use", (f"toolu_{turn}_0", "Bash", {"command": step[1], "description": "run a command"}))]
    if kind == "tool":
        return [("tool_use", (f"toolu_{turn}_0", step[1], step[2]))]
    if kind == "tools":
        return [("tool_use", (f"toolu_{turn}_{i}", name, inp)) for i, (name, inp) in enumerate(step[1])]
    raise ValueError(f"unknown step {step!r}")


def stream_events(step: tuple, turn: int, model: str) -> list[dict[str, Any]]:
    """The server-sent events of one response: the step's blocks, then the stop."""
    blocks = step_blocks(step, turn)
    message = {
        "id": f"msg_{turn}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": USAGE,
    }
    out: list[dict[str, Any]] = [{"type": "message_start", "message": message}]
    for i, (kind, value) in enumerate(blocks):
        if kind == "text":
            out.append({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
            out.append({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": value}})
        else:
            call, name, inp = value
            block = {"type": "tool_use", "id": call, "name": name, "input": {}}
            out.append({"type": "content_block_start", "index": i, "content_block": block})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(inp)}
            out.append({"type": "content_block_delta", "index": i, "delta": delta})
        out.append({"type": "content_block_stop", "index": i})
    stop = "tool_use" if any(k == "tool_use" for k, _ in blocks) else "end_turn"
    out.append({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": USAGE})
    out.append({"type": "message_stop"})
    return out


class FakeMessages(Loopback):
    def __init__(self, steps: list[tuple], *, final: str = "All done."):
        self.steps = list(steps)
        self.final = final
        self.requests: list[dict[str, Any]] = []  # every streamed request's body, in order
        self.times: list[tuple[float, float]] = []  # per streamed request: (received, answered), monotonic
        self.on_request: Any = None  # called with a streamed request's index before it is answered
        self.compactions: list[dict[str, Any]] = []  # requests for a summary of the conversation (/compact)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def _json(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                received = time.monotonic()
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    if self.headers.get("content-encoding") == "gzip":
                        raw = gzip.decompress(raw)
                    body = json.loads(raw)
                except Exception as e:  # keep what came, answer an error
                    self._json(400, {"type": "error", "error": {"type": "invalid_request_error", "message": repr(e)}})
                    return
                model = str(body.get("model") or "claude-test")
                if "count_tokens" in self.path:
                    self._json(200, {"input_tokens": 100})
                    return
                if not body.get("stream"):
                    text = {"type": "text", "text": "ok"}
                    self._json(
                        200,
                        {
                            "id": "msg_side",
                            "type": "message",
                            "role": "assistant",
                            "model": model,
                            "content": [text],
                            "stop_reason": "end_turn",
                            "stop_sequence": None,
                            "usage": USAGE,
                        },
                    )
                    return
                if is_compaction(body):  # Claude Code asks for a summary of the conversation: no step taken
                    with server._lock:
                        server.compactions.append(body)
                    payload = b"".join(sse(e) for e in stream_events(("say", SUMMARY), 0, model))
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                with server._lock:
                    server.requests.append(body)
                    turn = len(server.requests) - 1
                if server.on_request is not None:
                    server.on_request(turn)
                step = server.steps[turn] if turn < len(server.steps) else ("say", server.final)
                payload = b"".join(sse(e) for e in stream_events(step, turn, model))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()
                with server._lock:
                    server.times.append((received, time.monotonic()))

            def do_GET(self) -> None:  # model listings and the like: not offered
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "not here"}})

        self.serve(Handler)


def claude_env(base: dict[str, str], fake: FakeMessages, home: Path, config: Path | None = None) -> dict[str, str]:
    """An environment for the real claude against ``fake``: a HOME and a Claude Code configuration
    directory of its own, a dummy API key, and no traffic but the model's."""
    env = {k: v for k, v in base.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env.update(
        {
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(config or home / ".claude"),
            "ANTHROPIC_BASE_URL": fake.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }
    )
    return env


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    """tool_use_id -> the text the model got, of every tool result in one request."""
    out = {}
    for m in body.get("messages", []):
        content = m.get("content")
        if m.get("role") != "user" or not isinstance(content, list):
            continue
        for b in content:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                c = b.get("content")
                text = c if isinstance(c, str) else "".join(x.get("text", "") for x in c or [] if isinstance(x, dict))
                out[b["tool_use_id"]] = text
    return out


def context_texts(body: dict[str, Any]) -> list[str]:
    """The texts of the conversation that are not the model's and not tool results: where a hook's
    additionalContext and a Stop hook's reason reach the model (system messages, reminders)."""
    out = []
    for m in body.get("messages", []):
        content = m.get("content")
        if isinstance(content, str):
            if m.get("role") == "system" or "<system-reminder>" in content:
                out.append(content)
            continue
        for b in content or []:
            if isinstance(b, dict) and b.get("type") == "text" and (m.get("role") == "system"):
                out.append(b.get("text", ""))
    return out
