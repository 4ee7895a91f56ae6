"""Replaying a trace against any OpenAI-compatible server (ours, or a real vLLM) over HTTP.

Each request is sent at its (scaled) arrival time as a token-id prompt of exactly the trace's length,
with `ignore_eos` and `max_tokens` set so the output has the trace's length too. Responses stream; every
chunk is timestamped, giving TTFT, inter-token latencies, TPOT and end-to-end latency per request.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import httpx
from pydantic import BaseModel, ConfigDict, Field

from traces.tokens import PromptTokenSynthesizer
from traces.trace import Trace


class ReplayConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())
    url: str = Field(description="the server's base URL, e.g. http://127.0.0.1:8000")
    model: str | None = Field(
        None, description="model name to send; None: the first of GET /v1/models"
    )
    time_scale: float = Field(
        1.0, ge=0, description="multiplies arrival times: 0.5 is twice as fast, 0 all at once"
    )
    max_concurrency: int | None = Field(None, ge=1, description="requests in flight at most")
    limit: int | None = Field(None, ge=1, description="replay only the first N requests")
    vocab_size: int | None = Field(
        None, ge=2, description="None: the server's /v1/models `vocab_size`"
    )
    min_token_id: int = Field(3, ge=0, description="prompt ids start here, clear of special tokens")
    seed: int = 0
    request_timeout_s: float = Field(3600.0, gt=0)
    temperature: float = Field(0.0, ge=0)


@dataclass
class RequestRecord:
    index: int
    tenant: str
    arrival_s: float  # when it was due, from the replay's start
    prompt_tokens: int
    expected_output_tokens: int
    sent_s: float = 0.0  # when it was actually sent (later than due under --max-concurrency)
    status: str = (
        "pending"  # ok, rejected (HTTP 503), timeout (abandoned), http_error, error, in_flight
    )
    http_status: int | None = None
    error: str = ""
    output_tokens: int = 0  # the server's usage count, else the chunks that carried tokens
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    queue_s: float | None = (
        None  # arrival to first scheduled (known to the simulator, not over HTTP)
    )
    num_preemptions: int = 0
    retries: int = 0  # attempts after the first (abandoned or rejected, then retried)
    replica: int | None = None  # the replica that served the last attempt

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first (vLLM's definition)."""
        if not self.ok or self.output_tokens < 2 or self.ttft_s is None or self.e2e_s is None:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    def as_dict(self) -> dict:
        return asdict(self) | {"tpot_s": self.tpot_s}


@dataclass
class ReplayResult:
    records: list[RequestRecord]
    duration_s: float
    skipped: int  # trace requests with no output to ask for (failed in production)
    model: str


def replayable(trace: Trace, limit: int | None) -> tuple[list[int], int]:
    """Indices of the requests to send (first `limit`), and how many were skipped for wanting no output."""
    indices = list(range(len(trace) if limit is None else min(limit, len(trace))))
    kept = [i for i in indices if trace.output_tokens[i] >= 1]
    return kept, len(indices) - len(kept)


async def discover_model(client: httpx.AsyncClient, config: ReplayConfig) -> tuple[str, int]:
    """The model name and vocabulary size to use: given, or read from GET /v1/models."""
    if config.model is not None and config.vocab_size is not None:
        return config.model, config.vocab_size
    response = await client.get("/v1/models")
    response.raise_for_status()
    cards = response.json().get("data") or []
    card = next((c for c in cards if config.model in (None, c.get("id"))), None)
    if card is None:
        raise ValueError(
            f"{config.url}/v1/models lists {[c.get('id') for c in cards]}; expected "
            f"{config.model or 'at least one model'}"
        )
    vocab_size = config.vocab_size or card.get("vocab_size")
    if not vocab_size:
        raise ValueError(f"{config.url} does not say its vocabulary size; pass --vocab-size")
    return card["id"], int(vocab_size)


