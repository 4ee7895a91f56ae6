"""Overload (bounded queue, 503 + Retry-After), clients that leave, deadlines, and tenant KV quotas."""

import asyncio
import json

import httpx
import numpy as np
import pytest
from live_server import tiny_server

BLOCK = 8
# max_model_len 512 lets a request run for hundreds of steps: long enough to leave it or time it out
ENGINE = {
    "max_model_len": 512,
    "num_kv_blocks": 160,
    "block_size": BLOCK,
    "max_num_seqs": 4,
    "tenant_block_quota": {"bulk": 8, "default": 160},
}
MAX_WAITING = 3


@pytest.fixture(scope="module")
def server():
    with tiny_server(
        engine_overrides=ENGINE, max_waiting_requests=MAX_WAITING, retry_after_s=2
    ) as live:
        yield live


def payload(seed: int, prompt_len: int, max_tokens: int, **extra) -> dict:
    prompt = np.random.default_rng(seed).integers(3, 512, prompt_len).tolist()
    return {"prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True} | extra


async def post_all(
    url: str, bodies: list[dict], headers: list[dict] | None = None
) -> list[httpx.Response]:
    headers = headers or [{}] * len(bodies)
    async with httpx.AsyncClient(
        base_url=url, timeout=120, limits=httpx.Limits(max_connections=None)
    ) as client:
        return await asyncio.gather(
            *(client.post("/v1/completions", json=b, headers=h) for b, h in zip(bodies, headers))
        )


def test_burst_past_the_queue_gets_503s_and_the_rest_complete(server):
    rejected_before = server.metric("surgeplan:requests_rejected_total", reason="queue_full")
    rng = np.random.default_rng(11)
    wanted = rng.integers(40, 80, 30).tolist()
    bodies = [payload(i, int(rng.integers(4, 30)), n) for i, n in enumerate(wanted)]
    responses = asyncio.run(post_all(server.url, bodies))
    accepted = [(r, n) for r, n in zip(responses, wanted) if r.status_code == 200]
    refused = [r for r in responses if r.status_code != 200]
    assert len(refused) > 0 and len(accepted) >= ENGINE["max_num_seqs"]
    for response in refused:
        assert response.status_code == 503 and response.headers["retry-after"] == "2"
        assert response.json()["error"]["code"] == 503
    for response, n in accepted:
        assert response.json()["usage"]["completion_tokens"] == n
    server.wait_idle()
    assert server.metric("vllm:kv_cache_usage_perc") == 0
    assert server.metric(
        "surgeplan:requests_rejected_total", reason="queue_full"
    ) - rejected_before == len(refused)


def stream_lines(url: str, body: dict, keep: int) -> int:
    """Reads `keep` SSE events, then hangs up; returns how many it read."""
    read = 0
    with httpx.Client(base_url=url, timeout=60) as client:
        with client.stream("POST", "/v1/completions", json=body | {"stream": True}) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                read += line.startswith("data:")
                if read >= keep:
                    break
    return read


def test_streaming_client_that_leaves_is_aborted_and_freed(server):
    aborts = server.metric("vllm:request_success_total", finished_reason="abort")
    tokens = server.metric("vllm:generation_tokens_total")
    assert stream_lines(server.url, payload(1, 12, 480), keep=3) == 3
    server.wait_idle(timeout_s=20)
    assert server.metric("vllm:request_success_total", finished_reason="abort") == aborts + 1
    assert server.metric("vllm:generation_tokens_total") - tokens < 480
    assert server.metric("surgeplan:tenant_kv_blocks", tenant="default") == 0


def test_waiting_client_that_leaves_is_aborted(server):
    aborts = server.metric("vllm:request_success_total", finished_reason="abort")
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.url}/v1/completions", json=payload(2, 12, 480), timeout=0.3)
    server.wait_idle(timeout_s=20)
    assert server.metric("vllm:request_success_total", finished_reason="abort") == aborts + 1


