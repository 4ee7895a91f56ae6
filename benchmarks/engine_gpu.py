"""The engine's forward pass on one GPU against its rooflines (llama-3-8b preset, dummy bf16 weights).

Decode: one step of `batch` sequences at `context` tokens each, timed (do_bench median) through the engine's
model runner, against the memory roofline (weight bytes + KV bytes read) / copy bandwidth measured in the
same run; target (issue 3) within 1.3x for batch ≤ 64. Prefill: one prompt per length, tokens/s and achieved
TFLOP/s against a square bf16 matmul measured in the same run. A last table runs real requests through
`LLMEngine.step()` (the public API) and compares its decode steps with the synthetic forward, which shows
what scheduling and input preparation add.

The synthetic steps build `engine.model.llama.AttentionMetadata` with scrambled block tables over the engine's own
KV pool and call `engine.model_runner.model` directly, so any batch × context fits without prefilling it first.

    python benchmarks/engine_gpu.py [--json out.json]      # on a GPU
    python benchmarks/engine_gpu.py --smoke                # checks the script on a CPU (tiny preset)
"""

import argparse
import math
import statistics
import sys
from pathlib import Path

# The repo root, not benchmarks/, goes first on the path: benchmarks/kernels.py would shadow `kernels`.
# (Only when run as a script: imported by a test, the path stays as pytest set it.)
if not __package__:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import torch  # noqa: E402
from tqdm import tqdm  # noqa: E402

from benchmarks.bench_utils import (  # noqa: E402
    copy_bandwidth_bytes_per_s,
    hardware_header,
    int_list,
    matmul_flops_per_s,
    median_seconds,
    print_header,
    print_table,
    save_json,
)
from engine import LLMEngine, SamplingParams  # noqa: E402
from engine.config import EngineConfig  # noqa: E402
from engine.model.llama import AttentionMetadata  # noqa: E402

DECODE_COLUMNS = [
    "batch",
    "context",
    "step_ms",
    "roofline_ms",
    "x_roofline",
    "target_x",
    "met",
    "kv_GB",
]
PREFILL_COLUMNS = ["prompt", "forward_ms", "tokens_per_s", "TFLOPs", "pct_of_matmul_peak"]
API_COLUMNS = [
    "batch",
    "context",
    "api_step_ms",
    "api_forward_ms",
    "synthetic_forward_ms",
    "api_over_synthetic",
]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default="llama-3-8b", help="preset name or local model directory"
    )
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--batches", type=int_list, default=[1, 8, 32, 64, 128, 256])
    # 8000, not 8192: the engine's max_model_len is the longest length + 1, and Llama-3-8B's positions end
    # at 8192 (the H200 lease of 2026-12-04 stopped on it).
    parser.add_argument("--contexts", type=int_list, default=[1024, 2048, 4096, 8000])
    parser.add_argument("--prompts", type=int_list, default=[512, 1024, 2048, 4096, 8000])
    parser.add_argument(
        "--api-batch", type=int, default=32, help="requests in the public-API check"
    )
    parser.add_argument(
        "--api-prompt", type=int, default=1024, help="prompt tokens per request there"
    )
    parser.add_argument("--api-steps", type=int, default=32, help="decode steps there")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    parser.add_argument("--json", help="also write the tables here")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny preset on the CPU, to check the script itself"
    )
    args = parser.parse_args()
    if args.smoke:
        args.model, args.dtype, args.batches, args.contexts = "tiny", "float32", [1, 4], [40, 100]
        args.prompts, args.api_batch, args.api_prompt, args.api_steps = [32, 64], 2, 20, 4
    return args


def build_engine(args, device: torch.device) -> LLMEngine:
    longest = max(args.contexts + args.prompts + [args.api_prompt + args.api_steps])
    settings = dict(
        model=args.model,
        load_format="dummy",
        dtype=args.dtype,
        device=device.type,
        block_size=args.block_size,
        max_num_seqs=max(args.batches + [args.api_batch]),
        max_num_batched_tokens=max(args.prompts + [args.api_batch]),
        max_model_len=longest + 1,
        gpu_memory_utilization=args.gpu_memory_utilization,
    )
    if device.type != "cuda":
        settings["num_kv_blocks"] = 256
    return LLMEngine(EngineConfig(**settings))


def _to(device, **tensors) -> dict:
    return {name: tensor.to(device) for name, tensor in tensors.items()}


def _empty_tables() -> dict:
    return dict(
        block_tables=torch.zeros(0, 0, dtype=torch.int32),
        context_lens=torch.zeros(0, dtype=torch.int32),
    )


