"""The soak's clients: a seeded mix of what people send to a shared server (good requests, streams they
read to the end, streams they hang up on, requests they cancel, requests with a tight deadline, bad
requests of every kind) from three tenants, and what each client saw, as one `Record` per request.

A client's view is all a record holds: whether the whole request was written to the socket (a client
cancels only after that: a request cut while being written may or may not reach the server, which no
count could tell), the HTTP status when one arrived, and how the exchange ended (`completed`: a
finish_reason was seen; `refused`: an error status; `stream_error`: an error event inside a 200
stream; `left`: the client hung up first; `client_error`: anything unexpected).
"""

import asyncio
import json
import time
from dataclasses import dataclass, field

import httpx
import numpy as np

TENANTS = ("alpha", "beta", "gamma")
TENANT_SHARES = (0.5, 0.25, 0.25)  # of the requests sent: alpha alone offers about the capacity
KINDS = {
    "complete": 0.38,
    "stream": 0.20,
    "disconnect": 0.08,
    "cancel": 0.07,
    "deadline": 0.05,
    "stop": 0.05,
    "bad": 0.17,
}
BAD_KINDS = (
    "invalid_json",
    "no_key",
    "wrong_key",
    "other_tenant",
    "too_long",
    "oversized_header",
    "bad_field",
)
PROMPT_TOKENS, OUTPUT_TOKENS = (4, 40), (16, 128)
VOCAB_LOW, VOCAB_HIGH = 3, 512  # the tiny preset's byte vocabulary, specials left out


def api_key(tenant: str) -> str:
    return f"soak-key-{tenant}"


@dataclass
class Plan:
    index: int
    tenant: str
    kind: str  # a KINDS key, or "bad:<BAD_KINDS entry>"
    path: str
    headers: dict
    payload: dict | None = None
    content: bytes | None = None  # a raw body instead of JSON
    stream: bool = False
    hang_up_after_events: int | None = None
    cancel_after_s: float | None = None


@dataclass
class Record:
    index: int
    tenant: str
    kind: str
    status: int | None = None
    outcome: str = "client_error"
    finish_reason: str | None = None
    error_code: int | None = None
    latency_s: float = 0.0
    delivered: bool = False  # the request's last byte was written to the connection
    detail: str = field(default="", repr=False)
    written: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    async def trace(self, event: str, info: dict) -> None:
        """httpcore's trace hook: notes when the request was written in full."""
        if event == "http11.send_request_body.complete":
            self.delivered = True
            self.written.set()


def draw_plan(
    rng: np.random.Generator, index: int, max_model_len: int, max_header_bytes: int
) -> Plan:
    tenant = str(rng.choice(TENANTS, p=TENANT_SHARES))
    kind = str(rng.choice(list(KINDS), p=list(KINDS.values())))
    headers = {"Authorization": f"Bearer {api_key(tenant)}"}
    prompt = rng.integers(VOCAB_LOW, VOCAB_HIGH, int(rng.integers(*PROMPT_TOKENS))).tolist()
    payload = {
        "prompt": prompt,
        "max_tokens": int(rng.integers(*OUTPUT_TOKENS)),
        "ignore_eos": True,
    }
    plan = Plan(index, tenant, kind, "/v1/completions", headers, payload)
    if kind == "complete" and rng.random() < 1 / 3:
        plan.path = "/v1/chat/completions"
        plan.payload = {
            "messages": [{"role": "user", "content": "soak " * int(rng.integers(1, 8))}],
            "max_tokens": payload["max_tokens"],
            "ignore_eos": True,
        }
    elif kind in ("stream", "disconnect"):
        plan.stream = True
        plan.payload |= {"stream": True, "stream_options": {"include_usage": True}}
        if kind == "disconnect":
            plan.hang_up_after_events = int(rng.integers(1, 6))
    elif kind == "cancel":
        plan.cancel_after_s = float(rng.uniform(0.02, 0.5))
    elif kind == "deadline":
        plan.headers = headers | {"X-Request-Timeout": f"{rng.uniform(0.02, 0.2):.3f}"}
        plan.payload["max_tokens"] = int(rng.integers(60, 120))
    elif kind == "stop":
        plan.payload["stop"] = ["e", "a"]
    elif kind == "bad":
        _make_bad(plan, str(rng.choice(BAD_KINDS)), max_model_len, max_header_bytes)
    return plan