def test_deadline_ends_a_request_with_504(server):
    expired = server.metric("surgeplan:requests_rejected_total", reason="deadline")
    response = httpx.post(
        f"{server.url}/v1/completions",
        json=payload(3, 12, 480),
        headers={"X-Request-Timeout": "0.1"},
        timeout=60,
    )
    assert response.status_code == 504, response.text
    assert "deadline" in response.json()["error"]["message"]
    with httpx.stream(
        "POST",
        f"{server.url}/v1/completions",
        json=payload(4, 12, 480) | {"stream": True},
        headers={"X-Request-Timeout": "0.1"},
        timeout=60,
    ) as streamed:
        events = [line[5:].strip() for line in streamed.iter_lines() if line.startswith("data:")]
    assert events[-1] == "[DONE]" and json.loads(events[-2])["error"]["code"] == 504
    server.wait_idle()
    assert server.metric("surgeplan:requests_rejected_total", reason="deadline") == expired + 2


async def _watch_tenant_blocks(url: str, peaks: list[float], stop: asyncio.Event) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        while not stop.is_set():
            text = (await client.get(f"{url}/metrics")).text
            peaks += [
                float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith("surgeplan:tenant_kv_blocks") and 'tenant="bulk"' in line
            ]
            await asyncio.sleep(0.01)


async def _tenant_run(url: str, peaks: list[float]) -> tuple[list, list]:
    stop = asyncio.Event()
    watcher = asyncio.create_task(_watch_tenant_blocks(url, peaks, stop))
    # 3 + 3 requests stay inside the queue limit; 40 + 24 tokens = the bulk quota of 8 blocks
    bulk = [payload(20 + i, 40, 24) for i in range(3)]
    interactive = [payload(30 + i, 6, 8) for i in range(3)]
    headers = [{"X-Tenant": "bulk"}] * 3 + [{"X-Tenant": "interactive"}] * 3
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:

        async def timed(body, header):
            response = await client.post("/v1/completions", json=body, headers=header)
            return response, asyncio.get_running_loop().time()

        results = await asyncio.gather(*(timed(b, h) for b, h in zip(bulk + interactive, headers)))
    stop.set()
    await watcher
    return results[:3], results[3:]


def test_tenant_quota_caps_its_blocks_without_starving_others(server):
    peaks: list[float] = []
    bulk, interactive = asyncio.run(_tenant_run(server.url, peaks))
    assert all(
        r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 24 for r, _ in bulk
    )
    assert all(
        r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 8 for r, _ in interactive
    )
    assert peaks and 0 < max(peaks) <= ENGINE["tenant_block_quota"]["bulk"], peaks
    assert max(t for _, t in interactive) < max(t for _, t in bulk)
    too_big = httpx.post(
        f"{server.url}/v1/completions",
        json=payload(40, 70, 4),
        headers={"X-Tenant": "bulk"},
        timeout=30,
    )
    assert too_big.status_code == 400 and "quota of 8" in too_big.json()["error"]["message"]
    server.wait_idle()


def test_a_failing_step_fails_its_requests_and_the_server_serves_on():
    with tiny_server() as live:
        runner = live.serving.engine.engine.model_runner
        real_execute, calls = runner.execute, []

        def fail_once(scheduled):
            calls.append(len(scheduled))
            if len(calls) == 1:
                raise RuntimeError("injected device fault")
            return real_execute(scheduled)

        runner.execute = fail_once
        failed = httpx.post(f"{live.url}/v1/completions", json=payload(50, 8, 6), timeout=30)
        assert (
            failed.status_code == 500
            and "injected device fault" in failed.json()["error"]["message"]
        )
        ok = httpx.post(f"{live.url}/v1/completions", json=payload(51, 8, 6), timeout=30)
        assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 6
        live.wait_idle()
        assert (
            live.serving.engine.num_step_errors == 1
            and live.metric("surgeplan:engine_step_errors_total") == 1
        )
