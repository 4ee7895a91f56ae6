"""The abuse set's attacks on `surgeplan serve`: each is what one careless or hostile client did to
slow everyone else (issue 24), run by a few concurrent workers until a deadline, bounded in count
and time, on loopback only. Each returns what the attacker saw: HTTP statuses (or how a raw
connection ended) and any answer that was not an error in OpenAI's shape.

The server is expected to be `surgeplan serve --api-key KEY --record-steps N` with short head and
body deadlines; `abuse.py` runs the attacks one at a time beside a victim and prints the table."""

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

VOCAB_HIGH = 512  # the tiny preset's vocabulary
MAX_ATTACK_REQUESTS = 100_000  # per attack: the loop's bound in count (the deadline is the other)
# Transport errors that mean "the server closed or reset the connection": a body refused while it still
# uploads (413, 408 at the body deadline), or a small one refused at the body deadline on a busy host,
# whose unread bytes turn the close into a reset, or a kept-alive connection the server closed at its
# header deadline just as the next request went out (a busy host). The answer is lost, not the server (its health, the
# victim's bound and its exit are checked apart). Any other transport error (connect, timeout) is a finding.
CLOSED_ERRORS = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)
AT_LIMIT_BODY_BYTES = 64 << 10  # under the bench server's limit (auto: 64 KiB + 12 B x 256 chars)


@dataclass
class Seen:
    """What the attackers saw."""

    statuses: Counter = field(default_factory=Counter)  # "400", "431", "closed", ...
    not_openai_errors: list[str] = field(default_factory=list)
    sent: int = 0
    extra: dict = field(default_factory=dict)

    def answer(self, status: int, body: bytes) -> None:
        self.statuses[str(status)] += 1
        if status >= 400:
            try:
                error = json.loads(body)["error"]
                assert {"message", "type", "code"} <= set(error)
            except Exception:  # noqa: BLE001  (any other shape is the finding)
                self.not_openai_errors.append(f"{status}: {body[:200]!r}")


@dataclass
class Target:
    url: str
    port: int
    key: str

    @property
    def auth(self) -> dict:
        return {"Authorization": f"Bearer {self.key}"}


def _ids_body(count: int) -> bytes:
    """A completions body with `count` stop_token_ids (written directly: json.dumps is slow)."""
    ids = ",".join(["7"] * count)
    return f'{{"prompt":[5,6,7],"max_tokens":4,"stop_token_ids":[{ids}]}}'.encode()


async def _post_loop(
    target: Target,
    seen: Seen,
    stop_at: float,
    bodies: list[bytes],
    workers: int,
    headers_of=lambda i: {},
) -> None:
    """`workers` clients posting `bodies` (in turn) to /v1/completions until `stop_at` (each
    worker sends at least once, so a short attack still reaches the server)."""
    async with httpx.AsyncClient(
        base_url=target.url, timeout=60, limits=httpx.Limits(max_connections=workers)
    ) as c:

        async def worker(w: int) -> None:
            i = w
            while (i == w or time.monotonic() < stop_at) and seen.sent < MAX_ATTACK_REQUESTS:
                seen.sent += 1
                headers = target.auth | {"Content-Type": "application/json"} | headers_of(seen.sent)
                body = bodies[i % len(bodies)]
                try:
                    response = await c.post("/v1/completions", content=body, headers=headers)
                    seen.answer(response.status_code, response.content)
                except CLOSED_ERRORS:
                    seen.statuses["closed"] += 1
                except httpx.HTTPError as exc:
                    seen.statuses[type(exc).__name__] += 1
                i += workers

        await asyncio.gather(*(worker(w) for w in range(workers)))


async def stop_token_ids(target: Target, stop_at: float) -> Seen:
    """2M stop_token_ids per request (4 MB bodies), 30k (a body just under the server's limit,
    more values than any servable request holds), and requests at the cap (256)."""
    bodies = [_ids_body(2_000_000), _ids_body(30_000), _ids_body(256)]
    assert len(bodies[1]) <= AT_LIMIT_BODY_BYTES
    seen = Seen()
    await _post_loop(target, seen, stop_at, bodies, workers=4)
    return seen


