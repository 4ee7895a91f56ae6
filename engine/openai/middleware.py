"""ASGI middleware that looks at a request before FastAPI parses it: the body's size, deadline and
encoding (413, 408, 400; 503 when a drain starts while it arrives), and the count of every response by
route and status, so /metrics adds up to what clients saw. Refusals leave as OpenAI's error JSON, like
every other error of the server."""

import asyncio
import math
import time
from dataclasses import dataclass

from fastapi.responses import JSONResponse

from engine.metrics import ServingMetrics
from engine.openai import protocol as api
from engine.openai.client_budget import MAX_WAIT_S, REQUEST_FLOOR_BYTES, ClientBudget

API_ROUTES = frozenset(
    {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics"}
)


async def refuse(send, status: int, message: str, headers: dict | None = None) -> None:
    """Answers with OpenAI's error JSON without running the app."""
    await JSONResponse(api.error_body(status, message), status, headers=headers)(
        {"type": "http"}, None, send
    )


class StatusCountMiddleware:
    """Counts each HTTP response by route (API routes by path, anything else as "other", so the label
    set stays small whatever clients send) and status code, including answers to clients that left
    (499) and errors raised before any response (500)."""

    def __init__(self, app, metrics: ServingMetrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        route = scope["path"] if scope["path"] in API_ROUTES else "other"
        status = None

        async def counting_send(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start" and status is None:
                status = message["status"]
                self.metrics.observe_response(route, status)
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        except Exception:
            if status is None:
                self.metrics.observe_response(route, 500)
            raise


class BodyCheckMiddleware:
    """Refuses bodies over `max_bytes` (413), bodies not whole within `timeout_s` of the head (408, the
    connection closed), bodies still arriving when a drain starts (503, closed: the server is about to
    stop reading), bodies with more commas than any servable request holds (413, as soon as the count
    passes `max_commas`: the rest is read and dropped, never kept) and bodies that are not UTF-8
    (400), before any parsing, naming the limit or the offending byte. With a `budget`, a client over
    its share of body bytes waits for it first, or gets 429 (client_budget.py). The body is read once
    and replayed to the app."""

    def __init__(
        self,
        app,
        max_bytes: int,
        timeout_s: float = 30.0,
        admission=None,
        metrics: ServingMetrics | None = None,
        max_commas: int | None = None,
        budget: ClientBudget | None = None,
    ):
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s
        self.admission, self.metrics, self.max_commas = admission, metrics, max_commas
        self.budget = budget

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        declared_bytes = int(declared) if declared.isdigit() else 0
        client = client_of(scope)
        if self.budget is not None and not await self._wait_for_share(
            client, declared_bytes, receive, send
        ):
            return None
        if declared_bytes > self.max_bytes:
            return await refuse(
                send,
                413,
                f"the body has {declared_bytes} bytes, over the limit of {self.max_bytes} "
                "(--max-request-body-bytes)",
            )
        try:
            body = await self._read(receive)
        except _BodyRefused as refused:
            if self.metrics is not None:
                self.metrics.observe_rejected(refused.reason)
            headers = {"Connection": "close"}
            if refused.status == 503 and self.admission is not None:
                headers["Retry-After"] = str(self.admission.retry_after_s)
            return await refuse(send, refused.status, refused.message, headers)
        if self.budget is not None:
            self.budget.spend(client, body.size_bytes - max(declared_bytes, REQUEST_FLOOR_BYTES))
        if body.over_bytes:
            return await refuse(
                send,
                413,
                f"the body is over the limit of {self.max_bytes} bytes (--max-request-body-bytes)",
            )
        if body.over_commas:
            return await refuse(
                send,
                413,
                f"the body has more than {self.max_commas:,} commas, more than any request this "
                f"server can serve holds (see max_json_commas); expected fewer values (prompt "
                "token ids, stop lists)",
            )
        problem = _utf8_problem(body.data)
        if problem is not None:
            return await refuse(send, 400, problem)
        await self.app(scope, _replay(body.data, receive), send)

    async def _wait_for_share(
        self, client: tuple[str, str], declared_bytes: int, receive, send
    ) -> bool:
        """Whether the request may be read now, after waiting for its client's share; if not, it
        has been answered 429 after MAX_WAIT_S (so a client flooding the server mostly waits),
        its body, if small, read and dropped first (so the client sees the answer). A body over
        the limit is never read: it costs the share of a request (and is then refused, 413)."""
        wait_s = self.budget.reserve(
            client, declared_bytes if declared_bytes <= self.max_bytes else 0
        )
        if wait_s <= MAX_WAIT_S:
            if wait_s > 0:
                await asyncio.sleep(wait_s)
            return True
        await asyncio.sleep(MAX_WAIT_S)
        if self.metrics is not None:
            self.metrics.observe_rejected("client_body_rate")
        headers = {"Retry-After": str(max(1, math.ceil(wait_s - MAX_WAIT_S)))}
        if declared_bytes <= REQUEST_FLOOR_BYTES:
            try:
                await self._read(receive, keep=False)
            except _BodyRefused:
                headers["Connection"] = "close"
        else:
            headers["Connection"] = "close"
        await refuse(
            send,
            429,
            f"this client (API key and address) is over its share of request body bytes, "
            f"{self.budget.bytes_per_s:,} bytes/s (--client-body-bytes-per-s; a request counts "
            f"as at least {REQUEST_FLOOR_BYTES:,} bytes); retry in {headers['Retry-After']} s",
            headers,
        )
        return False

    async def _read(self, receive, keep: bool = True) -> "_Body":
        """The body, or as soon as it passes `max_bytes` (the rest left unread: the connection
        closes) or `max_commas` (the rest read and dropped, so the client sees the answer), a
        _Body saying so. `keep=False`: only read and drop it."""
        chunks, size, commas = ([] if keep else None), 0, 0
        deadline = time.monotonic() + self.timeout_s
        while True:
            message = await self._receive_before(receive, deadline)
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return _Body(b"", size, over_bytes=True)
            if self.max_commas is not None and chunks is not None:
                commas += chunk.count(b",")
                if commas > self.max_commas:
                    chunks = None  # refused: what is left is only read, to be dropped
            if chunks is not None:
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        if chunks is None:
            return _Body(b"", size, over_commas=keep)
        return _Body(b"".join(chunks), size)

    async def _receive_before(self, receive, deadline: float) -> dict:
        """The next message, unless the deadline passes or a drain starts first."""
        closing = self.admission.closing if self.admission is not None else None
        if closing is not None and closing.is_set():
            raise _BodyRefused(
                503,
                "draining",
                "the server is shutting down and reads no more request bodies; "
                "retry on another replica or after it restarts",
            )
        receiving = asyncio.ensure_future(receive())
        waits = {receiving} | (
            {asyncio.ensure_future(closing.wait())} if closing is not None else set()
        )
        try:
            await asyncio.wait(
                waits,
                timeout=max(0.0, deadline - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            for waiting in waits:
                if not waiting.done():
                    waiting.cancel()
        if receiving.done() and not receiving.cancelled():
            return receiving.result()
        if closing is not None and closing.is_set():
            return await self._receive_before(receive, deadline)  # answers the 503
        raise _BodyRefused(
            408,
            "body_timeout",
            f"the request body did not arrive within {self.timeout_s:g} s "
            "of its headers (--body-timeout); expected it sooner",
        )


@dataclass(frozen=True)
class _Body:
    data: bytes
    size_bytes: int
    over_bytes: bool = False
    over_commas: bool = False


def client_of(scope) -> tuple[str, str]:
    """Who sends the request: (its API key's id, set by AccessMiddleware, or "", peer host)."""
    peer = scope.get("client")
    return (scope.get("state", {}).get("key_id", ""), peer[0] if peer else "")


class _BodyRefused(Exception):
    def __init__(self, status: int, reason: str, message: str):
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


def _utf8_problem(body: bytes) -> str | None:
    if body.isascii():  # most JSON is (non-ASCII escaped): a word-at-a-time scan, no decoding
        return None
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return (
            f"the body is not valid UTF-8: byte 0x{body[exc.start]:02x} at position {exc.start}; "
            "expected UTF-8 encoded JSON"
        )
    return None


def _replay(body: bytes, receive):
    sent = False

    async def replayed_receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed_receive


def max_json_commas(max_model_len: int, max_stop_token_ids: int, max_stop_sequences: int) -> int:
    """The most commas a body the server could serve has: its token ids and stop lists, with room for
    messages and fields (and text prompts with a comma per token). Parsing JSON holds the interpreter
    lock, and the engine thread needs it too: a body of 2M ids took 0.7 s to parse and validate, so
    bodies with more values than any servable request are refused before they are parsed."""
    return 2 * max_model_len + max_stop_token_ids + max_stop_sequences + 8192
