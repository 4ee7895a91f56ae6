"""CUDA graphs for decode-only steps: one replay launches the step's kernels instead of Python.

Why: on a GPU our eager engine's step time was the host launching each layer's kernels from Python
(27-54 ms a decode step on the H200 whatever its batch or context, docs/measured/engine-on-gpu.md),
and the host's speed drifted 1.2x within minutes, so a calibration measured before a run did not
hold during it. vLLM and nano-vllm capture decode steps in CUDA graphs for this reason (vLLM's
`FULL_DECODE_ONLY` mode); this does the same:

- one graph per batch size of `capture_sizes` (1, 2, 4, 8, then every 8 up to max_num_seqs, as
  vLLM's default sizes), captured largest first so the smaller ones share its memory pool;
- static input buffers sized for the largest: a step of n decodes is copied into the smallest size
  b ≥ n, rows n..b padded as no-ops (slot -1: no KV write; a one-token context; logits dropped);
- block tables as wide as max_model_len needs, so every decode step fits a graph; the decode
  kernel's split count is then fixed per size by that width (splits past a context exit at once).

Steps with a prefill chunk, batches over the largest size and quantised KV caches (their scale
updates read values on the host) run eagerly. `capture=False` runs the same padded buffers eagerly:
that is how the padding is tested on the CPU, where there are no graphs.
"""

import torch

from engine.model.llama import AttentionMetadata
from engine.worker.inputs import StepInputs
from kernels.kv_quant import PagedKVCache


def capture_sizes(max_num_seqs: int) -> list[int]:
    """Batch sizes that get a graph, ascending: 1, 2, 4, 8, 16, 24, ... up to max_num_seqs."""
    if max_num_seqs < 1:
        raise ValueError(f"max_num_seqs is {max_num_seqs}; expected ≥ 1")
    sizes = [s for s in (1, 2, 4) if s < max_num_seqs] + list(range(8, max_num_seqs, 8))
    return sizes + [max_num_seqs]


def graphs_supported(device: torch.device, kv_caches: list[PagedKVCache]) -> bool:
    """Graphs run on CUDA over a cache in the model's dtype (no fp8 / int8 scales)."""
    return device.type == "cuda" and all(layer[2] is None for layer in kv_caches)


class DecodeGraphs:
    """The decode step of every size in `capture_sizes(max_num_seqs)`, over static buffers."""

    def __init__(
        self,
        model: torch.nn.Module,
        kv_caches: list[PagedKVCache],
        *,
        max_num_seqs: int,
        max_model_len: int,
        device: torch.device,
        capture: bool,
    ):
        if max_model_len < 1:
            raise ValueError(f"max_model_len is {max_model_len}; expected ≥ 1 token")
        block_size = kv_caches[0][0].shape[1]  # k_cache: [num_blocks, block_size, Hkv, D]
        max_blocks_per_seq = -(-max_model_len // block_size)
        self.model, self.kv_caches, self.device = model, kv_caches, device
        self.sizes = capture_sizes(max_num_seqs)
        largest = self.sizes[-1]

        def buffer(shape, fill, dtype):
            return torch.full(shape, fill, dtype=dtype, device=device)

        # input_ids, positions, slot_mapping, context_lens: [largest]; block_tables: [largest, W]
        self.input_ids = buffer((largest,), 0, torch.int64)
        self.positions = buffer((largest,), 0, torch.int64)
        self.slot_mapping = buffer((largest,), -1, torch.int64)
        self.context_lens = buffer((largest,), 1, torch.int32)
        self.block_tables = buffer((largest, max_blocks_per_seq), 0, torch.int32)
        self.logits_indices = torch.arange(largest, device=device)
        self._no_prefill = dict(
            prefill_cu_seqlens=buffer((1,), 0, torch.int32),
            prefill_context_lens=buffer((0,), 0, torch.int32),
            prefill_block_tables=buffer((0, 0), 0, torch.int32),
        )
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.logits: dict[int, torch.Tensor] = {}  # [size, vocab] float32, written by each replay
        if capture:
            self._capture_all()

    def _forward(self, size: int) -> torch.Tensor:
        meta = AttentionMetadata(
            slot_mapping=self.slot_mapping[:size],
            num_decode_tokens=size,
            decode_block_tables=self.block_tables[:size],
            decode_context_lens=self.context_lens[:size],
            logits_indices=self.logits_indices[:size],
            **self._no_prefill,
        )
        return self.model(self.input_ids[:size], self.positions[:size], self.kv_caches, meta)

    def _capture_all(self) -> None:
        pool = None
        for size in reversed(self.sizes):  # the largest first: the others reuse its memory
            self._forward(size)  # compiles the kernels for this shape; slots are -1: no KV write
            torch.cuda.synchronize(self.device)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                self.logits[size] = self._forward(size)
            pool = graph.pool() if pool is None else pool
            self.graphs[size] = graph
        torch.cuda.synchronize(self.device)

    def replay_error(self, size: int, generator: torch.Generator) -> float:
        """‖replay − eager‖ / ‖eager‖ of the size's logits on random tokens and positions (slots -1:
        nothing is written): the check that the captured graph computes the eager forward."""
        vocab, positions = self.model.config.vocab_size, self.model.rope_cos.shape[0]
        self.input_ids[:size].copy_(torch.randint(vocab, (size,), generator=generator))
        self.positions[:size].copy_(torch.randint(positions, (size,), generator=generator))
        self.slot_mapping[:size].fill_(-1)
        self.context_lens[:size].fill_(1)
        eager = self._forward(size).clone()
        self.graphs[size].replay()
        replayed = self.logits[size]
        return float((replayed - eager).norm() / eager.norm().clamp_min(1e-30))

    def size_for(self, num_seqs: int) -> int | None:
        """The smallest size ≥ num_seqs, or None if the batch is larger than every graph."""
        return next((s for s in self.sizes if s >= num_seqs), None)

    def run(self, inputs: StepInputs) -> torch.Tensor | None:
        """Logits [n, vocab] float32 of a step of n decodes; None if the step is not one (run it eagerly)."""
        meta, n = inputs.meta, inputs.input_ids.shape[0]
        width = meta.decode_block_tables.shape[1] if n else 0
        size = self.size_for(n)
        if n == 0 or meta.num_decode_tokens != n or size is None:
            return None
        if width > self.block_tables.shape[1]:
            raise ValueError(
                f"a decode step's block table is {width} blocks wide; the graphs hold "
                f"{self.block_tables.shape[1]} (max_model_len / block_size)"
            )
        assert meta.logits_indices.shape == (n,), "every decode produces a token"
        self.input_ids[:n].copy_(inputs.input_ids, non_blocking=True)
        self.positions[:n].copy_(inputs.positions, non_blocking=True)
        self.slot_mapping[:n].copy_(meta.slot_mapping, non_blocking=True)
        self.context_lens[:n].copy_(meta.decode_context_lens, non_blocking=True)
        self.block_tables[:n, :width].copy_(meta.decode_block_tables, non_blocking=True)
        # padding rows: no KV write, a one-token context; their ids, positions and table columns
        # past `width` keep older values, which are valid indices (zeros at first)
        self.slot_mapping[n:size].fill_(-1)
        self.context_lens[n:size].fill_(1)
        if size in self.graphs:
            self.graphs[size].replay()
            return self.logits[size][:n]
        return self._forward(size)[:n]