async def stop_strings(target: Target, stop_at: float) -> Seen:
    """380k stop strings per request, 10k (a body just under the server's limit), and requests at
    the caps (4 strings of 256 characters)."""
    bodies = [
        json.dumps({"prompt": [5, 6, 7], "max_tokens": 4, "stop": ["ab"] * count}).encode()
        for count in (380_000, 10_000)
    ]
    assert len(bodies[1]) <= AT_LIMIT_BODY_BYTES
    at_cap = json.dumps({"prompt": [5, 6, 7], "max_tokens": 4, "stop": ["x" * 256] * 4}).encode()
    seen = Seen()
    await _post_loop(target, seen, stop_at, [*bodies, at_cap], workers=4)
    return seen


async def tenant_names(target: Target, stop_at: float) -> Seen:
    """A new X-Tenant name on every request of an open key (no tenant limits on the server), one
    request at a time (the harm was the state each name left, which the victim meets after)."""
    body = json.dumps({"prompt": [5, 6, 7], "max_tokens": 1}).encode()
    seen = Seen()
    seen.extra["metrics_bytes_before"] = len(httpx.get(f"{target.url}/metrics", timeout=30).content)
    await _post_loop(
        target, seen, stop_at, [body], workers=1, headers_of=lambda i: {"X-Tenant": f"tenant-{i}"}
    )
    seen.extra["metrics_bytes_after"] = len(httpx.get(f"{target.url}/metrics", timeout=30).content)
    return seen


async def long_prompt(target: Target, stop_at: float) -> Seen:
    """Text prompts of 4 MB (the old default body limit), beside prompts just under the server's
    body limit (which the server must parse to find they cannot fit), all far past max_model_len."""
    huge = json.dumps({"prompt": "lorem ipsum " * 340_000, "max_tokens": 4}).encode()
    at_limit = json.dumps({"prompt": "lorem ipsum " * 5_400, "max_tokens": 4}).encode()
    assert len(at_limit) <= AT_LIMIT_BODY_BYTES
    seen = Seen()
    await _post_loop(target, seen, stop_at, [huge, at_limit], workers=4)
    return seen


async def cpu_control(target: Target, stop_at: float) -> Seen:
    """Not an attack: one process busy on the CPU, never talking to the server. With few
    cores this is the slowdown any busy neighbour causes, the floor for the rows above."""
    seen = Seen()
    while time.monotonic() < stop_at:
        sum(range(200_000))
        seen.sent += 1
    seen.statuses["no request"] = 1
    return seen


async def debug_steps(target: Target, stop_at: float) -> Seen:
    """Eight clients without a key polling GET /debug/steps."""
    seen = Seen()
    async with httpx.AsyncClient(base_url=target.url, timeout=60) as client:

        async def worker() -> None:
            while time.monotonic() < stop_at and seen.sent < MAX_ATTACK_REQUESTS:
                seen.sent += 1
                try:
                    response = await client.get("/debug/steps")
                    seen.answer(response.status_code, response.content)
                except CLOSED_ERRORS:
                    seen.statuses["closed"] += 1

        await asyncio.gather(*(worker() for _ in range(8)))
    return seen


async def surrogates(target: Target, stop_at: float) -> Seen:
    """Lone UTF-16 surrogates in a prompt, a model name, a stop string and a chat message."""
    bodies = [
        b'{"prompt": "a\\ud800b", "max_tokens": 2}',
        b'{"model": "\\udc00", "prompt": [5], "max_tokens": 2}',
        b'{"prompt": [5], "stop": ["\\ud83d"], "max_tokens": 2}',
    ]
    seen = Seen()
    await _post_loop(target, seen, stop_at, bodies, workers=4)
    return seen


