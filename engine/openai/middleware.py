"""ASGI middleware that looks at a request before FastAPI parses it: the body's size and encoding (413,
400), and the count of every response by route and status, so /metrics adds up to what clients saw.
Refusals leave as OpenAI's error JSON, like every other error of the server."""
from fastapi.responses import JSONResponse

from engine.metrics import ServingMetrics
from engine.openai import protocol as api

API_ROUTES = frozenset({"/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics"})


async def refuse(send, status: int, message: str, headers: dict | None = None) -> None:
    """Answers with OpenAI's error JSON without running the app."""
    await JSONResponse(api.error_body(status, message), status, headers=headers)({"type": "http"}, None, send)


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
    """Refuses bodies over `max_bytes` (413) and bodies that are not UTF-8 (400) before any parsing,
    naming the limit or the offending byte. The body is read once and replayed to the app."""

    def __init__(self, app, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await refuse(send, 413, f"the body has {int(declared)} bytes, over the limit of {self.max_bytes}")
        body = await self._read(receive)
        if body is None:
            return await refuse(send, 413, f"the body is over the limit of {self.max_bytes} bytes")
        problem = _utf8_problem(body)
        if problem is not None:
            return await refuse(send, 400, problem)
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive) -> bytes | None:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                return None
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


def _utf8_problem(body: bytes) -> str | None:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return (f"the body is not valid UTF-8: byte 0x{body[exc.start]:02x} at position {exc.start}; "
                "expected UTF-8 encoded JSON")
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
