"""A fake model provider on loopback for litellm: OpenAI's Chat Completions (``/v1/chat/completions``)
and Anthropic's Messages API (``/v1/messages``), answering scripted replies in order and keeping
every request body, so a test sees exactly what reached the provider (messages, ``cache_control``).
Reached by litellm through ``api_base``; usage is reported as the provider would (no cache hits).
A reply given as ``{"command": ...}`` comes back as a call of mini-swe-agent's ``bash`` tool (Chat
Completions), as a model served by vLLM with tool calling answers."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from loopback import Loopback


class FakeChat(Loopback):
    def __init__(self, replies: list[str | dict[str, str]], reasoning: list[str] | None = None):
        self.replies = list(replies)
        self.reasoning = list(reasoning or [])  # a reasoning model's thoughts, reply by reply (Chat Completions)
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                body = json.loads(raw or b"{}")
                with server._lock:
                    n = len(server.requests)
                    server.requests.append(body)
                    server.paths.append(self.path)
                text = server.replies[n] if n < len(server.replies) else server.replies[-1]
                call = None
                if isinstance(text, dict):
                    call = {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": text["command"]})},
                    }
                    text = text.get("thought", f"step {n}")
                chars = len(raw)
                if self.path.rstrip("/").endswith("/messages"):
                    reply = {
                        "id": f"msg_{n}",
                        "type": "message",
                        "role": "assistant",
                        "model": body.get("model", "claude"),
                        "content": [{"type": "text", "text": text}],
                        "stop_reason": "end_turn",
                        "stop_sequence": None,
                        "usage": {
                            "input_tokens": chars // 4,
                            "output_tokens": len(text) // 4 + 1,
                            "cache_read_input_tokens": 0,
                            "cache_creation_input_tokens": 0,
                        },
                    }
                else:
                    message: dict[str, Any] = {
                        "role": "assistant",
                        "content": text,
                        **({"tool_calls": [call]} if call else {}),
                    }
                    if n < len(server.reasoning):
                        message["reasoning_content"] = server.reasoning[n]
                    reply = {
                        "id": f"chatcmpl-{n}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model", "fake"),
                        "choices": [
                            {"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}
                        ],
                        "usage": {
                            "prompt_tokens": chars // 4,
                            "completion_tokens": len(text) // 4 + 1,
                            "total_tokens": chars // 4 + len(text) // 4 + 1,
                            "prompt_tokens_details": {"cached_tokens": 0},
                        },
                    }
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.serve(Handler)


def message_texts(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of every message of a request, the system prompt first (Anthropic sends it apart)."""
    out: list[tuple[str, str]] = []
    system = body.get("system")
    if isinstance(system, str):
        out.append(("system", system))
    elif isinstance(system, list):
        out.append(("system", "".join(b.get("text", "") for b in system if isinstance(b, dict))))
    for m in body.get("messages") or []:
        c = m.get("content")
        text = c if isinstance(c, str) else "".join(b.get("text", "") for b in c or [] if isinstance(b, dict))
        out.append((m.get("role", ""), text))
    return out


def breakpoints(body: dict[str, Any]) -> list[int]:
    """Indexes (as in ``message_texts``) of the messages that carry a ``cache_control`` breakpoint."""
    found = []
    offset = 1 if body.get("system") else 0
    if isinstance(body.get("system"), list) and any("cache_control" in b for b in body["system"]):
        found.append(0)
    for i, m in enumerate(body.get("messages") or []):
        blocks = m.get("content") if isinstance(m.get("content"), list) else []
        if "cache_control" in m or any(isinstance(b, dict) and "cache_control" in b for b in blocks):
            found.append(i + offset)
    return found
