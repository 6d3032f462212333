"""Drive ``labgang top --web`` in a real Chromium (Debian's ``chromium``) with Playwright.

The page draws the terminal on a canvas (xterm.js), so its text is not in the DOM. An init script
catches the page's xterm ``Terminal`` object as textual-serve's script stores it
(``this.terminal = new Terminal(...)``) and :func:`screen_text` reads the lines xterm holds for
the screen: what the viewer sees, as text.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

CATCH_TERMINAL = """
Object.defineProperty(Object.prototype, 'terminal', {
  configurable: true,
  set(value) {
    window.__labgangTerminal = value;
    Object.defineProperty(this, 'terminal', {value, writable: true, configurable: true, enumerable: true});
  },
  get() { return undefined; },
});
"""

READ_SCREEN = """() => {
  const t = window.__labgangTerminal;
  if (!t) return '';
  const b = t.buffer.active, out = [];
  for (let i = 0; i < t.rows; i++) {
    const l = b.getLine(b.viewportY + i);
    out.push(l ? l.translateToString(true) : '');
  }
  return out.join('\\n');
}"""


def need_chromium() -> str:
    """The Chromium executable, or skip the test saying why."""
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install chromium; .ci/run installs it)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    return CHROMIUM


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_web(args: list[str], port: int, log: Path) -> subprocess.Popen[bytes]:
    """``labgang top --web --port PORT ARGS`` as a subprocess; returns once the port answers."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "labgang.launcher", "top", "--web", "--port", str(port), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"top --web exited {proc.returncode}: {log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"top --web never listened on {port}: {log.read_text()}")


def screen_text(page) -> str:
    """The lines on the viewer's screen."""
    return page.evaluate(READ_SCREEN)


def wait_screen(page, predicate: Callable[[str], bool], what: str, timeout: float = 60.0) -> str:
    """Poll the screen until ``predicate(text)``; fail naming ``what`` and showing the screen."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = screen_text(page)
        if predicate(text):
            return text
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; the screen:\n{text}")


def open_viewer(browser, url: str):
    """A new page on ``url`` with the terminal caught and the keyboard on it (after the first frame)."""
    page = browser.new_page(viewport={"width": 1500, "height": 950})
    page.add_init_script(CATCH_TERMINAL)
    page.goto(url)
    wait_screen(page, lambda t: "Devices [1]" in t, "the first frame of the app")
    page.focus(".xterm-helper-textarea")
    return page
