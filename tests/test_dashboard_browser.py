"""The dashboard in a real browser: `streamlit run` (through `surgeplan dashboard`'s own command line) on
127.0.0.1, each page opened in headless Chromium driven over the DevTools protocol. A page passes when
its title is up, its script has finished, its Plotly charts have drawn, and it shows no exception and
no error. A full-page screenshot of each is saved (to $SURGEPLAN_SCREENSHOTS, or a temporary folder).

Chromium comes from Debian's package; when it is missing the test installs it with apt-get (CI runs as
root) and skips, saying why, only where that is impossible. The DevTools client uses `websockets`,
which Streamlit already depends on: no browser download, no extra package.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from dashboard.cli import streamlit_command
from dashboard.data import saved_files

WIDTH = 1440
# url path -> Plotly charts the page shows with its defaults ("": the What-if page, the app's default; the
# Plan page searches only when asked; Validate: the error chart and the first load level's distributions)
PAGES = {
    "": 1,
    "whatif": 1,
    "paged": 1,
    "traces": 2,
    "calibrations": 1,
    "plan": 0,
    "validate": 2 if saved_files.VALIDATE_JSON.is_file() else 0,
}
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
    f"--window-size={WIDTH},1000",
]
STATE = """(() => {
  const plots = [...document.querySelectorAll('.js-plotly-plot')];
  const status = document.querySelector('[data-testid="stStatusWidget"]');
  return {title: (document.querySelector('h1') || {}).innerText || '',
          plots: plots.length,
          drawn: plots.filter(p => p.querySelector('.main-svg .trace') && p.getBoundingClientRect().width > 100).length,
          running: !!(status && /running|stop/i.test(status.innerText))
                   || !!document.querySelector('[data-testid="stSpinner"]'),
          exceptions: document.querySelectorAll('[data-testid="stException"]').length,
          errors: [...document.querySelectorAll('[data-testid="stAlertContentError"]')].map(e => e.innerText),
          text: document.body.innerText,
          height: Math.max(...[...document.querySelectorAll('[data-testid="stMain"], '
                                                         + '[data-testid="stMainBlockContainer"]')]
                           .map(e => e.scrollHeight), document.body.scrollHeight)};
})()"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if not shutil.which("apt-get"):
        pytest.skip("chromium is not installed and there is no apt-get to install it with")
    if os.geteuid() != 0:
        pytest.skip("chromium is not installed and installing it with apt-get needs root")
    for command in (
        ["apt-get", "install", "-y", "-q", "chromium"],
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "chromium"],
    ):
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
        if shutil.which("chromium"):
            return shutil.which("chromium")
    pytest.skip(
        f"apt-get could not install chromium: {(done.stderr or done.stdout).strip()[-300:]}"
    )


def _wait(condition, timeout_s: float, what: str, pause_s: float = 0.25):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(pause_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


class DevTools:
    """A minimal DevTools-protocol client for one page target."""

    def __init__(self, websocket_url: str):
        from websockets.sync.client import connect

        self.socket = connect(websocket_url, max_size=None, open_timeout=30).__enter__()
        self.next_id = 0

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=120))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def close(self) -> None:
        self.socket.close()


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("streamlit") / "server.log"
    with log.open("w") as handle:
        process = subprocess.Popen(
            streamlit_command("127.0.0.1", port),
            stdout=handle,
            stderr=subprocess.STDOUT,
            cwd=saved_files.ROOT,
        )
    try:
        _wait(
            lambda: (
                process.poll() is not None or _http_ok(f"http://127.0.0.1:{port}/_stcore/health")
            ),
            120,
            "the Streamlit server",
        )
        assert process.poll() is None, log.read_text()[-2000:]
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    executable = _chromium()
    profile = tmp_path_factory.mktemp("chromium-profile")
    process = subprocess.Popen(
        [executable, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        _wait(
            lambda: (
                process.poll() is not None
                or (port_file.is_file() and port_file.read_text().strip())
            ),
            60,
            "Chromium's DevTools port",
        )
        assert process.poll() is None, "chromium exited at start"
        port = int(port_file.read_text().split()[0])
        targets = json.loads(
            urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read()
        )
        page = next(target for target in targets if target["type"] == "page")
        tools = DevTools(page["webSocketDebuggerUrl"])
        tools.call("Page.enable")
        yield tools
        tools.close()
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("SURGEPLAN_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _settled(tools: DevTools, charts: int, previous: list) -> dict | None:
    state = tools.evaluate(STATE)
    ready = (
        state["title"]
        and not state["running"]
        and state["drawn"] >= charts
        and state["plots"] >= charts
    )
    stable = (
        ready and previous and previous[-1] == (state["title"], state["drawn"], len(state["text"]))
    )
    previous.append((state["title"], state["drawn"], len(state["text"])))
    return state if stable else None


SHARED_TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(
            path,
            marks=pytest.mark.skipif(
                path == "traces" and not SHARED_TRACES.is_dir(),
                reason="the Traces page opens ../shared/traces, not beside the checkout",
            ),
        )
        for path in PAGES
    ],
)
def test_page_renders_in_chromium(server, browser, shots, path):
    charts = PAGES[path]
    browser.call(
        "Emulation.setDeviceMetricsOverride",
        width=WIDTH,
        height=1000,
        deviceScaleFactor=1,
        mobile=False,
    )
    browser.call("Page.navigate", url=f"{server}/{path}")
    time.sleep(1.0)  # let the old page go before reading the new one
    history: list = []
    state = _wait(
        lambda: _settled(browser, charts, history),
        240,
        f"page {path!r} to render {charts} chart(s)",
        0.5,
    )
    assert state["exceptions"] == 0 and "Traceback" not in state["text"], state["text"][:3000]
    assert not state["errors"], state["errors"]
    height = min(int(state["height"]) + 40, 4000)
    browser.call(
        "Emulation.setDeviceMetricsOverride",
        width=WIDTH,
        height=height,
        deviceScaleFactor=1,
        mobile=False,
    )
    history = []
    _wait(
        lambda: _settled(browser, charts, history),
        60,
        f"page {path!r} to redraw at full height",
        0.5,
    )
    time.sleep(0.5)
    png = base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"])
    (shots / f"{path or 'whatif'}.png").write_bytes(png)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
