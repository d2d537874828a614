"""A fake OpenAI-compatible Chat Completions API on loopback that drives the real ``opencode`` binary
through scripted turns (streamed as server-sent events, as such a provider streams them), and keeps
every request body OpenCode sent, so tests can check what reached the model.

Each request of the conversation takes the next step of the script, in order: ``("bash", command)``
(a call of OpenCode's ``bash`` tool), ``("tool", name, args)``, ``("tools", [(name, args), ...])`` (calls
made together), ``("say", text)``. After the last step every request ends the turn with a final
message. OpenCode's own requests (a title for the session, a summary when it compacts) get a short
answer and take no step.

Point opencode at it with a provider whose ``baseURL`` is ``base_url`` (``opencode_config``).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from loopback import JsonHandler, Loopback

SUMMARY = "The user asked to look at calc.py; it was read."


def step_calls(step: tuple, turn: int) -> tuple[str, list[dict[str, Any]]]:
    """A step as (text, tool calls) of one assistant message."""
    kind = step[0]
    if kind == "say":
        return step[1], []
    if kind == "bash":
        calls = [("bash", {"command": step[1], "description": "run a command"})]
    elif kind == "tool":
        calls = [(step[1], step[2])]
    elif kind == "tools":
        calls = list(step[1])
    else:
        raise ValueError(f"unknown step {step!r}")
    return "", [
        {"index": i, "id": f"call_{turn}_{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, (n, a) in enumerate(calls)
    ]


def chunks(text: str, calls: list[dict[str, Any]], model: str, usage: dict[str, int]) -> list[dict[str, Any]]:
    """The streamed chunks of one answer: its text, its tool calls, the finish and the usage."""
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model}
    out = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]}]
    if calls:
        out.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": calls}, "finish_reason": None}]})
    finish = "tool_calls" if calls else "stop"
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    out.append({**base, "choices": [], "usage": usage})
    return out


def is_side_request(body: dict[str, Any]) -> bool:
    """A request of OpenCode's own (a session title, a summary of the conversation): no tools offered."""
    return not body.get("tools")


class FakeCompletions(Loopback):
    base_path = "/v1"

    def __init__(self, steps: list[tuple], *, final: str = "All done.", prompt_tokens: int = 100):
        self.steps = list(steps)
        self.final = final
        self.prompt_tokens = prompt_tokens  # what each answer says the prompt cost
        self.big_at: set[int] = set()  # the conversation's requests whose answer says the context is full (compact)
        self.requests: list[dict[str, Any]] = []  # every request of the conversation, in order
        self.side: list[dict[str, Any]] = []  # OpenCode's own requests (titles, summaries)
        self.times: list[tuple[float, float]] = []  # per conversation request: (received, answered), monotonic
        self.on_request: Any = None  # called with a conversation request's index before it is answered
        self._lock = threading.Lock()
        server = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                received = time.monotonic()
                body = self.json_body()
                if body is None:
                    return
                model = str(body.get("model") or "fake")
                usage = {"prompt_tokens": server.prompt_tokens, "completion_tokens": 1}
                usage["total_tokens"] = usage["prompt_tokens"] + 1
                if is_side_request(body):
                    with server._lock:
                        server.side.append(body)
                    text, calls = "Look at calc.py" if len(server.side) == 1 else SUMMARY, []
                    usage = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
                else:
                    with server._lock:
                        server.requests.append(body)
                        turn = len(server.requests) - 1
                    if server.on_request is not None:
                        server.on_request(turn)
                    step = server.steps[turn] if turn < len(server.steps) else ("say", server.final)
                    text, calls = step_calls(step, turn)
                    if turn in server.big_at:
                        usage = {"prompt_tokens": 199_000, "completion_tokens": 1, "total_tokens": 199_001}
                if not body.get("stream"):
                    message = {"role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})}
                    answer = {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model}
                    answer["choices"] = [{"index": 0, "message": message, "finish_reason": "stop"}]
                    self.send(200, json.dumps({**answer, "usage": usage}).encode())
                else:
                    data = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks(text, calls, model, usage))
                    self.send(200, data + b"data: [DONE]\n\n", "text/event-stream")
                if not is_side_request(body):
                    with server._lock:
                        server.times.append((received, time.monotonic()))

        self.serve(Handler)


def opencode_config(fake: FakeCompletions, **more: Any) -> dict[str, Any]:
    """An OpenCode configuration whose one model is ``fake`` (an OpenAI-compatible provider)."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": fake.base_url, "apiKey": "sk-test-not-a-real-key"},
                "models": {"m": {"name": "Fake model", "limit": {"context": 200_000, "output": 8_000}}},
            }
        },
        "model": "fake/m",
        "small_model": "fake/m",
        "autoupdate": False,
        "share": "disabled",
        **more,
    }


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    """call id -> the text the model got, of every tool message in one request."""
    out = {}
    for m in body.get("messages") or []:
        if m.get("role") == "tool":
            c = m.get("content")
            out[m.get("tool_call_id")] = c if isinstance(c, str) else "".join(x.get("text", "") for x in c or [])
    return out
