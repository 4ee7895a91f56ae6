"""A real uvicorn server on 127.0.0.1 (a free port) in a background thread, for the server tests
and the serving benchmark. Used as a context manager: it is shut down on exit (`drain` stops it the
way SIGTERM does)."""

import re
import signal
import socket
import threading
import time
from contextlib import contextmanager

import httpx

from engine.config import EngineConfig
from engine.openai.api_server import build_app
from engine.openai.drain import make_server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    def __init__(self, app, startup_timeout_s: float = 60.0):
        self.app = app
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.server = make_server(app, log_level="warning", lifespan="on")
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True
        )
        self.startup_timeout_s = startup_timeout_s

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "LiveServer":
        self.thread.start()
        deadline = time.monotonic() + self.startup_timeout_s
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(
                    f"the test server did not start within {self.startup_timeout_s} s"
                )
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.socket.close()

    def drain(self) -> None:
        """What SIGTERM does: stop admitting, let requests in flight finish (up to the drain timeout), exit."""
        self.server.handle_exit(signal.SIGTERM, None)

    @property
    def serving(self):
        return self.app.state.serving

    def metric(self, name: str, **labels: str) -> float:
        """One sample's value from /metrics (labels other than those given are ignored)."""
        return metric_value(httpx.get(f"{self.url}/metrics", timeout=10).text, name, **labels)

    def metric_after_exit(self, name: str, **labels: str) -> float:
        """The same, read in-process: for a server that has already shut down."""
        return metric_value(self.app.state.metrics.render().decode(), name, **labels)

    def wait_idle(self, timeout_s: float = 30.0) -> None:
        """Until the engine holds no request and its KV blocks are all free (as /metrics reports)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if (
                self.serving.engine.num_unfinished == 0
                and self.metric("vllm:num_requests_running") == 0
                and self.metric("vllm:num_requests_waiting") == 0
                and self.metric("vllm:kv_cache_usage_perc") == 0
            ):
                return
            time.sleep(0.05)
        raise TimeoutError(f"the server was not idle after {timeout_s} s")


def metric_value(text: str, name: str, **labels: str) -> float:
    """One sample's value in Prometheus text (labels other than those given are ignored)."""
    for line in text.splitlines():
        match = re.match(r"^([^\s{]+)(\{[^}]*\})?\s+(\S+)$", line)
        if (
            match
            and match.group(1) == name
            and all(f'{k}="{v}"' in (match.group(2) or "") for k, v in labels.items())
        ):
            return float(match.group(3))
    raise KeyError(f"metric {name} {labels} not in /metrics")


@contextmanager
def slow_steps(live: LiveServer, step_s: float):
    """Every engine step takes at least `step_s` while inside: a request of n tokens then stays in flight
    for at least n * step_s, however fast the machine (a lower bound, never an upper one)."""
    runner = live.serving.engine.engine.model_runner
    real_execute = runner.execute

    def slow_execute(scheduled):
        time.sleep(step_s)
        return real_execute(scheduled)

    runner.execute = slow_execute
    try:
        yield
    finally:
        runner.execute = real_execute


def tiny_config(**overrides) -> EngineConfig:
    settings = dict(
        model="tiny",
        load_format="dummy",
        block_size=8,
        num_kv_blocks=64,
        max_num_seqs=8,
        max_num_batched_tokens=256,
        max_model_len=128,
        seed=0,
    )
    settings.update(overrides)
    return EngineConfig(**settings)


def tiny_server(engine_overrides: dict | None = None, **server_options) -> LiveServer:
    return LiveServer(build_app(tiny_config(**(engine_overrides or {})), **server_options))
