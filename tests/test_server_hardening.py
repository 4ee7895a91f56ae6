"""What one request or connection may cost (issue 24), one test per defect found by trying the
server as an attacker would: stop lists bounded (400 naming the field and the cap; bodies with
more values than any servable request, or more bytes than one can need, refused before parsing),
free-form tenant names bounded and leaving no state, /debug/steps behind the key, the request head
bounded in the HTTP parser (431), deadlines for the head and the body (408) and a connection cap
(503), lone surrogates a 400, a drain during a half-sent body a 503. The abuse set (victim latency
under attack; and a SIGTERM storm during teardown still exits 0, defect 8, on the same server
process) is tests/test_server_abuse.py; each client's share of body bytes is
tests/test_server_body_share.py."""

import json
import select
import socket
import time

import httpx
import pytest
from live_server import tiny_server

from engine.core.block_manager import BlockManager
from engine.core.request import Request
from engine.core.sampling_params import SamplingParams
from engine.openai.protocol import CompletionRequest
from engine.openai.server_config import auto_body_limit_bytes, resolve_tenancy

KEY = "hardening-key"
ENGINE = {"max_model_len": 128, "num_kv_blocks": 64, "max_num_seqs": 4}


@pytest.fixture(scope="module")
def server():
    with tiny_server(
        engine_overrides=ENGINE,
        api_keys=[KEY],
        record_steps=64,
        max_open_tenants=4,
        header_timeout_s=0.6,
        body_timeout_s=0.6,
        max_connections=24,
        max_header_bytes=4096,
    ) as live:
        yield live


def post(server, payload: dict | bytes, headers: dict | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"} | (
        headers or {}
    )
    content = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return httpx.post(f"{server.url}/v1/completions", content=content, headers=headers, timeout=60)


def refused(response: httpx.Response, status: int, *words: str) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == status and all(w in error["message"] for w in words), error
    return error


# ---- 1, 2: stop lists ----------------------------------------------------------------------------
def test_stop_token_ids_are_capped_kept_as_a_frozenset_and_out_of_vocab_ids_dropped(server):
    error = refused(
        post(server, {"prompt": [5, 6], "max_tokens": 2, "stop_token_ids": [7] * 257}),
        400,
        "stop_token_ids",
        "257",
        "256",
    )
    assert error["param"] == "stop_token_ids"
    assert (
        post(server, {"prompt": [5, 6], "max_tokens": 2, "stop_token_ids": [7] * 256}).status_code
        == 200
    )
    params = CompletionRequest(prompt=[5], stop_token_ids=[7, 7, -1, 600, 511]).sampling_params(
        8, vocab_size=512
    )
    assert params.stop_token_ids == frozenset({7, 511})
    assert SamplingParams(stop_token_ids=[3, 3]).stop_token_ids == frozenset({3})


def test_a_body_with_millions_of_values_is_refused_before_it_is_parsed(server):
    def ids_body(count: int) -> bytes:
        ids = ",".join(["7"] * count)
        return ('{"prompt":[5],"max_tokens":2,"stop_token_ids":[' + ids + "]}").encode()

    start = time.monotonic()
    # over the default body limit, what max_model_len=128 tokens of text can need: 64 KiB + 12
    # bytes per character (auto_body_limit_bytes), refused on its declared length
    refused(post(server, ids_body(500_000)), 413, "67072", "--max-request-body-bytes")
    # under it, with more values than any servable request holds: refused on the comma count
    refused(post(server, ids_body(30_000)), 413, "commas")
    assert time.monotonic() - start < 5.0
    assert auto_body_limit_bytes(128, 1) == (64 << 10) + 12 * 128
    assert auto_body_limit_bytes(8192, 2 * 128) == 4 << 20  # at most the former default


def test_stop_strings_are_capped_in_count_and_length(server):
    error = refused(
        post(server, {"prompt": [5], "max_tokens": 2, "stop": ["a", "b", "c", "d", "e"]}),
        400,
        "stop has 5 sequences",
        "at most 4",
    )
    assert error["param"] == "stop"
    refused(
        post(server, {"prompt": [5], "max_tokens": 2, "stop": "x" * 257}),
        400,
        "257 characters",
        "256",
    )
    assert (
        post(server, {"prompt": [5], "max_tokens": 2, "stop": ["x" * 256] * 4}).status_code == 200
    )


def test_a_text_prompt_that_cannot_fit_is_refused_before_tokenizing(server):
    refused(
        post(server, {"prompt": "a" * 200, "max_tokens": 2}),
        400,
        "200 characters",
        "max_model_len=128",
    )


