"""`ServerProcess`: `surgeplan serve` in a child process on a free loopback port, for the soak
benchmark, `surgeplan validate --via http` and anything else that needs a real server process.

The server's stdout and stderr go to a log file (a temporary one unless named), never to a pipe: a
pipe nobody drains fills up after some 64 KiB of log lines and then stalls the server mid-run. The
log's tail is in every error. Pure standard library and httpx: importing it loads no torch.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ServerProcess:
    """`surgeplan serve OPTIONS --host 127.0.0.1 --port PORT`, its output in `log_path`; `env` is
    added to the environment (e.g. OMP_NUM_THREADS=1 when clients share the cores). Use
    `wait_healthy` before sending requests and `stop` (SIGTERM: the server drains and exits) or
    `close` when done; as a context manager it waits for health on entry and stops on exit."""

    def __init__(
        self,
        options: list[str],
        log_path: str | Path | None = None,
        env: dict[str, str] | None = None,
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._owns_log = log_path is None  # a temporary log is removed when the server stops
        if log_path is None:
            handle, log_path = tempfile.mkstemp(prefix="surgeplan-serve-", suffix=".log")
            os.close(handle)
        self.log_path = Path(log_path)
        self._log = self.log_path.open("w")
        command = [
            sys.executable,
            "-m",
            "engine.openai.cli",
            *options,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        self.process = subprocess.Popen(
            command,
            cwd=REPO,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=os.environ | (env or {}),
        )

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def wait_healthy(self, timeout_s: float = 180.0) -> None:
        """Until GET /health answers 200; a server that exits or stays silent is an error with its
        log."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.close()
                raise RuntimeError(
                    f"surgeplan serve exited with {self.process.returncode}: {self.log_tail()}"
                )
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.close()
        raise RuntimeError(
            f"surgeplan serve did not answer /health on {self.url} within {timeout_s:.0f} s: "
            f"{self.log_tail()}"
        )

    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM: the server drains and exits; its exit status (killed if it outlasts
        `timeout_s`)."""
        if self._log.closed:
            return self.process.wait()
        try:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                return self.process.wait()
        finally:
            self._log.close()
            if self._owns_log:
                self.log_path.unlink(missing_ok=True)

    def close(self) -> None:
        """Stop the server if it still runs (idempotent)."""
        self.stop(timeout_s=30.0)

    def __enter__(self) -> ServerProcess:
        self.wait_healthy()
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
