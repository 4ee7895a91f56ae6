"""What one engine step computes, in tokens: the input of the cost model and of the profiler.

The sums the cost model reads on every simulated step are computed once, when the shape is made (plain
attributes: a read costs no descriptor call), so the cost model's per-step path is a few attribute reads.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING


@dataclass(frozen=True)
class StepShape:
    """prefill_chunks: (new tokens, tokens already in the cache before them) per prefilling sequence;
    decode_context_lens: context length (cached tokens + the new one) per decoding sequence.

    Derived on creation (not fields: equality, hashing and repr see only the two above):
    num_prefill_tokens, num_prefill_seqs, num_decode_seqs, num_batched_tokens, num_seqs,
    decode_context_tokens, prefill_attention_pairs (query-key pairs of causal attention over the new
    tokens plus their cached prefix)."""

    prefill_chunks: tuple[tuple[int, int], ...] = ()
    decode_context_lens: tuple[int, ...] = ()

    if (
        TYPE_CHECKING
    ):  # set in `__post_init__` (instance attributes, not fields); declared for the type checker

        @property
        def num_prefill_tokens(self) -> int: ...
        @property
        def num_prefill_seqs(self) -> int: ...
        @property
        def num_decode_seqs(self) -> int: ...
        @property
        def num_batched_tokens(self) -> int: ...
        @property
        def num_seqs(self) -> int: ...
        @property
        def decode_context_tokens(self) -> int: ...
        @property
        def prefill_attention_pairs(self) -> int: ...

    def __post_init__(self) -> None:
        chunks, decode = self.prefill_chunks, self.decode_context_lens
        num_prefill = pairs = 0
        for new, cached in chunks:
            num_prefill += new
            pairs += new * cached + new * (new + 1) // 2
        derived = self.__dict__  # frozen: set the derived counts past __setattr__
        derived["num_prefill_tokens"] = num_prefill
        derived["num_prefill_seqs"] = len(chunks)
        derived["num_decode_seqs"] = len(decode)
        derived["num_batched_tokens"] = num_prefill + len(decode)
        derived["num_seqs"] = len(chunks) + len(decode)
        derived["decode_context_tokens"] = sum(decode)
        derived["prefill_attention_pairs"] = pairs

    @property
    def is_empty(self) -> bool:
        return not self.prefill_chunks and not self.decode_context_lens


class DecodeCounts:
    """The counts the cost model reads of a pure decode step's shape with every context `k` tokens
    longer: what `StepShape((), lens + k)` would derive, without building the tuple of contexts (a
    decode stretch's slope is read at k = 1, and a stretch continued past an arrival starts at k > 0)."""

    __slots__ = (
        "num_prefill_tokens",
        "num_prefill_seqs",
        "num_decode_seqs",
        "num_batched_tokens",
        "num_seqs",
        "decode_context_tokens",
        "prefill_attention_pairs",
    )
    prefill_chunks: tuple[tuple[int, int], ...] = ()
    is_empty = False

    def __init__(self, shape: "StepShape | DecodeCounts", k: int):
        assert not shape.prefill_chunks and shape.num_decode_seqs, f"not a decode step: {shape}"
        num_decode = shape.num_decode_seqs
        self.num_prefill_tokens = self.num_prefill_seqs = self.prefill_attention_pairs = 0
        self.num_decode_seqs = self.num_batched_tokens = self.num_seqs = num_decode
        self.decode_context_tokens = shape.decode_context_tokens + k * num_decode
