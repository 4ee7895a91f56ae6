"""Graceful drain: on SIGTERM / Ctrl-C the server stops admitting (503 + Retry-After, /health 503),
lets requests in flight finish, aborts those still running at --drain-timeout with a 503 that says
why (counted as aborted for "drain"), frees every KV block and exits with status 0."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import httpx
from live_server import free_port, slow_steps, tiny_server

ENGINE = {"max_model_len": 512, "num_kv_blocks": 160, "max_num_seqs": 4}
STEP_S = 0.01  # slowed engine steps: a request of n tokens stays in flight ≥ n * STEP_S


def body(max_tokens: int, **extra) -> dict:
    return {"prompt": [5, 6, 7, 8], "max_tokens": max_tokens, "ignore_eos": True} | extra


class Stream(threading.Thread):
    """A streaming request read to its end in the background; `started` once its first event came."""

    def __init__(self, url: str, max_tokens: int):
        super().__init__(daemon=True)
        self.url, self.max_tokens = url, max_tokens
        self.started, self.events = threading.Event(), []

    def run(self) -> None:
        with httpx.stream(
            "POST",
            f"{self.url}/v1/completions",
            json=body(self.max_tokens, stream=True),
            timeout=60,
        ) as response:
            for line in response.iter_lines():
                if line.startswith("data:"):
                    self.events.append(line[5:].strip())
                    self.started.set()

    def text_events(self) -> list[dict]:
        return [json.loads(e) for e in self.events if e != "[DONE]"]


def wait_until(predicate, timeout_s: float = 30.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout_s} s")
        time.sleep(0.02)


def draining(url: str) -> bool:
    return httpx.get(f"{url}/health", timeout=10).status_code == 503


def test_drain_lets_requests_in_flight_finish_and_refuses_new_ones():
    with tiny_server(engine_overrides=ENGINE, drain_timeout_s=60, retry_after_s=2) as live:
        with slow_steps(live, STEP_S):
            streams = [Stream(live.url, 60) for _ in range(2)]
            for stream in streams:
                stream.start()
            for stream in streams:
                assert stream.started.wait(30)
            live.drain()
            wait_until(lambda: draining(live.url), what="/health turning 503")
            refused = httpx.post(f"{live.url}/v1/completions", json=body(4), timeout=30)
            assert refused.status_code == 503 and refused.headers["retry-after"] == "2"
            assert "shutting down" in refused.json()["error"]["message"]
            for stream in streams:
                stream.join(30)
            live.thread.join(30)
        assert not live.thread.is_alive(), "the server did not exit after draining"
        for stream in streams:
            assert stream.events[-1] == "[DONE]"
            assert stream.text_events()[-1]["choices"][0]["finish_reason"] == "length"
            assert len(stream.text_events()) <= 60
        assert live.metric_after_exit("surgeplan:requests_aborted_total", reason="drain") == 0
        assert live.metric_after_exit("surgeplan:requests_rejected_total", reason="draining") == 1
        assert live.serving.engine.engine.kv_stats().num_used_blocks == 0


def test_drain_timeout_aborts_the_rest_with_a_clear_reason():
    with tiny_server(engine_overrides=ENGINE, drain_timeout_s=0.3) as live:
        with slow_steps(live, STEP_S):
            stream = Stream(live.url, 400)  # ≥ 4 s: cannot finish within the drain timeout
            stream.start()
            assert stream.started.wait(30)
            whole: list[httpx.Response] = []
            waiting = threading.Thread(
                target=lambda: whole.append(
                    httpx.post(f"{live.url}/v1/completions", json=body(400), timeout=60)
                ),
                daemon=True,
            )
            waiting.start()
            wait_until(
                lambda: live.serving.engine.num_unfinished == 2, what="both requests in the engine"
            )
            live.drain()
            stream.join(30)
            waiting.join(30)
            live.thread.join(30)
        assert not live.thread.is_alive(), "the server did not exit after the drain timeout"
        assert stream.events[-1] == "[DONE]"
        error = json.loads(stream.events[-2])["error"]
        assert error["code"] == 503 and "drain timeout of 0.3 s" in error["message"], error
        assert (
            whole[0].status_code == 503 and "drain timeout" in whole[0].json()["error"]["message"]
        )
        assert live.metric_after_exit("surgeplan:requests_aborted_total", reason="drain") == 2
        assert live.metric_after_exit("vllm:request_success_total", finished_reason="abort") == 2
        assert live.metric_after_exit("surgeplan:requests_in_flight") == 0
        assert live.serving.engine.engine.kv_stats().num_used_blocks == 0


def test_sigterm_drains_a_real_server_which_exits_0():
    port, key = free_port(), "drain-test-key"
    url, auth = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {key}"}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine.openai.cli",
            "--model",
            "tiny",
            "--load-format",
            "dummy",
            "--max-model-len",
            "512",
            "--num-kv-blocks",
            "160",
            "--block-size",
            "8",
            "--max-num-seqs",
            "1",
            "--drain-timeout",
            "120",
            "--port",
            str(port),
            "--uvicorn-log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ | {"SURGEPLAN_API_KEY": key, "OMP_NUM_THREADS": "1"},
    )
    results: list[httpx.Response] = []
    try:
        wait_until(lambda: _healthy(url) or server.poll() is not None, 90, "the server starting")
        assert (
            httpx.post(f"{url}/v1/completions", json=body(2), timeout=30).status_code == 401
        )  # the env key holds
        # four requests of 300 tokens, one at a time: over a thousand steps still to run at SIGTERM
        senders = [
            threading.Thread(
                target=lambda: results.append(
                    httpx.post(f"{url}/v1/completions", json=body(300), headers=auth, timeout=120)
                ),
                daemon=True,
            )
            for _ in range(4)
        ]
        for sender in senders:
            sender.start()
        # all four reached the engine and some still run (on a slow machine the first may have
        # finished before the fourth arrived: counting only those in flight could then never see 4)
        wait_until(lambda: _reached_engine(url) == (4, True), 30, "four requests in the engine")
        server.send_signal(signal.SIGTERM)
        wait_until(lambda: draining(url), 30, "/health turning 503")
        refused = httpx.post(f"{url}/v1/completions", json=body(2), headers=auth, timeout=30)
        assert refused.status_code == 503 and "retry-after" in refused.headers
        for sender in senders:
            sender.join(120)
        output, _ = server.communicate(timeout=60)
    except BaseException as exc:
        server.kill()
        raise AssertionError(f"the server said:\n{server.communicate()[0][-5000:]}") from exc
    assert server.returncode == 0 and "Traceback" not in output, output
    assert [r.status_code for r in results] == [200] * 4
    assert all(
        r.json()["usage"]["completion_tokens"] == 300
        and r.json()["choices"][0]["finish_reason"] == "length"
        for r in results
    )


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _reached_engine(url: str) -> tuple[int, bool]:
    """(requests the engine has taken in: running, waiting or finished; whether any is unfinished)."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    in_flight = finished = 0.0
    for line in text.splitlines():
        if line.startswith(("vllm:num_requests_running", "vllm:num_requests_waiting")):
            in_flight += float(line.rsplit(" ", 1)[1])
        elif line.startswith("vllm:request_success_total"):
            finished += float(line.rsplit(" ", 1)[1])
    return int(in_flight + finished), in_flight > 0
