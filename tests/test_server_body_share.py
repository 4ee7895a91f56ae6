"""Each client's share of request body bytes (client_budget.py) and the body checks made as the
bytes arrive (BodyCheckMiddleware), driven through the ASGI interface without a server: a client
over its share waits for it, past MAX_WAIT_S gets 429 with Retry-After, and never makes another
client wait; the table of clients stays bounded; a body with more commas than any servable request
is refused without the app seeing it. The live server's defaults are in test_server_hardening.py
and the victim's latency under floods in test_server_abuse.py."""

import asyncio
import json
import time

import pytest

from engine.openai import client_budget, middleware
from engine.openai.client_budget import REQUEST_FLOOR_BYTES, ClientBudget
from engine.openai.middleware import BodyCheckMiddleware

MIB = 1 << 20


def test_a_client_over_its_share_waits_and_others_do_not():
    budget = ClientBudget(MIB, max_body_bytes=64 << 10)  # a second of the rate: 4 floors
    a, b = ("key#0", "10.0.0.1"), ("key#0", "10.0.0.2")
    assert [budget.reserve(a, 100, now=0.0) for _ in range(4)] == [0.0] * 4
    assert budget.reserve(a, 100, now=0.0) == pytest.approx(0.25)  # one floor's worth later
    assert budget.reserve(b, 100, now=0.0) == 0.0  # another address: its own share
    assert budget.reserve(("key#1", "10.0.0.1"), 0, now=0.0) == 0.0  # another key too
    assert budget.reserve(a, 100, now=0.5) == 0.0  # 0.5 s paid the debt and one floor more
    assert budget.reserve(a, 100, now=0.5) == pytest.approx(0.25)
    # a body counts with its length past the floor; a wait past MAX_WAIT_S spends nothing
    far = budget.reserve(a, 4 * MIB, now=0.6)
    assert far > client_budget.MAX_WAIT_S
    assert budget.reserve(a, 4 * MIB, now=0.6) == pytest.approx(far)
    assert (
        ClientBudget.cost_bytes(10) == REQUEST_FLOOR_BYTES and ClientBudget.cost_bytes(MIB) == MIB
    )


def test_any_body_under_the_limit_can_pass_and_the_client_table_is_bounded():
    budget = ClientBudget(MIB, max_body_bytes=8 * MIB, max_clients=2)
    assert budget.reserve(("", "a"), 8 * MIB, now=0.0) == 0.0  # the bucket holds a largest body
    budget.reserve(("", "b"), 8 * MIB, now=0.0)
    assert budget.reserve(("", "c"), 8 * MIB, now=0.0) == 0.0  # past the bound: one shared bucket
    assert budget.reserve(("", "d"), 8 * MIB, now=0.0) > 0  # ... which c has spent
    assert len(budget) == 3  # a, b and the shared one
    budget.reserve(("", "e"), 0, now=100.0)  # once a and b have refilled, they are forgotten
    assert len(budget) <= 2


def _scope(client: tuple[str, str], body: bytes) -> dict:
    return {
        "type": "http",
        "method": "POST",
        "path": "/v1/completions",
        "headers": [(b"content-length", str(len(body)).encode())],
        "client": (client[1], 40000),
        "state": {"key_id": client[0]},
    }


async def _call(app, client: tuple[str, str], body: bytes, chunk_bytes: int = 1 << 16):
    """(status, response body, headers, seconds) of one request through `app`."""
    chunks = [body[i : i + chunk_bytes] for i in range(0, len(body), chunk_bytes)] or [b""]
    messages = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]
    sent = []

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    start = time.monotonic()
    await app(_scope(client, body), receive, send)
    head = next(m for m in sent if m["type"] == "http.response.start")
    text = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return head["status"], text, dict(head["headers"]), time.monotonic() - start


async def _echo(scope, receive, send):
    """The app behind the middleware: answers 200 with the body it received."""
    message = await receive()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": message["body"]})


def test_the_middleware_makes_a_flooding_client_wait_then_answers_429(monkeypatch):
    monkeypatch.setattr(middleware, "MAX_WAIT_S", 0.3)
    monkeypatch.setattr(client_budget, "MAX_WAIT_S", 0.3)
    # 4 floors a second: a fifth request at once waits 0.25 s, a sixth would wait 0.5 s: 429
    app = BodyCheckMiddleware(
        _echo, max_bytes=64 << 10, budget=ClientBudget(4 * REQUEST_FLOOR_BYTES, 64 << 10)
    )
    flooder, other = ("key#0", "127.0.0.1"), ("key#1", "127.0.0.1")

    async def run():  # seven at once from one client, then one from another
        flood = asyncio.gather(*(_call(app, flooder, b'{"prompt": [5]}') for _ in range(7)))
        await asyncio.sleep(0.05)
        return await flood, await _call(app, other, b'{"prompt": [6]}')

    flood, others = asyncio.run(run())
    assert [status for status, *_ in flood] == [200] * 5 + [429] * 2, flood
    assert flood[4][3] >= 0.2  # the fifth waited for its share (a slow host only adds to it)
    for status, text, headers, seconds in flood[5:]:
        assert seconds >= 0.3  # waited MAX_WAIT_S, then refused
        error = json.loads(text)["error"]
        assert "--client-body-bytes-per-s" in error["message"] and error["code"] == 429
        assert int(headers[b"retry-after"]) >= 1
    assert others[0] == 200 and others[1] == b'{"prompt": [6]}'
    assert others[3] < flood[4][3]  # another key was not made to wait for the flooder's share


def test_a_body_with_too_many_commas_is_refused_as_it_arrives_without_the_app():
    called = []

    async def app(scope, receive, send):
        called.append(scope)
        await _echo(scope, receive, send)

    guard = BodyCheckMiddleware(app, max_bytes=4 * MIB, max_commas=1000)
    body = ('{"prompt": [5], "stop_token_ids": [' + ",".join(["7"] * 200_000) + "]}").encode()
    status, text, headers, _ = asyncio.run(_call(guard, ("", "127.0.0.1"), body, 4096))
    assert status == 413 and b"commas" in text and called == []
    assert b"connection" not in headers  # the rest was read and dropped: the connection can stay
    ok = b'{"prompt": [5], "stop_token_ids": [' + b",".join([b"7"] * 999) + b"]}"
    assert asyncio.run(_call(guard, ("", "127.0.0.1"), ok, 4096))[0] == 200 and len(called) == 1