def _make_bad(plan: Plan, bad: str, max_model_len: int, max_header_bytes: int) -> None:
    plan.kind = f"bad:{bad}"
    others = [t for t in TENANTS if t != plan.tenant]
    if bad == "invalid_json":
        plan.payload, plan.content = None, b'{"prompt": [5, 6'
        plan.headers = plan.headers | {"Content-Type": "application/json"}
    elif bad == "no_key":
        plan.headers = {}
    elif bad == "wrong_key":
        plan.headers = {"Authorization": "Bearer soak-key-nobody"}
    elif bad == "other_tenant":
        plan.headers = plan.headers | {"X-Tenant": others[plan.index % len(others)]}
    elif bad == "too_long":
        plan.payload["prompt"] = [5] * (max_model_len + 10)
    elif bad == "oversized_header":
        plan.headers = plan.headers | {"X-Pad": "p" * max_header_bytes}
    elif bad == "bad_field":
        plan.payload["temperature"] = -1


async def send(client: httpx.AsyncClient, plan: Plan) -> Record:
    record = Record(plan.index, plan.tenant, plan.kind)
    start = time.monotonic()
    try:
        if plan.stream:
            await _stream(client, plan, record)
        else:
            await _whole(client, plan, record)
    except Exception as exc:  # noqa: BLE001  (any surprise is a finding, reported as client_error)
        record.outcome, record.detail = "client_error", repr(exc)
    record.latency_s = time.monotonic() - start
    return record


async def _whole(client: httpx.AsyncClient, plan: Plan, record: Record) -> None:
    request = asyncio.ensure_future(
        client.post(
            plan.path,
            json=plan.payload,
            content=plan.content,
            headers=plan.headers,
            extensions={"trace": record.trace},
        )
    )
    if plan.cancel_after_s is not None:
        written = asyncio.ensure_future(record.written.wait())
        await asyncio.wait({request, written}, return_when=asyncio.FIRST_COMPLETED)
        written.cancel()
        if not (await asyncio.wait({request}, timeout=plan.cancel_after_s))[0]:
            request.cancel()  # the client gives up: httpx closes its connection
            await asyncio.wait({request})
            record.outcome = "left"
            return
    response = await request
    record.status = response.status_code
    if response.status_code == 200:
        record.outcome, record.finish_reason = (
            "completed",
            response.json()["choices"][0]["finish_reason"],
        )
    else:
        record.outcome, record.error_code = "refused", response.json()["error"]["code"]


async def _stream(client: httpx.AsyncClient, plan: Plan, record: Record) -> None:
    async with client.stream(
        "POST",
        plan.path,
        json=plan.payload,
        headers=plan.headers,
        extensions={"trace": record.trace},
    ) as response:
        record.status = response.status_code
        if response.status_code != 200:
            await response.aread()
            record.outcome, record.error_code = "refused", response.json()["error"]["code"]
            return
        events, done = 0, False
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            event = json.loads(data)
            events += 1
            if "error" in event:
                record.error_code = event["error"]["code"]
            elif event.get("choices") and event["choices"][0].get("finish_reason"):
                record.finish_reason = event["choices"][0]["finish_reason"]
            if plan.hang_up_after_events is not None and events >= plan.hang_up_after_events:
                break  # leaving the block closes the connection mid-stream
    if record.error_code is not None:
        record.outcome = "stream_error"
    elif record.finish_reason is not None:
        record.outcome = "completed"
    else:
        record.outcome = (
            "left" if plan.hang_up_after_events is not None and not done else "client_error"
        )