def decode_inputs(engine: LLMEngine, batch: int, context: int, generator: torch.Generator):
    """One decode token per sequence at position context-1 over scrambled pool blocks; None if it does not fit."""
    block_size, pool = engine.cache_config.block_size, engine.cache_config.num_kv_blocks
    blocks_per_seq = math.ceil(context / block_size)
    if batch * blocks_per_seq > pool:
        return None
    tables = (
        torch.randperm(pool, generator=generator)[: batch * blocks_per_seq]
        .view(batch, blocks_per_seq)
        .int()
    )
    last = context - 1
    empty = _empty_tables()
    meta = AttentionMetadata(
        **_to(
            engine.device,
            slot_mapping=tables[:, last // block_size].long() * block_size + last % block_size,
            decode_block_tables=tables,
            decode_context_lens=torch.full((batch,), context, dtype=torch.int32),
            prefill_cu_seqlens=torch.zeros(1, dtype=torch.int32),
            prefill_context_lens=empty["context_lens"],
            prefill_block_tables=empty["block_tables"],
            logits_indices=torch.arange(batch),
        ),
        num_decode_tokens=batch,
    )
    ids = torch.randint(3, engine.model_config.vocab_size, (batch,), generator=generator)
    return ids.to(engine.device), torch.full((batch,), last, device=engine.device), meta


def prefill_inputs(engine: LLMEngine, prompt: int, generator: torch.Generator):
    block_size, pool = engine.cache_config.block_size, engine.cache_config.num_kv_blocks
    blocks = math.ceil(prompt / block_size)
    table = torch.randperm(pool, generator=generator)[:blocks].int()
    positions = torch.arange(prompt)
    empty = _empty_tables()
    meta = AttentionMetadata(
        **_to(
            engine.device,
            slot_mapping=table[positions // block_size].long() * block_size
            + positions % block_size,
            decode_block_tables=empty["block_tables"],
            decode_context_lens=empty["context_lens"],
            prefill_cu_seqlens=torch.tensor([0, prompt], dtype=torch.int32),
            prefill_context_lens=torch.tensor([prompt], dtype=torch.int32),
            prefill_block_tables=table.view(1, -1),
            logits_indices=torch.tensor([prompt - 1]),
        ),
        num_decode_tokens=0,
    )
    ids = torch.randint(3, engine.model_config.vocab_size, (prompt,), generator=generator)
    return ids.to(engine.device), positions.to(engine.device), meta


def forward_seconds(engine: LLMEngine, inputs) -> float:
    runner = engine.model_runner
    return median_seconds(
        lambda: runner.model(*inputs[:2], runner.kv_caches, inputs[2]), engine.device, rep_ms=200
    )


def weight_bytes_read_per_step(engine: LLMEngine) -> int:
    """Every weight is read once per step except the embedding table, of which only the batch's rows are read."""
    return sum(
        p.numel() * p.element_size()
        for name, p in engine.model_runner.model.named_parameters()
        if "embed_tokens" not in name
    )


def kv_bytes_read(engine: LLMEngine, batch: int, context: int) -> int:
    c = engine.model_config
    element_bytes = torch.empty((), dtype=engine.dtype).element_size()
    return 2 * c.num_layers * batch * context * c.num_kv_heads * c.head_dim * element_bytes


def decode_row(engine, batch, context, copy_bps, generator) -> dict | None:
    inputs = decode_inputs(engine, batch, context, generator)
    if inputs is None:
        return None
    step_s = forward_seconds(engine, inputs)
    kv = kv_bytes_read(engine, batch, context)
    roofline_s = (weight_bytes_read_per_step(engine) + kv) / copy_bps
    target = 1.3 if batch <= 64 else None
    ratio = step_s / roofline_s
    return dict(
        batch=batch,
        context=context,
        step_ms=step_s * 1e3,
        roofline_ms=roofline_s * 1e3,
        x_roofline=ratio,
        target_x=target,
        met=None if target is None else ("yes" if ratio <= target else "NO"),
        kv_GB=kv / 1e9,
    )


def prefill_flops(engine: LLMEngine, prompt: int) -> int:
    """2 × linear weights per token (lm_head for the last token only) + causal attention's QK^T and PV."""
    c = engine.model_config
    linear = sum(
        p.numel()
        for name, p in engine.model_runner.model.named_parameters()
        if name.endswith("proj.weight")
    )
    lm_head = c.vocab_size * c.hidden_size
    attention = 4 * c.num_layers * (prompt * (prompt + 1) // 2) * c.num_heads * c.head_dim
    return 2 * linear * prompt + 2 * lm_head + attention


def prefill_row(engine, prompt, matmul_fps, generator) -> dict:
    seconds = forward_seconds(engine, prefill_inputs(engine, prompt, generator))
    flops_per_s = prefill_flops(engine, prompt) / seconds
    return dict(
        prompt=prompt,
        forward_ms=seconds * 1e3,
        tokens_per_s=prompt / seconds,
        TFLOPs=flops_per_s / 1e12,
        pct_of_matmul_peak=100 * flops_per_s / matmul_fps,
    )


def api_row(engine: LLMEngine, args, generator) -> dict:
    """Real requests through LLMEngine.step(); decode-only steps of the full batch are kept."""
    vocab = engine.model_config.vocab_size
    params = SamplingParams(temperature=0, max_tokens=args.api_steps, ignore_eos=True)
    for _ in range(args.api_batch):
        engine.add_request(
            None, torch.randint(3, vocab, (args.api_prompt,), generator=generator).tolist(), params
        )
    totals, forwards = [], []
    while engine.has_unfinished_requests():
        engine.step()
        shape = engine.last_step.shape
        if shape.num_prefill_tokens == 0 and shape.num_decode_seqs == args.api_batch:
            totals.append(engine.last_step.total_s)
            forwards.append(engine.last_step.forward_s)
    context = args.api_prompt + args.api_steps // 2
    synthetic_s = forward_seconds(engine, decode_inputs(engine, args.api_batch, context, generator))
    api_s = statistics.median(totals)
    return dict(
        batch=args.api_batch,
        context=context,
        api_step_ms=api_s * 1e3,
        api_forward_ms=statistics.median(forwards) * 1e3,
        synthetic_forward_ms=synthetic_s * 1e3,
        api_over_synthetic=api_s / synthetic_s,
    )


def main() -> None:
    args = parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type != "cuda" and not args.smoke:
        raise SystemExit(
            "no CUDA device: this benchmark needs a GPU (--smoke checks the script on a CPU)"
        )
    dtype = getattr(torch, args.dtype)
    header = hardware_header(
        device, f"Engine forward vs rooflines ({args.model}, dummy {args.dtype} weights)"
    )
    # Ceilings first, while the memory the engine will claim is still free.
    copy_bps = copy_bandwidth_bytes_per_s(
        device, (1 << 30) if device.type == "cuda" else (64 << 20)
    )
    matmul_fps = matmul_flops_per_s(device, 8192 if device.type == "cuda" else 512, dtype)
    header.update(copy_GBps=round(copy_bps / 1e9, 1), matmul_TFLOPs=round(matmul_fps / 1e12, 1))
    if device.type == "cuda":
        torch.cuda.empty_cache()
    engine = build_engine(args, device)
    header.update(
        kv_pool_blocks=engine.cache_config.num_kv_blocks,
        block_size=engine.cache_config.block_size,
        weight_GB=round(weight_bytes_read_per_step(engine) / 1e9, 2),
    )
    print_header(header)
    generator = torch.Generator().manual_seed(0)

    cells = [(b, c) for b in args.batches for c in args.contexts]
    decode_rows, too_big = [], []
    for batch, context in tqdm(cells, desc="decode", leave=False):
        row = decode_row(engine, batch, context, copy_bps, generator)
        (decode_rows.append(row) if row else too_big.append((batch, context)))
    print_table(
        decode_rows,
        DECODE_COLUMNS,
        "Decode step (model forward) vs (weights + KV read) / copy bandwidth",
    )
    if too_big:
        print(
            f"skipped (KV larger than the pool of {engine.cache_config.num_kv_blocks} blocks): {too_big}\n"
        )
    prompts = tqdm(args.prompts, desc="prefill", leave=False)
    prefill_rows = [prefill_row(engine, prompt, matmul_fps, generator) for prompt in prompts]
    print_table(prefill_rows, PREFILL_COLUMNS, "Prefill, one prompt, vs measured matmul peak")
    api_rows = [api_row(engine, args, generator)]
    print_table(
        api_rows, API_COLUMNS, "Public API: LLMEngine.step() decode steps vs the synthetic forward"
    )
    save_json(
        args.json,
        header,
        {
            "decode": decode_rows,
            "decode_skipped": too_big,
            "prefill": prefill_rows,
            "api": api_rows,
        },
    )


if __name__ == "__main__":
    main()
