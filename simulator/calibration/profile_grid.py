"""The grid `surgeplan profile` sweeps: which decode batches, contexts, prefill chunks, cached
prefixes and mixed steps to time, and the engine settings and KV blocks that grid needs. Apart from
the `Profiler` that drives the engine so the grid (pure settings, no torch) can be built and sized
on its own, as the validation and calibration benchmarks do."""

from pydantic import BaseModel, Field

from simulator.calibration.cost_fit import FEW_TOKEN_COUNTS
from simulator.calibration.schema import EngineSettings


class ProfileGrid(BaseModel):
    decode_batches: list[int] = Field(min_length=1)
    decode_contexts: list[int] = Field(min_length=1)
    prefill_chunks: list[int] = Field(min_length=1)
    cached_prefixes: list[int] = [0]
    mixed_batches: list[int] = []
    mixed_chunks: list[int] = []
    repeats: int = Field(default=5, ge=1, description="timed repeats per point in each pass")
    warmup: int = Field(default=1, ge=0)
    # Passes sweep the whole grid again, seconds later: a burst of load on a shared host then
    # cannot slow every repeat of a point, and `min` over the passes finds the quiet time.
    passes: int = Field(default=1, ge=1)
    block_size: int = Field(default=16, ge=1)

    @classmethod
    def quick(cls) -> "ProfileGrid":
        """Small enough for CI on two CPU cores (well under a minute for `cpu-small`)."""
        return cls(
            decode_batches=sorted(set(FEW_TOKEN_COUNTS) | {8, 16}),
            decode_contexts=[32, 80, 128],
            prefill_chunks=[16, 32, 64, 128, 192, 256],
            cached_prefixes=[0, 128],
            mixed_batches=[4],
            mixed_chunks=[32, 128],
            repeats=2,
            warmup=1,
            passes=3,
        )

    @classmethod
    def full(
        cls, max_num_seqs: int = 64, max_num_batched_tokens: int = 1024, max_model_len: int = 2048
    ) -> "ProfileGrid":
        allowed = set(range(1, max_num_seqs + 1))
        # doubling batches up to max_num_seqs; every few-token count besides for the GEMM switch
        coarse = sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, max_num_seqs} & allowed)
        batches = sorted((set(coarse) | set(FEW_TOKEN_COUNTS)) & allowed)
        contexts = [
            c for c in (32, 128, 256, 512, 1024, 2048, 4096, 8192) if c <= max_model_len // 2
        ] or [max_model_len // 4]
        chunks = sorted(
            {
                c
                for c in (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
                if c <= max_num_batched_tokens
            }
            | {max_num_batched_tokens}
        )
        return cls(
            decode_batches=batches,
            decode_contexts=contexts,
            prefill_chunks=chunks,
            cached_prefixes=[0, max(16, max_model_len // 4)],
            mixed_batches=coarse[len(coarse) // 2 :: 2],
            mixed_chunks=chunks[1::2],
            repeats=5,
            warmup=2,
        )

    @property
    def token_budget(self) -> int:
        return max(
            max(self.prefill_chunks), max(self.mixed_batches + [0]) + max(self.mixed_chunks + [0])
        )

    def decode_tokens_needed(self, context: int) -> int:
        """Tokens each long-lived request must be allowed to generate at this context length: the
        early ones decode while the last prompts are still prefilling, then every timed step."""
        prefill_steps = -(-max(self.decode_batches) * context // self.token_budget)
        timed = len(self.decode_batches) * (self.warmup + self.repeats)
        mixed = len(self.mixed_chunks) * self.repeats * len(self.mixed_batches)
        return prefill_steps + timed + mixed + 4

    def engine_settings(self) -> EngineSettings:
        max_model_len = max(
            max(c + self.decode_tokens_needed(c) for c in self.decode_contexts),
            max(self.cached_prefixes) + max(self.prefill_chunks) + 1,
        )
        # one more sequence than the largest batch, so a mixed step's new prompt is never left waiting
        return EngineSettings(
            block_size=self.block_size,
            max_num_seqs=max(self.decode_batches) + 1,
            max_num_batched_tokens=self.token_budget,
            max_model_len=max_model_len,
            enable_prefix_caching=True,
        )

    def num_kv_blocks(self) -> int:
        settings = self.engine_settings()
        decode = max(self.decode_batches) * settings.max_model_len
        prefill = (self.repeats + self.warmup + 2) * (
            max(self.cached_prefixes) + max(self.prefill_chunks)
        )
        return (decode + prefill + max(self.mixed_chunks + [0]) * 2) // self.block_size + 64

    @property
    def num_points(self) -> int:
        decode = len(self.decode_batches) * len(self.decode_contexts)
        mixed = len(self.mixed_batches) * len(self.mixed_chunks) * len(self.decode_contexts)
        return decode + mixed + len(self.prefill_chunks) * len(self.cached_prefixes)
