"""A real headless browser for the page tests: Debian's chromium, driven through the DevTools
protocol over a pipe (``--remote-debugging-pipe``: JSON messages ending in a NUL byte on the
browser's file descriptors 3 and 4; no port, no websocket, no library). A test loads a page, clicks
where a person would (mouse events at an element's place on the screen), types, takes screenshots
(PNG) and asks the page what is on the screen.

Without a chromium the tests using it skip and say so; with LEDGER_REQUIRE_BROWSER set (CI) a
missing one is an error.
"""

from __future__ import annotations

import base64
import fcntl
import io
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
if BROWSER is None and os.environ.get("LEDGER_REQUIRE_BROWSER"):
    raise RuntimeError("LEDGER_REQUIRE_BROWSER is set but no chromium was found")

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
]


def launching() -> str:
    """The browser's path, for a test about to start it (skips when there is none). The test must be
    marked ``browser``: conftest.py fails one that is not, so that the fast subset never starts one."""
    os.environ["LEDGER_TEST_STARTED_BROWSER"] = "1"
    if BROWSER is None:
        pytest.skip("no headless browser: apt-get install chromium (CI installs it)")
    return BROWSER


class Browser:
    """One headless chromium with one page open, ``width`` x ``height`` CSS pixels."""

    def __init__(self, width: int = 1280, height: int = 900, timeout: float = 60):
        launching()
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="ledger-browser-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def fds() -> None:  # in the child: the pipe ends become its descriptors 3 and 4
            r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.proc = subprocess.Popen(
            [BROWSER, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,
            preexec_fn=fds,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page.enable", "Runtime.enable"):
            self.call(domain, session=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        self.width, self.height = width, height

    # -- the protocol ---------------------------------------------------------------------------

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._next(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result") or {}
            self.events.append(reply)

    def _next(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise TimeoutError("the browser did not answer")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("the browser closed its pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    # -- what a person does -------------------------------------------------------------------

    def open(self, path: Path) -> None:
        """Load a page and wait until its script has run (``data-ready`` on its body)."""
        self.call("Page.navigate", session=True, url=path.resolve().as_uri())
        deadline = time.monotonic() + self.timeout
        while self.js("document.readyState === 'complete' && document.body && document.body.dataset.ready") != "1":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path} did not get ready")
            time.sleep(0.05)

    def js(self, expression: str) -> Any:
        """The value of a JavaScript expression on the page."""
        r = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return (r.get("result") or {}).get("value")

    def click(self, selector: str) -> None:
        """A mouse click in the middle of the element, scrolled into view first, as a person clicks."""
        box = self.js(
            f"(function(){{var el=document.querySelector({json.dumps(selector)});"
            "el.scrollIntoView({block:'center'});var r=el.getBoundingClientRect();"
            "return [r.left+r.width/2, r.top+r.height/2];})()"
        )
        x, y = box
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", session=True, type=kind, x=x, y=y, button="left", clickCount=1)
        time.sleep(0.1)

    def type(self, selector: str, text: str) -> None:
        """Focus a field by clicking it, then type ``text`` as keyboard input."""
        self.click(selector)
        self.call("Input.insertText", session=True, text=text)
        time.sleep(0.1)

    def visible(self, selector: str) -> list[str]:
        """The ids of the elements matching ``selector`` that are rendered (not hidden)."""
        return self.js(
            f"[].filter.call(document.querySelectorAll({json.dumps(selector)}),"
            "function(el){return el.getClientRects().length>0;}).map(function(el){return el.id;})"
        )

    def on_screen(self, selector: str) -> bool:
        """Whether the element's top lies inside the window, below the page's bar when that is stuck at
        the top of the window."""
        return self.js(
            f"(function(){{var el=document.querySelector({json.dumps(selector)});if(!el)return false;"
            "var r=el.getBoundingClientRect(),nav=document.querySelector('nav'),n=nav&&nav.getBoundingClientRect();"
            "var top=n&&n.top<=0?n.bottom:0;"
            "return r.height>0&&r.top>=top-1&&r.top<window.innerHeight;})()"
        )

    def screenshot(self, path: Path) -> Any:
        """A PNG of what the window shows now, saved to ``path``; returned as an RGB image (Pillow)."""
        from PIL import Image

        data = base64.b64decode(self.call("Page.captureScreenshot", session=True, format="png")["data"])
        path.write_bytes(data)
        return Image.open(io.BytesIO(data)).convert("RGB")

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)


def pixels(image: Any, rgb: tuple[int, int, int]) -> int:
    """How many pixels of ``image`` have exactly the colour ``rgb``."""
    return sum(n for n, c in image.getcolors(maxcolors=1 << 24) if c == rgb)


def hex_rgb(color: str) -> tuple[int, int, int]:
    color = color.lstrip("#")
    return int(color[0:2], 16), int(color[2:4], 16), int(color[4:6], 16)
