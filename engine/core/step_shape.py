"""What one engine step computes, in tokens: the input of the cost model and of the profiler.

The sums the cost model reads several times per step are computed once per shape (cached).
"""
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class StepShape:
    """prefill_chunks: (new tokens, tokens already in the cache before them) per prefilling sequence;
    decode_context_lens: context length (cached tokens + the new one) per decoding sequence."""
    prefill_chunks: tuple[tuple[int, int], ...] = ()
    decode_context_lens: tuple[int, ...] = ()

    @cached_property
    def num_prefill_tokens(self) -> int:
        return sum(new for new, _ in self.prefill_chunks)

    @property
    def num_prefill_seqs(self) -> int:
        return len(self.prefill_chunks)

    @property
    def num_decode_seqs(self) -> int:
        return len(self.decode_context_lens)

    @property
    def num_batched_tokens(self) -> int:
        return self.num_prefill_tokens + self.num_decode_seqs

    @property
    def num_seqs(self) -> int:
        return self.num_prefill_seqs + self.num_decode_seqs

    @cached_property
    def decode_context_tokens(self) -> int:
        return sum(self.decode_context_lens)

    @cached_property
    def prefill_attention_pairs(self) -> int:
        """Query-key pairs of causal attention over the new tokens plus their cached prefix."""
        return sum(new * cached + new * (new + 1) // 2 for new, cached in self.prefill_chunks)

    @property
    def is_empty(self) -> bool:
        return not self.prefill_chunks and not self.decode_context_lens
