"""The OpenAI-compatible HTTP server: `build_app(engine_config, ...)` returns a FastAPI app.

Routes: /v1/completions, /v1/chat/completions, /v1/models, /health, /metrics. Every error, ours or
FastAPI's, leaves as OpenAI's error JSON; bad input is a 4xx, and the engine keeps serving others.
"""
import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine.openai import protocol as api
from engine.async_engine import AsyncEngine
from engine.config import EngineConfig
from engine.metrics import CONTENT_TYPE_LATEST, ServingMetrics
from engine.openai.serving import APIError, ServingContext, create_chat_completion, create_completion

log = logging.getLogger("surgeplan.server")
DEFAULT_MAX_REQUEST_BODY_BYTES = 4 << 20


def build_app(engine_config: EngineConfig, served_model_names: list[str] | None = None,
              max_waiting_requests: int | None = None, request_timeout_s: float | None = None,
              max_request_body_bytes: int = DEFAULT_MAX_REQUEST_BODY_BYTES, retry_after_s: int = 1) -> FastAPI:
    """Loads the engine now (so a bad model fails before the port opens); its thread starts with the app."""
    from engine.llm_engine import LLMEngine

    names = list(served_model_names or [engine_config.model])
    metrics = ServingMetrics(names[0])
    async_engine = AsyncEngine(lambda: LLMEngine(engine_config), metrics, max_waiting_requests)
    engine = async_engine.engine
    ctx = ServingContext(async_engine, engine.tokenizer, names, engine.scheduler_config.max_model_len,
                         request_timeout_s, retry_after_s)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        async_engine.start()
        yield
        await async_engine.stop()

    app = FastAPI(title="surgeplan OpenAI-compatible server", lifespan=lifespan)
    app.state.serving = ctx
    app.state.metrics = metrics
    app.add_middleware(BodyCheckMiddleware, max_bytes=max_request_body_bytes)
    _add_error_handlers(app)
    _add_routes(app, ctx, metrics, engine_config.model, engine.model_config.vocab_size)
    return app


def _add_routes(app: FastAPI, ctx: ServingContext, metrics: ServingMetrics, root: str, vocab_size: int) -> None:
    @app.get("/health")
    async def health() -> Response:
        if ctx.engine.is_running:
            return Response(status_code=200)
        return JSONResponse(api.error_body(503, "the engine thread is not running"), 503)

    @app.get("/v1/models")
    async def models() -> dict:
        cards = [{"id": name, "object": "model", "created": 0, "owned_by": "surgeplan", "root": root,
                  "parent": None, "max_model_len": ctx.max_model_len, "vocab_size": vocab_size}
                 for name in ctx.served_model_names]
        return {"object": "list", "data": cards}

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/completions")
    async def completions(body: api.CompletionRequest, request: Request):
        return await create_completion(ctx, body, request)

    @app.post("/v1/chat/completions")
    async def chat_completions(body: api.ChatCompletionRequest, request: Request):
        return await create_chat_completion(ctx, body, request)


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def api_error(_: Request, exc: APIError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = api.describe_validation_error(list(exc.errors()))
        return JSONResponse(api.error_body(400, message, param), 400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(api.error_body(exc.status_code, str(exc.detail)), exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse(api.error_body(500, f"internal error: {exc!r}"), 500)


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
            return await self._refuse(send, 413, f"the body has {int(declared)} bytes, over the limit of {self.max_bytes}")
        body = await self._read(receive)
        if body is None:
            return await self._refuse(send, 413, f"the body is over the limit of {self.max_bytes} bytes")
        problem = _utf8_problem(body)
        if problem is not None:
            return await self._refuse(send, 400, problem)
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

    @staticmethod
    async def _refuse(send, status: int, message: str) -> None:
        await JSONResponse(api.error_body(status, message), status)({"type": "http"}, None, send)


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