# ---- 3: tenant names -----------------------------------------------------------------------------
def test_free_form_tenant_names_are_bounded_and_leave_no_state(server):
    for i in range(12):
        assert (
            post(server, {"prompt": [5, 6], "max_tokens": 1}, {"X-Tenant": f"team-{i}"}).status_code
            == 200
        )
    assert (
        post(
            server, {"prompt": [5], "max_tokens": 1}, {"X-Tenant": "bad name!" + "x" * 80}
        ).status_code
        == 200
    )
    server.wait_idle()
    metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
    series = [
        line for line in metrics.splitlines() if line.startswith("surgeplan:tenant_kv_blocks{")
    ]
    assert len(series) == 1 and 'tenant="default"' in series[0], series  # idle: only the default's
    assert server.app.state.serving.engine.engine.scheduler.block_manager.tenant_blocks == {}
    tenancy = resolve_tenancy(None, {}, max_open=2)
    assert [tenancy.resolve(n) for n in ("a", "b", "c", "a", "x" * 65, "sp ace")] == [
        "a",
        "b",
        "default",
        "a",
        "default",
        "default",
    ]


def test_the_block_manager_keeps_no_zero_tenant_entries():
    manager = BlockManager(num_blocks=8, block_size=4)
    request = Request("r", [1, 2, 3, 4, 5], SamplingParams(max_tokens=2), 0.0, tenant="passing")
    manager.allocate(request, 5)
    assert manager.tenant_blocks == {"passing": 2}
    manager.free(request)
    assert "passing" not in manager.tenant_blocks


# ---- 4: debug endpoints --------------------------------------------------------------------------
def test_debug_steps_needs_the_key(server):
    refused(httpx.get(f"{server.url}/debug/steps", timeout=10), 401, "API key")
    answer = httpx.get(
        f"{server.url}/debug/steps", headers={"Authorization": f"Bearer {KEY}"}, timeout=10
    )
    assert answer.status_code == 200 and {"total", "steps"} <= set(answer.json())


# ---- 5, 6: the request head, deadlines, connections ----------------------------------------------
def _connect(server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return sock


def _answer(sock: socket.socket) -> tuple[int, dict]:
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionError:
            break
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_an_endless_header_is_cut_at_the_limit_with_431(server):
    sock = _connect(server)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Pad: ")
    sent = 0
    try:  # up to 4 MiB offered, 8 KiB at a time, until the server answers (it stops reading then)
        while sent < 4 << 20 and not select.select([sock], [], [], 0.005)[0]:
            sock.sendall(b"p" * 8192)
            sent += 8192
    except (TimeoutError, ConnectionError):
        pass
    status, body = _answer(sock)
    assert status == 431 and "request head" in body["error"]["message"], body
    assert sent < 256 << 10, f"the server answered only after {sent} bytes of header"


def test_a_slow_head_and_a_slow_body_get_408(server):
    slow_head = _connect(server)
    slow_head.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    slow_body = _connect(server)
    slow_body.sendall(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + KEY.encode()
        + b'\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"prompt": '
    )
    start = time.monotonic()
    for sock, words in ((slow_head, "request head"), (slow_body, "request body")):
        status, body = _answer(sock)
        assert status == 408 and words in body["error"]["message"], body
    assert time.monotonic() - start < 5.0


def test_connections_past_the_cap_get_503_at_once(server):
    held = [_connect(server) for _ in range(24)]
    try:
        time.sleep(0.2)
        status, body = _answer(_connect(server))
        assert status == 503 and "--max-connections" in body["error"]["message"], body
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.2)
    assert post(server, {"prompt": [5], "max_tokens": 1}).status_code == 200


# ---- 7: lone surrogates --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "raw, param",
    [
        (b'{"prompt": "a\\ud800b", "max_tokens": 2}', "prompt"),
        (b'{"model": "\\udc00", "prompt": [5], "max_tokens": 2}', "model"),
        (b'{"prompt": [5], "stop": ["\\ud83d"], "max_tokens": 2}', "stop"),
    ],
    ids=["prompt", "model", "stop"],
)
def test_a_lone_surrogate_is_a_400(server, raw, param):
    error = refused(post(server, raw), 400, "surrogate")
    assert error["param"].startswith(param), error
    chat = httpx.post(
        f"{server.url}/v1/chat/completions",
        content=b'{"messages": [{"role": "user", "content": "\\udfff"}], "max_tokens": 2}',
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
        timeout=30,
    )
    refused(chat, 400, "surrogate")


# ---- 9: a drain while a body is half-sent --------------------------------------------------------
def test_a_drain_during_a_half_sent_body_answers_503():
    with tiny_server(engine_overrides=ENGINE) as live:
        sock = _connect(live)
        sock.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"prompt": [5, '
        )
        time.sleep(0.3)
        live.drain()
        status, body = _answer(sock)
        assert status == 503 and "shutting down" in body["error"]["message"], body
