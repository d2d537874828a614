"""A fake Gemini API (``generativelanguage``'s ``v1beta``) on loopback that drives the real ``gemini``
binary (Gemini CLI) through scripted turns, and keeps every request body Gemini CLI sent, so tests can
check what reached the model.

Each streamed request (``:streamGenerateContent?alt=sse``) of the main conversation takes the next step
of the script, in order: ``("bash", command)`` (a ``run_shell_command`` call), ``("tool", name, args)``,
``("tools", [(name, args), ...])`` (calls made together), ``("say", text)``. After the last step every
request ends the turn with a final message. Gemini CLI's side requests (a summary of the history when
it compresses it, its checks of who speaks next, a title) get a short answer and take no step.

Point gemini at it with ``GOOGLE_GEMINI_BASE_URL`` (``base_url``) and any ``GEMINI_API_KEY``;
``gemini_env`` gives the whole environment, with a HOME of its own.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from loopback import JsonHandler, Loopback

USAGE = {"promptTokenCount": 100, "candidatesTokenCount": 1, "totalTokenCount": 101, "cachedContentTokenCount": 0}
SUMMARY = "<state_snapshot>The user asked to look at calc.py; it was read.</state_snapshot>"


def step_parts(step: tuple, turn: int) -> list[dict[str, Any]]:
    """A step as the parts of one model message."""
    kind = step[0]
    if kind == "say":
        return [{"text": step[1]}]
    if kind == "bash":
        return [{"functionCall": {"id": f"call_{turn}_0", "name": "run_shell_command", "args": {"command": step[1]}}}]
    if kind == "tool":
        return [{"functionCall": {"id": f"call_{turn}_0", "name": step[1], "args": step[2]}}]
    if kind == "tools":
        return [
            {"functionCall": {"id": f"call_{turn}_{i}", "name": name, "args": args}}
            for i, (name, args) in enumerate(step[1])
        ]
    raise ValueError(f"unknown step {step!r}")


def response(parts: list[dict[str, Any]], prompt_tokens: int = 100) -> dict[str, Any]:
    usage = {**USAGE, "promptTokenCount": prompt_tokens, "totalTokenCount": prompt_tokens + 1}
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": usage,
        "modelVersion": "gemini-2.5-pro",
    }


def is_side_request(body: dict[str, Any]) -> bool:
    """A request of Gemini CLI's own (a summary, a check of who speaks next, a JSON answer): not the
    conversation's next turn."""
    config = body.get("generationConfig") or {}
    if config.get("responseMimeType") == "application/json" or config.get("responseJsonSchema"):
        return True
    contents = body.get("contents") or []
    last = contents[-1] if contents else {}
    text = "".join(p.get("text", "") for p in last.get("parts") or [] if isinstance(p, dict))
    return "<state_snapshot>" in text or "state_snapshot" in json.dumps(body.get("systemInstruction") or "")


def side_answer(body: dict[str, Any]) -> dict[str, Any]:
    config = body.get("generationConfig") or {}
    if config.get("responseMimeType") == "application/json" or config.get("responseJsonSchema"):
        text = json.dumps(
            {
                "reasoning": "the user speaks next",
                "next_speaker": "user",
                "model_choice": "flash",
                "complexity_reasoning": "a small task",
                "complexity_score": 10,
            }
        )
    else:
        text = SUMMARY
    return response([{"text": text}])


class FakeGemini(Loopback):
    def __init__(self, steps: list[tuple], *, final: str = "All done.", prompt_tokens: int = 100):
        self.steps = list(steps)
        self.prompt_tokens = prompt_tokens  # what each answer says the prompt cost (a big one makes gemini compress)
        self.final = final
        self.requests: list[dict[str, Any]] = []  # every streamed request of the conversation, in order
        self.side: list[dict[str, Any]] = []  # Gemini CLI's own requests (summaries, checks)
        self.paths: list[str] = []
        self.times: list[tuple[float, float]] = []  # per conversation request: (received, answered)
        self.on_request: Any = None  # called with a conversation request's index before it is answered
        self._lock = threading.Lock()
        server = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                received = time.monotonic()
                body = self.json_body()
                if body is None:
                    return
                with server._lock:
                    server.paths.append(self.path)
                if ":countTokens" in self.path:
                    self.send(200, json.dumps({"totalTokens": 100}).encode())
                    return
                streamed = ":streamGenerateContent" in self.path
                if is_side_request(body) or not streamed:
                    with server._lock:
                        server.side.append(body)
                    answer = side_answer(body)
                    if streamed:
                        self.send(200, f"data: {json.dumps(answer)}\r\n\r\n".encode(), "text/event-stream")
                    else:
                        self.send(200, json.dumps(answer).encode())
                    return
                with server._lock:
                    server.requests.append(body)
                    turn = len(server.requests) - 1
                if server.on_request is not None:
                    server.on_request(turn)
                step = server.steps[turn] if turn < len(server.steps) else ("say", server.final)
                data = f"data: {json.dumps(response(step_parts(step, turn), server.prompt_tokens))}\r\n\r\n".encode()
                self.send(200, data, "text/event-stream")
                with server._lock:
                    server.times.append((received, time.monotonic()))

        self.serve(Handler)


def gemini_env(base: dict[str, str], fake: FakeGemini, home: Path) -> dict[str, str]:
    """An environment for the real gemini against ``fake``: a HOME of its own, a dummy API key, and no
    traffic but the model's."""
    env = {k: v for k, v in base.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    env.update(
        {
            "HOME": str(home),
            "GEMINI_API_KEY": "AIza-test-not-a-real-key",
            "GOOGLE_GEMINI_BASE_URL": fake.base_url,
            "GEMINI_CLI_NO_RELAUNCH": "true",
            "NO_BROWSER": "true",
        }
    )
    return env


def function_responses(body: dict[str, Any]) -> dict[str, Any]:
    """call id -> the response object the model got, of every function response in one request."""
    out = {}
    for content in body.get("contents") or []:
        for part in content.get("parts") or []:
            fr = part.get("functionResponse") if isinstance(part, dict) else None
            if isinstance(fr, dict):
                out[fr.get("id") or fr.get("name")] = fr.get("response")
    return out
