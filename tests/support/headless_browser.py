"""Debian's `chromium`, headless, driven over the Chrome DevTools Protocol for tests.

`HeadlessChromium` starts the browser on a loopback debugging port, attaches to one page
and offers what a page test needs: open a URL and wait for its load event, evaluate an
expression, take a screenshot, and the console errors and uncaught exceptions the page
produced. The protocol runs over the `websockets` client that google-genai already needs.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

__all__ = ["HeadlessChromium", "chromium_binary"]


def chromium_binary() -> str | None:
    """The chromium executable on PATH, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class HeadlessChromium:
    """One headless chromium process with one attached page."""

    def __init__(self, binary: str, timeout_s: float = 30.0) -> None:
        self.binary = binary
        self.timeout_s = timeout_s
        self.errors: list[str] = []
        """Console errors, uncaught exceptions and error log entries, in order."""
        self._ids = itertools.count(1)
        self._events: list[dict[str, Any]] = []

    def __enter__(self) -> HeadlessChromium:
        self._stack = contextlib.ExitStack()
        self._profile = tempfile.mkdtemp(prefix="chromium-profile-")
        port = _free_port()
        self._process = subprocess.Popen(
            [
                self.binary,
                "--headless",
                "--no-sandbox",  # tests run as root in CI
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-address=127.0.0.1",
                f"--remote-debugging-port={port}",
                f"--user-data-dir={self._profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/json/version", timeout=2
                ) as r:
                    url = json.load(r)["webSocketDebuggerUrl"]
                break
            except OSError:
                if time.monotonic() > deadline or self._process.poll() is not None:
                    self._stop()
                    raise RuntimeError("chromium did not open its debugging port") from None
                time.sleep(0.1)
        self._socket: ClientConnection = self._stack.enter_context(
            connect(url, max_size=64 * 2**20)
        )
        target = self._call("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = self._call(
            "Target.attachToTarget",
            {"targetId": target["targetId"], "flatten": True},
            session=False,
        )
        self._session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self._call(f"{domain}.enable")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
        self._stop()

    def _stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    def _note(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            self.errors.append(" ".join(str(a.get("value", "")) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            self.errors.append(params["exceptionDetails"].get("text", "exception"))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(params["entry"]["text"])
        self._events.append(message)

    def _call(self, method: str, params: dict[str, Any] | None = None, session: bool = True) -> Any:
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        self._socket.send(json.dumps(message))
        while True:
            reply = json.loads(self._socket.recv(timeout=self.timeout_s))
            if reply.get("id") == ident:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._note(reply)

    def open(self, url: str) -> None:
        """Load `url` and wait for its load event."""
        self._events.clear()
        self._call("Page.navigate", {"url": url})
        deadline = time.monotonic() + self.timeout_s
        while not any(e.get("method") == "Page.loadEventFired" for e in self._events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not finish loading")
            self._note(json.loads(self._socket.recv(timeout=self.timeout_s)))

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable results)."""
        result = self._call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, width: int = 1100, height: int = 1300) -> None:
        """Save a PNG of the page's top `width` x `height` pixels."""
        self._call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        shot = self._call("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(shot["data"]))
