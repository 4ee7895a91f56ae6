"""The OpenAI-compatible HTTP server: `build_app(engine_config, server_config)` returns a FastAPI app.

Routes: /v1/completions, /v1/chat/completions, /v1/models, /health, /metrics, and /debug/steps with
--record-steps (behind the key). Every error, ours or FastAPI's, leaves as OpenAI's error JSON; bad
input is a 4xx, and the engine keeps serving others. A request passes, in order: the connection limits
and the head's size and deadline (http_guard.py, in the HTTP parser), the response count, header size
and API key (auth), body checks (the client's share of body bytes, size, deadline, encoding),
FastAPI's validation, the request's bounds (stop lists), then admission (drain, tenant limits) and the engine's own checks (queue, KV quota).
"""

import asyncio
import json
import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine.async_engine import AsyncEngine
from engine.config import EngineConfig
from engine.metrics import CONTENT_TYPE_LATEST, ServingMetrics
from engine.openai import protocol as api
from engine.openai.auth import AccessMiddleware, KeyRing
from engine.openai.client_budget import ClientBudget
from engine.openai.drain import Drainer
from engine.openai.http_guard import ConnectionLimits
from engine.openai.limits import Admission
from engine.openai.middleware import BodyCheckMiddleware, StatusCountMiddleware, max_json_commas
from engine.openai.protocol import APIError
from engine.openai.server_config import ServerConfig, auto_body_limit_bytes, resolve_tenancy
from engine.openai.serving import ServingContext, create_chat_completion, create_completion
from engine.step_recorder import StepRecorder

log = logging.getLogger("surgeplan.server")


def build_app(
    engine_config: EngineConfig, server_config: ServerConfig | None = None, **server_options
) -> FastAPI:
    """Loads the engine now (so a bad model fails before the port opens); its thread starts with the app.
    `server_options` are ServerConfig's fields, for a config built on the spot."""
    from engine.llm_engine import LLMEngine

    if server_config is not None and server_options:
        raise ValueError(
            f"build_app got both server_config and {sorted(server_options)}; expected one of them"
        )
    config = server_config or ServerConfig(**server_options)
    tenancy = resolve_tenancy(
        config.tenant_keys, engine_config.tenant_block_quota, config.max_open_tenants
    )
    engine_config = engine_config.model_copy(update={"tenant_block_quota": tenancy.kv_quota()})
    names = list(config.served_model_names or [engine_config.model])
    metrics = ServingMetrics(names[0])
    metrics.keep_tenants(tenancy.limits)
    recorder = StepRecorder(config.record_steps) if config.record_steps else None
    async_engine = AsyncEngine(
        lambda: LLMEngine(engine_config), metrics, config.max_waiting_requests, recorder=recorder
    )
    engine = async_engine.engine
    metrics.observe_cache_config(engine.cache_config)
    admission = Admission(config, tenancy, metrics)
    drainer = Drainer(admission, async_engine, config.drain_timeout_s)
    ctx = ServingContext(
        async_engine,
        engine.tokenizer,
        names,
        engine.scheduler_config.max_model_len,
        admission,
        config,
        engine.model_config.vocab_size,
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        async_engine.start()
        drainer.attach(asyncio.get_running_loop())
        yield
        await async_engine.stop()

    app = FastAPI(title="surgeplan OpenAI-compatible server", lifespan=lifespan)
    app.state.serving, app.state.metrics, app.state.drainer = ctx, metrics, drainer
    app.state.connection_limits = ConnectionLimits.of(
        config, metrics
    )  # read by http_guard.uvicorn_options
    body_limit_bytes = config.max_request_body_bytes or auto_body_limit_bytes(
        engine.scheduler_config.max_model_len, getattr(engine.tokenizer, "max_chars_per_token", 1)
    )
    app.state.limits_line = (  # stated at startup by `surgeplan serve`
        f"request bodies: at most {body_limit_bytes:,} bytes (--max-request-body-bytes "
        f"{config.max_request_body_bytes or 'auto'}), {config.client_body_bytes_per_s:,} "
        "bytes/s per client (--client-body-bytes-per-s; 0: no share)"
    )
    max_commas = max_json_commas(
        engine.scheduler_config.max_model_len, config.max_stop_token_ids, config.max_stop_sequences
    )
    app.add_middleware(
        BodyCheckMiddleware,
        max_bytes=body_limit_bytes,
        timeout_s=config.body_timeout_s,
        admission=admission,
        metrics=metrics,
        max_commas=max_commas,
        budget=ClientBudget(config.client_body_bytes_per_s, body_limit_bytes)
        if config.client_body_bytes_per_s
        else None,
    )
    app.add_middleware(
        AccessMiddleware,
        keys=KeyRing.of(config),
        tenancy=tenancy,
        metrics=metrics,
        max_header_bytes=config.max_header_bytes,
        open_keys_claim_tenants=config.open_keys_claim_tenants,
    )
    app.add_middleware(StatusCountMiddleware, metrics=metrics)  # the last added runs first
    _add_error_handlers(app)
    _add_routes(app, ctx, metrics, engine_config.model, engine.model_config.vocab_size)
    if recorder is not None:
        serving_steps = asyncio.Semaphore(1)  # one window serialised at a time, off the event loop

        @app.get("/debug/steps")
        async def steps(since: int = 0) -> Response:
            async with serving_steps:
                body = await run_in_threadpool(lambda: json.dumps(recorder.since(since)).encode())
            return Response(body, media_type="application/json")

    return app


def _add_routes(
    app: FastAPI, ctx: ServingContext, metrics: ServingMetrics, root: str, vocab_size: int
) -> None:
    @app.get("/health")
    async def health() -> Response:
        if ctx.admission.draining:
            return JSONResponse(api.error_body(503, "the server is draining before it exits"), 503)
        if ctx.engine.is_running:
            return Response(status_code=200)
        return JSONResponse(api.error_body(503, "the engine thread is not running"), 503)

    @app.get("/v1/models")
    async def models() -> dict:
        cards = [
            {
                "id": name,
                "object": "model",
                "created": 0,
                "owned_by": "surgeplan",
                "root": root,
                "parent": None,
                "max_model_len": ctx.max_model_len,
                "vocab_size": vocab_size,
            }
            for name in ctx.served_model_names
        ]
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
        return JSONResponse(
            api.error_body(exc.status_code, str(exc.detail)), exc.status_code, headers=exc.headers
        )

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse(api.error_body(500, f"internal error: {exc!r}"), 500)
