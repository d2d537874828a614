"""An HTTP server on loopback, in a thread of its own: what the tests' fake model APIs stand on
(fake_chat.py, fake_responses.py, fake_messages.py)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Loopback:
    """``serve(Handler)`` starts it on a free port; ``base_url`` is where the agent reaches it (plus
    ``base_path``); ``close()`` stops it."""

    base_path = ""

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.base_path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class JsonHandler(BaseHTTPRequestHandler):
    """A fake API's request handler: HTTP/1.1, quiet, ``send`` of a whole answer, ``json_body`` of the
    request (None when it is not JSON: answered 400), and 404 for any GET."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *a: object) -> None:
        pass

    def send(self, code: int, data: bytes, kind: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def json_body(self) -> dict | None:
        import json

        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self.send(400, b'{"error": {"code": 400, "message": "not a JSON object"}}')
            return None
        return body

    def do_GET(self) -> None:
        self.send(404, b'{"error": {"code": 404, "message": "not here"}}')
