"""One request's state as it moves through the scheduler: tokens, progress, KV blocks and timings.

Pure Python (shared with the simulator). `num_computed_tokens` catches up with `num_tokens`; a step
that brings it level produces the next token. The scheduler reads these fields for every running
request at every step, so the counts it needs (`num_tokens`, `num_prompt_tokens`, and the stop
summary `stop_len` / `stops_on_token`) are plain slots kept up to date (by `append_output_token`,
`append_decoded_tokens`, assigning `prompt_token_ids` / `output_token_ids`, and the scheduler on
admission), rather than properties recomputed on each read.

`uniform_output_token`: set when every token sampled for the request is that one token (the simulator's
`SIM_TOKEN_ID`); its outputs are then counted in `num_tokens`, not stored, and made on demand
(`output_token_ids`, `token_ids`), so the scheduler's per-token loops skip a list append per token.
"""

from enum import Enum

from engine.core.sampling_params import SamplingParams


class RequestStatus(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED_STOPPED = "stop"
    FINISHED_LENGTH = "length"
    FINISHED_ABORTED = "abort"
    HANDED_OVER = (
        "handed_over"  # prefill role: done here, its KV blocks held until the decode side has them
    )

    @property
    def finished(self) -> bool:
        return self not in _UNFINISHED


_UNFINISHED = (RequestStatus.WAITING, RequestStatus.RUNNING)


class Request:
    __slots__ = (
        "request_id",
        "_prompt_token_ids",
        "_output_token_ids",
        "uniform_output_token",
        "num_prompt_tokens",
        "num_tokens",
        "params",
        "tenant",
        "status",
        "num_computed_tokens",
        "num_cached_tokens",
        "block_table",
        "num_hashed_blocks",
        "block_hashes",
        "arrival_time",
        "first_scheduled_time",
        "first_token_time",
        "finish_time",
        "num_preemptions",
        "static_reserved_blocks",
        "generator",
        "stop_len",
        "stops_on_token",
    )

    def __init__(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        params: SamplingParams,
        arrival_time: float,
        tenant: str = "default",
        copy_prompt: bool = True,
    ):
        """`copy_prompt=False`: `prompt_token_ids` was built for this request and its caller lets go of
        it, so the request keeps that list rather than a copy (the simulator's prompts, thousands of
        tokens each, made per request)."""
        self.request_id = request_id
        self._output_token_ids: list[int] = []  # (empty while `uniform_output_token` is set)
        self.uniform_output_token: int | None = None  # (module docstring)
        if copy_prompt:  # (the setter copies, and sets num_prompt_tokens and num_tokens)
            self.prompt_token_ids = prompt_token_ids
        else:
            self._prompt_token_ids = prompt_token_ids
            self.num_prompt_tokens = self.num_tokens = len(prompt_token_ids)
        self.params = params
        self.tenant = tenant
        self.status = RequestStatus.WAITING
        self.num_computed_tokens = 0
        self.num_cached_tokens = 0  # prompt tokens served from the prefix cache (last admission)
        self.block_table: list[int] = []
        self.block_hashes: list[int] = []  # chained hashes of this request's full blocks, in order
        self.num_hashed_blocks = 0  # how many of its blocks are registered in the prefix cache
        self.arrival_time = arrival_time
        self.first_scheduled_time: float | None = None
        self.first_token_time: float | None = None
        self.finish_time: float | None = None
        self.num_preemptions = 0
        self.static_reserved_blocks = (
            0  # static policy: blocks reserved up front for the longest sequence
        )
        # the sampler's per-request RNG (a torch.Generator, seeded requests): typed `object` so that a
        # mypyc build (`make compiled`) does not fix the attribute's type as None
        self.generator: object = None
        # set by the scheduler when it starts running the request (until then: "check every token"):
        self.stop_len = 0  # num_tokens at which it stops for length
        self.stops_on_token = True  # whether a sampled token can stop it (stop ids, or EOS)

    # ---- tokens: the lists, and the counts kept with them ----------------------------------------
    @property
    def prompt_token_ids(self) -> list[int]:
        return self._prompt_token_ids

    @prompt_token_ids.setter
    def prompt_token_ids(self, token_ids: list[int]) -> None:
        num_output = (
            len(self._output_token_ids)
            if self.uniform_output_token is None
            else self.num_output_tokens
        )
        self._prompt_token_ids = list(token_ids)
        self.num_prompt_tokens = len(self._prompt_token_ids)
        self.num_tokens = self.num_prompt_tokens + num_output

    @property
    def output_token_ids(self) -> list[int]:
        """The sampled tokens. Grow it with `append_output_token` / `append_decoded_tokens` (or assign a
        new list), not in place, so `num_tokens` stays right."""
        if self.uniform_output_token is not None:
            return [self.uniform_output_token] * self.num_output_tokens
        return self._output_token_ids

    @output_token_ids.setter
    def output_token_ids(self, token_ids: list[int]) -> None:
        token_ids = list(token_ids)
        uniform = self.uniform_output_token
        if uniform is not None:
            self._check_uniform(token_ids)
        self._output_token_ids = token_ids if uniform is None else []
        self.num_tokens = self.num_prompt_tokens + len(token_ids)

    def append_output_token(self, token_id: int) -> None:
        if self.uniform_output_token is None:
            self._output_token_ids.append(token_id)
        else:
            self._check_uniform([token_id])
        self.num_tokens += 1

    def append_decoded_tokens(self, token_ids: list[int]) -> None:
        """The effect of `len(token_ids)` decode steps: each computes the last token and samples the next."""
        if self.uniform_output_token is None:
            self._output_token_ids.extend(token_ids)
        else:
            self._check_uniform(token_ids)
        self.num_tokens += len(token_ids)
        self.num_computed_tokens += len(token_ids)

    def _check_uniform(self, token_ids: list[int]) -> None:
        for token in token_ids:
            if token != self.uniform_output_token:
                raise ValueError(
                    f"{self.request_id}: output token {token}; expected only its uniform_output_token "
                    f"{self.uniform_output_token} (set it to None to store other tokens)"
                )

    @property
    def num_output_tokens(self) -> int:
        return self.num_tokens - self.num_prompt_tokens

    @property
    def max_num_tokens(self) -> int:
        return self.num_prompt_tokens + self.params.max_tokens

    def token_ids(self, start: int, end: int) -> list[int]:
        """Tokens [start, end) of prompt + output, without building the concatenation."""
        prompt = self._prompt_token_ids
        num_prompt = self.num_prompt_tokens
        if end <= num_prompt:
            return prompt[start:end]
        uniform = self.uniform_output_token
        if uniform is not None:  # outputs counted, not stored
            head = prompt[start:] if start < num_prompt else []
            return head + [uniform] * (end - max(start, num_prompt))
        if start >= num_prompt:
            return self._output_token_ids[start - num_prompt : end - num_prompt]
        return prompt[start:] + self._output_token_ids[: end - num_prompt]

    # ---- status ----------------------------------------------------------------------------------
    @property
    def is_finished(self) -> bool:
        return self.status not in _UNFINISHED

    @property
    def finish_reason(self) -> str | None:
        return None if self.status in _UNFINISHED else self.status.value

    def __repr__(self) -> str:
        return (
            f"Request({self.request_id!r}, {self.status.value}, tokens={self.num_tokens}, "
            f"computed={self.num_computed_tokens}, blocks={len(self.block_table)})"
        )
