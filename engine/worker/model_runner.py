"""Executes one scheduled step on the device: builds the flat token batch, runs the model, samples.

Decode tokens (one new token over a cached context) go first in the batch, prefill/extend chunks
after, matching the split in `model.Attention`.
"""

import time
from dataclasses import dataclass

import torch

from engine.core.config import CacheConfig
from engine.core.request import Request
from engine.model.config import ModelConfig
from engine.model.loader import build_model
from engine.worker.inputs import build_inputs
from engine.worker.sampler import Sampler
from kernels.kv_quant import PagedKVCache, allocate_layer


@dataclass(frozen=True)
class ModelRunnerOutput:
    """What one `execute` returns (as vLLM's `execute_model` returns a `ModelRunnerOutput`):
    sampled_token_ids[i] is scheduled[i]'s token, None where it was a mid-prompt chunk."""

    sampled_token_ids: list[int | None]
    prepare_s: float = 0.0
    forward_s: float = 0.0
    sample_s: float = 0.0

    @classmethod
    def empty(cls) -> "ModelRunnerOutput":
        return cls([])


class ModelRunner:
    def __init__(
        self,
        model_config: ModelConfig,
        model: str,
        load_format: str,
        dtype: torch.dtype,
        device: torch.device,
        cache_config: CacheConfig,
        seed: int = 0,
    ):
        self.config = model_config
        self.device = device
        self.dtype = dtype
        self.block_size = cache_config.block_size
        self.kv_cache_dtype = cache_config.kv_cache_dtype
        self.model = build_model(model_config, model, load_format, dtype, device, seed)
        self.kv_caches = self._allocate_kv_cache(cache_config.num_kv_blocks)
        self.sampler = Sampler(frozenset(model_config.eos_token_ids), seed)

    def _allocate_kv_cache(self, num_blocks: int) -> list[PagedKVCache]:
        c = self.config
        return [
            allocate_layer(
                num_blocks,
                self.block_size,
                c.num_kv_heads,
                c.head_dim,
                self.kv_cache_dtype,
                self.dtype,
                self.device,
            )
            for _ in range(c.num_layers)
        ]

    @property
    def kv_cache_bytes(self) -> int:
        """Bytes the pool holds: K and V of every layer, and their scales where quantised."""
        return sum(
            t.numel() * t.element_size() for layer in self.kv_caches for t in layer if t is not None
        )

    def execute(self, scheduled: list[tuple[Request, int]]) -> ModelRunnerOutput:
        """Runs one step; the output holds each scheduled entry's token and where the time went."""
        t0 = time.perf_counter()
        inputs = build_inputs(scheduled, self.block_size, self.device)
        t1 = time.perf_counter()
        logits = self.model(inputs.input_ids, inputs.positions, self.kv_caches, inputs.meta)
        self._synchronize()
        t2 = time.perf_counter()
        producing = [scheduled[i][0] for i in inputs.producing_entries]
        tokens = self.sampler(logits, producing) if producing else []
        t3 = time.perf_counter()
        sampled: list[int | None] = [None] * len(scheduled)
        for entry, token in zip(inputs.producing_entries, tokens):
            sampled[entry] = token
        return ModelRunnerOutput(sampled, prepare_s=t1 - t0, forward_s=t2 - t1, sample_s=t3 - t2)

    def _synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
