"""The OpenAI API's request and response shapes (vLLM's extensions included), and its error JSON.

Requests are pydantic models so FastAPI documents them in the OpenAPI schema; unknown fields are
ignored (clients send many we do not use), but fields whose meaning we cannot honour are refused.
Text fields must be valid Unicode (JSON can spell a lone UTF-16 surrogate, which no encoder takes), and
every error body can be encoded whatever the request held.
"""

import time
import uuid
from typing import Annotated, Literal

from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from engine.core.sampling_params import SamplingParams

GREEDY_BELOW_TEMPERATURE = 1e-5


def _valid_unicode(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"has a lone UTF-16 surrogate {text[exc.start]!r} at character {exc.start}; expected "
            "valid Unicode (a surrogate only as half of a pair)"
        ) from None
    return text


Text = Annotated[str, AfterValidator(_valid_unicode)]


class StreamOptions(BaseModel):
    include_usage: bool = False


class SamplingFields(BaseModel):
    """What `/v1/completions` and `/v1/chat/completions` share: sampling and streaming."""

    model_config = ConfigDict(extra="ignore")
    model: Text | None = Field(None, description="a served model name; omitted: the server's model")
    max_tokens: int | None = Field(None, ge=1, description="omitted: up to max_model_len")
    max_completion_tokens: int | None = Field(
        None, ge=1, description="chat's newer name for max_tokens"
    )
    temperature: float = Field(1.0, ge=0, allow_inf_nan=False)
    top_p: float = Field(1.0, gt=0, le=1, allow_inf_nan=False)
    top_k: int = Field(-1, ge=-1)
    seed: int | None = Field(None, ge=-(2**63), lt=2**64, description="a 64-bit integer")
    stop: Text | list[Text] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    min_tokens: int = Field(0, ge=0)
    n: int = Field(1, ge=1, description="only 1 is supported")
    logprobs: bool | int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage

    @property
    def stop_strings(self) -> list[str]:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return [s for s in stops if s]

    def over_bounds(
        self, max_stop_sequences: int, max_stop_chars: int, max_stop_token_ids: int
    ) -> tuple[str, str] | None:
        """(param, message) for a list longer than the server allows (ServerConfig's settings), or None."""
        stops = [self.stop] if isinstance(self.stop, str) else self.stop or []
        if len(stops) > max_stop_sequences:
            return "stop", (
                f"stop has {len(stops)} sequences; expected at most {max_stop_sequences} "
                "(--max-stop-sequences)"
            )
        longest = max((len(s) for s in stops), default=0)
        if longest > max_stop_chars:
            return "stop", (
                f"a stop sequence has {longest} characters; expected at most {max_stop_chars} "
                "(--max-stop-sequence-chars)"
            )
        num_ids = len(self.stop_token_ids or ())
        if num_ids > max_stop_token_ids:
            return "stop_token_ids", (
                f"stop_token_ids has {num_ids} ids; expected at most {max_stop_token_ids} "
                "(--max-stop-token-ids)"
            )
        return None

    def unsupported(self) -> tuple[str, str] | None:
        """(param, message) for a field we cannot honour, or None."""
        if self.n != 1:
            return "n", f"n is {self.n}; only n=1 is supported"
        if self.logprobs not in (None, False, 0):
            return (
                "logprobs",
                f"logprobs is {self.logprobs!r}; log-probabilities are not supported, expected null",
            )
        return None

    def sampling_params(self, max_tokens_default: int, vocab_size: int) -> SamplingParams:
        """Raises ValueError (naming the field) for a combination SamplingParams refuses. Stop token ids
        outside the vocabulary can never be generated, so they are dropped."""
        max_tokens = self.max_tokens or self.max_completion_tokens or max_tokens_default
        # like vLLM, a temperature this small is greedy: dividing logits by it would overflow to inf
        temperature = 0.0 if self.temperature < GREEDY_BELOW_TEMPERATURE else self.temperature
        return SamplingParams(
            temperature=temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            seed=self.seed,
            max_tokens=max_tokens,
            min_tokens=self.min_tokens,
            stop_token_ids=frozenset(t for t in self.stop_token_ids or () if 0 <= t < vocab_size),
            ignore_eos=self.ignore_eos,
        )


