"""The two generation endpoints: validate, admit (tenant limits, drain), submit to the engine thread,
then answer whole or as SSE.

A request that ends early for any reason (client gone, stop string, deadline, error) is aborted in
the engine, so its KV blocks are freed at the next step; its admission lease is released once its
whole answer has been sent, or when the answer is cut short, whichever way that happens.
"""

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import StreamingResponse

from engine.async_engine import AsyncEngine
from engine.core.outputs import RequestOutput
from engine.openai import protocol as api
from engine.openai.limits import Admission, Lease
from engine.openai.protocol import APIError
from engine.openai.server_config import DEFAULT_TENANT, ServerConfig
from engine.openai.text_stream import TextStream, chat_prompt_token_ids
from engine.request_stream import (
    DeadlineExceeded,
    EngineStepError,
    EngineStopped,
    QueueFull,
    RequestStream,
)

__all__ = ["APIError", "ServingContext", "create_completion", "create_chat_completion"]
TIMEOUT_HEADER = "x-request-timeout"  # seconds this request may take in all, queueing included


@dataclass
class ServingContext:
    engine: AsyncEngine
    tokenizer: object
    served_model_names: list[str]
    max_model_len: int
    admission: Admission
    config: ServerConfig
    vocab_size: int

    @property
    def request_timeout_s(self) -> float | None:
        return self.config.request_timeout_s

    @property
    def retry_after_s(self) -> int:
        return self.config.retry_after_s

    def check_model(self, model: str | None) -> str:
        if model is not None and model not in self.served_model_names:
            raise APIError(
                404,
                f"The model `{model}` does not exist; expected one of {self.served_model_names}",
                "model",
            )
        return model or self.served_model_names[0]


# ---- the endpoints -----------------------------------------------------------------------------------
async def create_completion(ctx: ServingContext, body: api.CompletionRequest, request: Request):
    model = _check_request(ctx, body)
    if body.echo:
        raise APIError(
            400, "echo is true; echoing the prompt is not supported, expected false", "echo"
        )
    if isinstance(body.prompt, list):
        prompt_ids = body.prompt
    else:
        _check_text_fits(ctx, len(body.prompt), "prompt")
        prompt_ids = ctx.tokenizer.encode(body.prompt)
    return await _generate(ctx, body, request, model, prompt_ids, chat=False)


async def create_chat_completion(
    ctx: ServingContext, body: api.ChatCompletionRequest, request: Request
):
    model = _check_request(ctx, body)
    messages = [(m.role, m.text()) for m in body.messages]
    _check_text_fits(ctx, sum(len(role) + len(text) for role, text in messages), "messages")
    try:
        prompt_ids = chat_prompt_token_ids(ctx.tokenizer, messages, body.add_generation_prompt)
    except Exception as exc:  # noqa: BLE001  (a user template can fail on odd roles or orders)
        raise APIError(
            400, f"messages could not be formatted with the chat template: {exc}", "messages"
        ) from exc
    return await _generate(ctx, body, request, model, prompt_ids, chat=True)


def _check_text_fits(ctx: ServingContext, num_chars: int, param: str) -> None:
    """Refuses text that cannot fit in max_model_len tokens before tokenizing it (which holds the
    interpreter lock for as long as the text is long)."""
    limit = ctx.max_model_len * getattr(ctx.tokenizer, "max_chars_per_token", 1 << 30)
    if num_chars > limit:
        raise APIError(
            400,
            f"{param} has {num_chars:,} characters, more than fit in max_model_len="
            f"{ctx.max_model_len} tokens (at most {limit:,} characters); expected a shorter text",
            param,
        )


def _check_request(ctx: ServingContext, body: api.SamplingFields) -> str:
    model = ctx.check_model(body.model)
    config = ctx.config
    refused = body.unsupported() or body.over_bounds(
        config.max_stop_sequences, config.max_stop_sequence_chars, config.max_stop_token_ids
    )
    if refused is not None:
        raise APIError(400, refused[1], refused[0])
    return model


async def _generate(
    ctx: ServingContext,
    body: api.SamplingFields,
    request: Request,
    model: str,
    prompt_ids: list[int],
    chat: bool,
):
    arrival_time = time.perf_counter()
    try:
        params = body.sampling_params(max(1, ctx.max_model_len - len(prompt_ids)), ctx.vocab_size)
    except ValueError as exc:
        raise APIError(400, str(exc)) from exc
    request_id = api.new_id("chatcmpl" if chat else "cmpl")
    tenant = getattr(request.state, "tenant", DEFAULT_TENANT)  # set by AccessMiddleware
    timeout_s = _timeout_s(ctx, request)
    lease = ctx.admission.admit(tenant, len(prompt_ids))
    try:
        stream = await _submit(ctx, request_id, prompt_ids, params, arrival_time, tenant, timeout_s)
        generation = _Generation(
            ctx, stream, TextStream(ctx.tokenizer, body.stop_strings), len(prompt_ids)
        )
        if body.stream:
            events = (_chat_events if chat else _completion_events)(
                generation, model, body.include_usage
            )
            response, lease = (
                _EventStreamResponse(_sse(events), generation, lease),
                None,
            )  # it releases
            return response
        await _run_unless_disconnected(request, generation)
    finally:
        if lease is not None:
            lease.release()
    build = api.chat_response if chat else api.completion_response
    return build(
        request_id, model, generation.text.text, generation.finish_reason, generation.usage()
    )


