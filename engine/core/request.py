"""One request's state as it moves through the scheduler: tokens, progress, KV blocks and timings.

Pure Python (shared with the simulator). `num_computed_tokens` catches up with `num_tokens`; a step
that brings it level produces the next token.
"""
from enum import Enum

from engine.core.sampling_params import SamplingParams


class RequestStatus(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED_STOPPED = "stop"
    FINISHED_LENGTH = "length"
    FINISHED_ABORTED = "abort"

    @property
    def finished(self) -> bool:
        return self in (RequestStatus.FINISHED_STOPPED, RequestStatus.FINISHED_LENGTH, RequestStatus.FINISHED_ABORTED)


class Request:
    __slots__ = ("request_id", "prompt_token_ids", "output_token_ids", "params", "tenant", "status",
                 "num_computed_tokens", "num_cached_tokens", "block_table", "num_hashed_blocks", "block_hashes",
                 "arrival_time", "first_scheduled_time", "first_token_time", "finish_time",
                 "num_preemptions", "static_reserved_blocks", "generator")

    def __init__(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams,
                 arrival_time: float, tenant: str = "default"):
        self.request_id = request_id
        self.prompt_token_ids = list(prompt_token_ids)
        self.output_token_ids: list[int] = []
        self.params = params
        self.tenant = tenant
        self.status = RequestStatus.WAITING
        self.num_computed_tokens = 0
        self.num_cached_tokens = 0          # prompt tokens served from the prefix cache (last admission)
        self.block_table: list[int] = []
        self.block_hashes: list[int] = []   # chained hashes of this request's full blocks, in order
        self.num_hashed_blocks = 0          # how many of its blocks are registered in the prefix cache
        self.arrival_time = arrival_time
        self.first_scheduled_time: float | None = None
        self.first_token_time: float | None = None
        self.finish_time: float | None = None
        self.num_preemptions = 0
        self.static_reserved_blocks = 0     # static policy: blocks reserved up front for the longest sequence
        self.generator = None               # the sampler's per-request RNG (seeded requests)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def max_num_tokens(self) -> int:
        return self.num_prompt_tokens + self.params.max_tokens

    def token_ids(self, start: int, end: int) -> list[int]:
        prompt = self.prompt_token_ids
        if end <= len(prompt):
            return prompt[start:end]
        return (prompt + self.output_token_ids)[start:end]

    @property
    def is_finished(self) -> bool:
        return self.status.finished

    @property
    def finish_reason(self) -> str | None:
        return self.status.value if self.status.finished else None

    def __repr__(self) -> str:
        return (f"Request({self.request_id!r}, {self.status.value}, tokens={self.num_tokens}, "
                f"computed={self.num_computed_tokens}, blocks={len(self.block_table)})")