class CompletionRequest(SamplingFields):
    prompt: Text | list[int] = Field(..., description="text, or a list of token ids")
    echo: bool = False


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Text
    content: Text | list[dict] | None = None

    def text(self) -> str:
        """The message's text; content parts of type "text" are joined (other parts carry no text)."""
        if isinstance(self.content, list):
            return "".join(
                str(part.get("text", "")) for part in self.content if part.get("type") == "text"
            )
        return self.content or ""


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(..., min_length=1)
    add_generation_prompt: bool = True


# ---- responses ---------------------------------------------------------------------------------------
def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def usage(num_prompt_tokens: int, num_output_tokens: int) -> dict:
    return {
        "prompt_tokens": num_prompt_tokens,
        "completion_tokens": num_output_tokens,
        "total_tokens": num_prompt_tokens + num_output_tokens,
    }


def completion_response(
    request_id: str, model: str, text: str, finish_reason: str | None, usage_: dict
) -> dict:
    choice = {
        "index": 0,
        "text": text,
        "logprobs": None,
        "finish_reason": finish_reason,
        "stop_reason": None,
    }
    return {
        "id": request_id,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage_,
    }


def chat_response(
    request_id: str, model: str, text: str, finish_reason: str | None, usage_: dict
) -> dict:
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "logprobs": None,
        "finish_reason": finish_reason,
    }
    return {
        "id": request_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage_,
    }


def completion_chunk(request_id: str, model: str, text: str, finish_reason: str | None) -> dict:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
    return {
        "id": request_id,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
    }


def chat_chunk(request_id: str, model: str, delta: dict, finish_reason: str | None) -> dict:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    return {
        "id": request_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
    }


def usage_chunk(
    request_id: str,
    model: str,
    obj: Literal["text_completion", "chat.completion.chunk"],
    usage_: dict,
) -> dict:
    return {
        "id": request_id,
        "object": obj,
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": usage_,
    }


# ---- errors ------------------------------------------------------------------------------------------
_ERROR_TYPES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    408: "RequestTimeoutError",
    413: "RequestTooLargeError",
    429: "RateLimitError",
    431: "RequestHeaderFieldsTooLargeError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
    504: "DeadlineExceededError",
}


class APIError(Exception):
    """An error answered as OpenAI's error JSON with this HTTP status (and headers, e.g. Retry-After)."""

    def __init__(
        self, status: int, message: str, param: str | None = None, headers: dict | None = None
    ):
        super().__init__(message)
        self.status, self.message, self.param, self.headers = status, message, param, headers or {}

    def response(self) -> JSONResponse:
        return JSONResponse(
            error_body(self.status, self.message, self.param), self.status, headers=self.headers
        )


def error_body(status: int, message: str, param: str | None = None) -> dict:
    """OpenAI's error JSON, with vLLM's choice of the HTTP status as `code`; text that cannot be encoded
    (a lone surrogate the client sent, echoed in the message) is escaped, so the body always can be."""
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return {
        "error": {
            "message": message,
            "type": _ERROR_TYPES.get(status, "APIError"),
            "param": param,
            "code": status,
        }
    }


def describe_validation_error(errors: list[dict]) -> tuple[str, str | None]:
    """A pydantic/FastAPI validation error list as one message naming each field at fault, and the
    first field's name for `param`. A union's failed branches are merged into one entry per field."""
    problems: dict[str, list[str]] = {}
    inputs: dict[str, object] = {}
    for error in errors:
        loc = [str(p) for p in error.get("loc", ()) if p != "body"]
        if error.get("type") == "json_invalid":  # its loc is a character position, not a field
            reason, position = error.get("ctx", {}).get("error", "invalid"), loc[-1] if loc else "?"
            return (
                f"the body is not valid JSON: {reason} at character {position}; expected a JSON object",
                None,
            )
        field = ".".join(p for p in loc if not _is_union_branch(p)) or "body"
        if error.get("type") == "missing":
            problems.setdefault(field, []).append("is required but missing")
            continue
        problems.setdefault(field, []).append(error.get("msg", "invalid"))
        inputs.setdefault(field, error.get("input"))
    parts = [
        f"{field} {msgs[0]}"
        if field not in inputs
        else f"{field}: {', or '.join(dict.fromkeys(msgs))}; got {_short(inputs[field])}"
        for field, msgs in list(problems.items())[:5]
    ]
    return "; ".join(parts), next(iter(problems), None)


def _is_union_branch(part: str) -> bool:
    # pydantic names a union's branch by its type: `str`, `list[int]`, `function-after[...]`
    return "[" in part or part in ("str", "int", "float", "bool", "list", "dict", "none")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