async def _submit(
    ctx: ServingContext,
    request_id: str,
    prompt_ids: list[int],
    params,
    arrival_time: float,
    tenant: str,
    timeout_s: float | None,
) -> RequestStream:
    try:
        return await ctx.engine.generate(
            request_id, prompt_ids, params, tenant, arrival_time, timeout_s
        )
    except (QueueFull, EngineStopped) as exc:
        raise APIError(503, str(exc), headers={"Retry-After": str(ctx.retry_after_s)}) from exc
    except ValueError as exc:
        param = "prompt" if "prompt" in str(exc) else None
        raise APIError(400, str(exc), param) from exc


def _timeout_s(ctx: ServingContext, request: Request) -> float | None:
    raw = request.headers.get(TIMEOUT_HEADER)
    if raw is None:
        return ctx.request_timeout_s
    try:
        timeout_s = float(raw)
    except ValueError:
        timeout_s = float("nan")
    if not timeout_s > 0 or timeout_s == float("inf"):
        raise APIError(
            400, f"header X-Request-Timeout is {raw!r}; expected a positive number of seconds"
        )
    return timeout_s


# ---- running one request -----------------------------------------------------------------------------
class _Generation:
    """Reads a request's outputs into text deltas; ends it in the engine if it stops early."""

    def __init__(
        self, ctx: ServingContext, stream: RequestStream, text: TextStream, num_prompt_tokens: int
    ):
        self.ctx, self.stream, self.text = ctx, stream, text
        self.num_prompt_tokens = num_prompt_tokens
        self.num_output_tokens = 0
        self.finish_reason: str | None = None
        self.closed = False

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    async def next_delta(self) -> str:
        """The text produced since the last call (may be empty: held back, or undecodable yet)."""
        out: RequestOutput = await self.stream.next_output()
        self.num_output_tokens = len(out.output_token_ids)
        delta = self.text.update(out.output_token_ids, out.finished)
        if delta.stopped and not out.finished:
            self.ctx.engine.abort(self.stream.request_id, finished_reason="stop")
        self.finish_reason = "stop" if delta.stopped else out.finish_reason
        return delta.text

    async def run(self) -> None:
        try:
            while not self.done:
                await self.next_delta()
        finally:
            self.close()

    def close(self) -> None:
        if not self.done and not self.stream.finished and not self.closed:
            self.closed = True
            self.ctx.engine.abort(self.stream.request_id)

    def usage(self) -> dict:
        return api.usage(self.num_prompt_tokens, self.num_output_tokens)


async def _run_unless_disconnected(request: Request, generation: _Generation) -> None:
    """Runs the generation to its end, or aborts it as soon as the client disconnects."""
    work = asyncio.ensure_future(generation.run())
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not work.done():
            work.cancel()  # the client is gone: `run` aborts the request on its way out
            await asyncio.wait({work})
    try:
        work.result()
    except asyncio.CancelledError as exc:
        raise APIError(499, "the client closed the connection") from exc
    except (DeadlineExceeded, EngineStopped, EngineStepError) as exc:
        raise _engine_error(exc) from exc


class _EventStreamResponse(StreamingResponse):
    """SSE that, however it ends (done, client gone before or during the stream, server stopping),
    aborts an unfinished generation and releases its admission lease."""

    def __init__(self, content, generation: _Generation, lease: Lease):
        super().__init__(content, media_type="text/event-stream")
        self.generation, self.lease = generation, lease

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.generation.close()
            self.lease.release()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _engine_error(exc: Exception) -> APIError:
    status = {DeadlineExceeded: 504, EngineStopped: 503}.get(type(exc), 500)
    return APIError(status, str(exc))


# ---- server-sent events ------------------------------------------------------------------------------
async def _sse(events) -> AsyncIterator[str]:
    try:
        async for event in events:
            yield f"data: {json.dumps(event, separators=(',', ':'))}\n\n"
        yield "data: [DONE]\n\n"
    finally:
        await events.aclose()  # a client that left: end the request now, not when GC finds it


async def _completion_events(
    gen: _Generation, model: str, include_usage: bool
) -> AsyncIterator[dict]:
    request_id = gen.stream.request_id
    try:
        while not gen.done:
            delta = await gen.next_delta()
            yield api.completion_chunk(request_id, model, delta, gen.finish_reason)
    except (DeadlineExceeded, EngineStopped, EngineStepError) as exc:
        yield _error_event(exc)
        return
    finally:
        gen.close()
    if include_usage:
        yield api.usage_chunk(request_id, model, "text_completion", gen.usage())


async def _chat_events(gen: _Generation, model: str, include_usage: bool) -> AsyncIterator[dict]:
    request_id = gen.stream.request_id
    yield api.chat_chunk(request_id, model, {"role": "assistant", "content": ""}, None)
    try:
        while not gen.done:
            delta = await gen.next_delta()
            yield api.chat_chunk(request_id, model, {"content": delta}, gen.finish_reason)
    except (DeadlineExceeded, EngineStopped, EngineStepError) as exc:
        yield _error_event(exc)
        return
    finally:
        gen.close()
    if include_usage:
        yield api.usage_chunk(request_id, model, "chat.completion.chunk", gen.usage())


def _error_event(exc: Exception) -> dict:
    error = _engine_error(exc)
    return api.error_body(error.status, error.message)
