"""Per-request decoding settings, validated on creation (vLLM's names). `stop_token_ids` is held as a
frozenset: it is looked up for every generated token on the engine thread."""

from dataclasses import dataclass, field


@dataclass
class SamplingParams:
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = -1  # -1 or 0 = no top-k
    seed: int | None = None
    max_tokens: int = 16
    min_tokens: int = 0
    stop_token_ids: frozenset[int] = field(
        default_factory=frozenset
    )  # any iterable; kept as a frozenset
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"max_tokens is {self.max_tokens!r}; expected an integer ≥ 1")
        if self.temperature < 0:
            raise ValueError(f"temperature is {self.temperature}; expected ≥ 0 (0 = greedy)")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p is {self.top_p}; expected a value in (0, 1]")
        if not isinstance(self.top_k, int) or self.top_k < -1:
            raise ValueError(f"top_k is {self.top_k!r}; expected -1, 0 (off) or a positive integer")
        if not isinstance(self.min_tokens, int) or not 0 <= self.min_tokens <= self.max_tokens:
            raise ValueError(
                f"min_tokens is {self.min_tokens!r}; expected an integer in [0, max_tokens={self.max_tokens}]"
            )
        self.stop_token_ids = frozenset(self.stop_token_ids)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0
