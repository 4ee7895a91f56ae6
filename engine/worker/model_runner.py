"""Executes one scheduled step on the device: builds the flat token batch, runs the model, samples.

Decode tokens (one new token over a cached context) go first in the batch, prefill/extend chunks
after, matching the split in `model.Attention`. On CUDA a step of decodes alone replays a captured
CUDA graph (`cuda_graphs.DecodeGraphs`) unless `enforce_eager`; every other step runs eagerly.
"""

import logging
import time
from dataclasses import dataclass

import torch

from engine.core.config import CacheConfig
from engine.core.request import Request
from engine.model.config import ModelConfig
from engine.model.loader import build_model
from engine.worker.cuda_graphs import DecodeGraphs, graphs_supported
from engine.worker.inputs import build_inputs
from engine.worker.sampler import Sampler
from kernels.kv_quant import PagedKVCache, allocate_layer

log = logging.getLogger("surgeplan.engine")
GRAPH_REL_ERR_LIMIT = 2e-2  # bf16 logits of two launch orders differ by ~1e-3; a wrong graph by ~1


@dataclass(frozen=True)
class ModelRunnerOutput:
    """What one `execute` returns (as vLLM's `execute_model` returns a `ModelRunnerOutput`):
    sampled_token_ids[i] is scheduled[i]'s token, None where it was a mid-prompt chunk."""

    sampled_token_ids: list[int | None]
    prepare_s: float = 0.0
    forward_s: float = 0.0
    sample_s: float = 0.0
    cuda_graph: bool = False  # the forward was a graph replay

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
        *,
        max_num_seqs: int = 1,
        max_model_len: int = 1,
        enforce_eager: bool = True,
    ):
        self.config = model_config
        self.device = device
        self.dtype = dtype
        self.block_size = cache_config.block_size
        self.kv_cache_dtype = cache_config.kv_cache_dtype
        self.model = build_model(model_config, model, load_format, dtype, device, seed)
        self.kv_caches = self._allocate_kv_cache(cache_config.num_kv_blocks)
        self.sampler = Sampler(frozenset(model_config.eos_token_ids), seed)
        self.decode_graphs = None
        if not enforce_eager and graphs_supported(device, self.kv_caches):
            self.decode_graphs = self._capture(max_num_seqs, max_model_len)

    def _capture(self, max_num_seqs: int, max_model_len: int) -> DecodeGraphs | None:
        """The decode graphs; None (every step eager, said in the log) if capture fails."""
        start = time.perf_counter()
        try:
            graphs = DecodeGraphs(
                self.model,
                self.kv_caches,
                max_num_seqs=max_num_seqs,
                max_model_len=max_model_len,
                device=self.device,
                capture=True,
            )
        except Exception as error:  # noqa: BLE001 (any failure: the engine still runs, eagerly)
            torch.cuda.synchronize(self.device)
            log.warning("CUDA graph capture failed, every step runs eagerly: %s", error)
            return None
        return self._checked(graphs, start)

    def _checked(self, graphs: DecodeGraphs, start: float) -> DecodeGraphs | None:
        """The graphs if the smallest and largest replay the eager forward (bf16 rounding aside)."""
        generator = torch.Generator().manual_seed(0)
        errors = {size: graphs.replay_error(size, generator) for size in {1, graphs.sizes[-1]}}
        if not all(error <= GRAPH_REL_ERR_LIMIT for error in errors.values()):
            log.warning(
                "CUDA graph replays differ from the eager forward (relative error by batch %s, "
                "limit %g); every step runs eagerly",
                errors,
                GRAPH_REL_ERR_LIMIT,
            )
            return None
        log.info(
            "captured %d decode CUDA graphs (batch %s) in %.1f s; replay vs eager ≤ %.1e",
            len(graphs.sizes),
            ", ".join(map(str, graphs.sizes)),
            time.perf_counter() - start,
            max(errors.values()),
        )
        return graphs

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
        logits = self.decode_graphs.run(inputs) if self.decode_graphs is not None else None
        graph = logits is not None
        if not graph:
            logits = self.model(inputs.input_ids, inputs.positions, self.kv_caches, inputs.meta)
        self._synchronize()
        t2 = time.perf_counter()
        producing = [scheduled[i][0] for i in inputs.producing_entries]
        tokens = self.sampler(logits, producing) if producing else []
        t3 = time.perf_counter()
        sampled: list[int | None] = [None] * len(scheduled)
        for entry, token in zip(inputs.producing_entries, tokens):
            sampled[entry] = token
        return ModelRunnerOutput(
            sampled, prepare_s=t1 - t0, forward_s=t2 - t1, sample_s=t3 - t2, cuda_graph=graph
        )

    def _synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
