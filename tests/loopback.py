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