async def _read_answer(reader: asyncio.StreamReader) -> bytes:
    """What the server says on a raw connection before it closes it (b"" when it just closes)."""
    data = b""
    try:
        while len(data) < 1 << 16:
            chunk = await reader.read(1 << 16)
            if not chunk:
                break
            data += chunk
    except ConnectionError:
        pass
    return data


async def _settle(answer: asyncio.Task, seen: Seen, timeout_s: float) -> None:
    """Counts the answer's status, "closed" for a close without one, "no answer" when none came."""
    done, _ = await asyncio.wait({answer}, timeout=timeout_s)
    if not done:
        answer.cancel()
        seen.statuses["no answer"] += 1
        return
    data = answer.result()
    if not data:
        seen.statuses["closed"] += 1
        return
    head, _, body = data.partition(b"\r\n\r\n")
    seen.answer(int(head.split()[1]), body)


async def header_flood(
    target: Target, stop_at: float, connections: int = 10, size_bytes: int = 32 << 20
) -> Seen:
    """Connections each sending up to 32 MiB of one header that never ends."""
    seen = Seen()
    chunk = b"p" * (64 << 10)

    async def one() -> None:
        while time.monotonic() < stop_at and seen.sent < MAX_ATTACK_REQUESTS:
            seen.sent += 1
            reader, writer = await asyncio.open_connection("127.0.0.1", target.port)
            answer = asyncio.create_task(_read_answer(reader))
            writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Pad: ")
            try:
                for _ in range(size_bytes // len(chunk)):
                    writer.write(chunk)
                    await writer.drain()
                    if answer.done() or time.monotonic() > stop_at:
                        break
            except ConnectionError:
                pass
            await _settle(answer, seen, 2.0)
            writer.close()

    await asyncio.gather(*(one() for _ in range(connections)))
    return seen


async def slowloris(
    target: Target, stop_at: float, connections: int = 200, byte_every_s: float = 0.5
) -> Seen:
    """Connections sending a request head (half of them: a body) one byte at a time, reopened
    when closed."""
    seen = Seen()
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"

    async def one(i: int) -> None:
        await asyncio.sleep(byte_every_s * i / connections)  # spread the connections out
        while time.monotonic() < stop_at and seen.sent < MAX_ATTACK_REQUESTS:
            seen.sent += 1
            reader, writer = await asyncio.open_connection("127.0.0.1", target.port)
            answer = asyncio.create_task(_read_answer(reader))
            if i % 2:  # a whole head, then the body slowly
                writer.write(
                    head
                    + b"Authorization: Bearer "
                    + target.key.encode()
                    + b"\r\nContent-Length: 4000\r\n\r\n"
                )
            trickle = (
                b"X-Slow: " + b"s" * 4000 if i % 2 == 0 else b'{"prompt": [5], "x": "' + b"s" * 4000
            )
            try:
                for byte in trickle:
                    writer.write(bytes([byte]))
                    await writer.drain()
                    await asyncio.sleep(byte_every_s)
                    if answer.done() or time.monotonic() > stop_at:
                        break
            except ConnectionError:
                pass
            if answer.done():
                await _settle(answer, seen, 0)
            else:
                answer.cancel()
                seen.statuses["open at the end"] += 1
            writer.close()

    await asyncio.gather(*(one(i) for i in range(connections)))
    return seen


def run_attack(name: str, target: Target, stop_at_wall: float) -> Seen:
    """In the attackers' own process (so their client work does not stall the victim's client): runs
    one attack until `stop_at_wall` (time.time(): the clocks of both processes agree)."""
    stop_at = time.monotonic() + stop_at_wall - time.time()
    return asyncio.run(ATTACKS[name](target, stop_at))


ATTACKS = {
    "stop_token_ids": stop_token_ids,
    "stop_strings": stop_strings,
    "tenant_names": tenant_names,
    "debug_steps": debug_steps,
    "header_flood": header_flood,
    "slowloris": slowloris,
    "surrogates": surrogates,
    "long_prompt": long_prompt,
    "cpu_control": cpu_control,
}