async def replay(
    trace: Trace, config: ReplayConfig, on_done: Callable[[RequestRecord], None] | None = None
) -> ReplayResult:
    """Sends the trace's requests at their arrival times and records how each went."""
    indices, skipped = replayable(trace, config.limit)
    limits = httpx.Limits(
        max_connections=config.max_concurrency, max_keepalive_connections=config.max_concurrency
    )
    timeout = httpx.Timeout(config.request_timeout_s, connect=30.0)
    async with httpx.AsyncClient(
        base_url=config.url.rstrip("/"), timeout=timeout, limits=limits
    ) as client:
        model, vocab_size = await discover_model(client, config)
        synthesizer = PromptTokenSynthesizer(vocab_size, config.seed, config.min_token_id)
        prompts = {i: synthesizer.prompt_token_ids(trace, i).tolist() for i in indices}
        first_arrival = float(trace.arrival_s[indices[0]]) if indices else 0.0
        records = [
            RequestRecord(
                i,
                str(trace.tenant[i]),
                (float(trace.arrival_s[i]) - first_arrival) * config.time_scale,
                int(trace.prompt_tokens[i]),
                int(trace.output_tokens[i]),
            )
            for i in indices
        ]
        gate = asyncio.Semaphore(config.max_concurrency) if config.max_concurrency else None
        start = time.perf_counter()
        tasks = []
        for record in records:
            await asyncio.sleep(max(0.0, start + record.arrival_s - time.perf_counter()))
            sender = _send(
                client, model, prompts[record.index], record, config, start, gate, on_done
            )
            tasks.append(asyncio.create_task(sender))
        await asyncio.gather(*tasks)
        duration_s = time.perf_counter() - start
    return ReplayResult(records, duration_s, skipped, model)


def completion_payload(
    model: str, prompt: list[int], output_tokens: int, temperature: float
) -> dict:
    return {
        "model": model,
        "prompt": prompt,
        "max_tokens": output_tokens,
        "ignore_eos": True,
        "temperature": temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def _send(
    client: httpx.AsyncClient,
    model: str,
    prompt: list[int],
    record: RequestRecord,
    config: ReplayConfig,
    start: float,
    gate: asyncio.Semaphore | None,
    on_done: Callable[[RequestRecord], None] | None,
) -> None:
    if gate is not None:
        await gate.acquire()
    try:
        record.sent_s = time.perf_counter() - start
        payload = completion_payload(
            model, prompt, record.expected_output_tokens, config.temperature
        )
        await _stream_completion(client, payload, {"X-Tenant": record.tenant}, record)
    except Exception as exc:  # noqa: BLE001  (a foreign server's odd answer must not stop the whole replay)
        record.status, record.error = "error", f"{type(exc).__name__}: {exc}"
    finally:
        if gate is not None:
            gate.release()
        if on_done is not None:
            on_done(record)


async def _stream_completion(
    client: httpx.AsyncClient, payload: dict, headers: dict, record: RequestRecord
) -> None:
    sent = time.perf_counter()
    async with client.stream("POST", "/v1/completions", json=payload, headers=headers) as response:
        record.http_status = response.status_code
        if response.status_code != 200:
            body = (await response.aread()).decode("utf-8", errors="replace")
            record.status = "rejected" if response.status_code == 503 else "http_error"
            record.error = _error_message(body)
            return
        chunks, usage, last = 0, None, sent
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[len("data:") :].strip()
            if data == "[DONE]":
                break
            event = json.loads(data)
            if "error" in event:
                record.status, record.error = "error", _error_message(data)
                return
            usage = event.get("usage") or usage
            if event.get("choices"):
                now = time.perf_counter()
                if chunks == 0:
                    record.ttft_s = now - sent
                else:
                    record.itl_s.append(now - last)
                chunks, last = chunks + 1, now
        record.e2e_s = time.perf_counter() - sent
    record.output_tokens = (
        int(usage.get("completion_tokens", chunks)) if isinstance(usage, dict) else chunks
    )
    record.status = "ok" if chunks else "error"
    record.error = "" if chunks else "the stream ended without any token"


def _error_message(body: str) -> str:
    try:
        return str(json.loads(body)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return body[:500]
