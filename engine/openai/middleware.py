"""ASGI middleware that looks at a request before FastAPI parses it: the body's size, deadline and
encoding (413, 408, 400; 503 when a drain starts while it arrives), and the count of every response by
route and status, so /metrics adds up to what clients saw. Refusals leave as OpenAI's error JSON, like
every other error of the server."""

import asyncio
import time

from fastapi.responses import JSONResponse

from engine.metrics import ServingMetrics
from engine.openai import protocol as api

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
    stop reading) and bodies that are not UTF-8 (400), before any parsing, naming the limit or the
    offending byte. The body is read once and replayed to the app."""

    def __init__(
        self,
        app,
        max_bytes: int,
        timeout_s: float = 30.0,
        admission=None,
        metrics: ServingMetrics | None = None,
        max_commas: int | None = None,
    ):
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s
        self.admission, self.metrics, self.max_commas = admission, metrics, max_commas

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await refuse(
                send, 413, f"the body has {int(declared)} bytes, over the limit of {self.max_bytes}"
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
        if body is None:
            return await refuse(send, 413, f"the body is over the limit of {self.max_bytes} bytes")
        problem = _utf8_problem(body)
        if problem is not None:
            return await refuse(send, 400, problem)
        if (
            self.max_commas is not None
            and len(body) > self.max_commas
            and body.count(b",") > self.max_commas
        ):
            return await refuse(
                send,
                413,
                f"the body has {body.count(b','):,} commas, more than any request this "
                f"server can serve holds ({self.max_commas:,}: see max_json_commas); expected "
                "fewer values (prompt token ids, stop lists)",
            )
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive) -> bytes | None:
        chunks, size = [], 0
        deadline = time.monotonic() + self.timeout_s
        while True:
            message = await self._receive_before(receive, deadline)
            if message["type"] == "http.disconnect":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                return None
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

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


class _BodyRefused(Exception):
    def __init__(self, status: int, reason: str, message: str):
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


def _utf8_problem(body: bytes) -> str | None:
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
