"""Paged-attention kernels against the memory roofline on one GPU.

Decode: for Llama-3-8B attention heads (32 query, 8 KV, head_dim 128, bf16, block 16) over a grid of
batch × context, the Triton paged decode kernel is timed (do_bench median) and its bytes moved (K/V read
once, q read, output written, block table read) turned into GB/s and compared with a device-to-device copy
measured in the same run, and with a dense SDPA baseline on contiguous K/V. Each cell also checks the kernel
against SDPA (relative error). Prefill: one prompt of each length through the paged prefill kernel against
causal SDPA, in TFLOP/s.

Targets (issue 3): paged decode ≥ 80% of copy bandwidth at batch × context ≥ 64 × 4096, ≥ 60% at batch 1 with
context ≥ 8k.

    python benchmarks/kernels.py [--json out.json]          # on a GPU
    python benchmarks/kernels.py --smoke                     # checks the script on a CPU (interpreted, tiny)
"""

import argparse
import math
import os
import sys
from pathlib import Path

if (
    "--smoke" in sys.argv
):  # before triton is imported: the smoke run interprets the kernels on the CPU
    os.environ.setdefault("TRITON_INTERPRET", "1")
# The repo root, not benchmarks/, goes first on the path: this file would shadow the `kernels` package.
# (Only when run as a script: imported by a test, the path stays as pytest set it.)
if not __package__:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import torch  # noqa: E402
from tqdm import tqdm  # noqa: E402

from benchmarks.bench_utils import (  # noqa: E402
    copy_bandwidth_bytes_per_s,
    hardware_header,
    int_list,
    median_seconds,
    print_header,
    print_table,
    save_json,
)
from kernels import triton_ops  # noqa: E402

DECODE_COLUMNS = [
    "batch",
    "context",
    "splits",
    "paged_us",
    "paged_GBps",
    "pct_of_copy",
    "target_pct",
    "met",
    "sdpa_us",
    "sdpa_GBps",
    "rel_err_vs_sdpa",
]
PREFILL_COLUMNS = [
    "prompt",
    "paged_ms",
    "paged_TFLOPs",
    "sdpa_ms",
    "sdpa_TFLOPs",
    "rel_err_vs_sdpa",
]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int_list, default=[1, 4, 16, 64, 256])
    parser.add_argument("--contexts", type=int_list, default=[512, 1024, 4096, 8192, 16384, 32768])
    parser.add_argument(
        "--prompts", type=int_list, default=[512, 2048, 8192], help="prefill prompt lengths"
    )
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--dtype", choices=["bfloat16", "float16", "float32"], default="bfloat16")
    parser.add_argument(
        "--max-kv-gib",
        type=float,
        default=20.0,
        help="skip cells whose paged K+V exceed this (the dense copy doubles it)",
    )
    parser.add_argument("--json", help="also write the tables here")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny shapes on the CPU through the Triton interpreter, to check the script itself",
    )
    args = parser.parse_args()
    if args.smoke:
        args.batches, args.contexts, args.prompts = [1, 3], [40, 130], [48]
        args.heads, args.kv_heads, args.head_dim, args.dtype, args.max_kv_gib = (
            4,
            2,
            32,
            "float32",
            1.0,
        )
    return args


def _random_paged_cache(num_seqs: int, context: int, args, device, dtype):
    """K/V for num_seqs sequences of `context` tokens in scrambled blocks -> (k_cache, v_cache, block_tables)."""
    blocks_per_seq = math.ceil(context / args.block_size)
    shape = (num_seqs * blocks_per_seq, args.block_size, args.kv_heads, args.head_dim)
    k_cache = torch.randn(shape, dtype=dtype, device=device)
    v_cache = torch.randn(shape, dtype=dtype, device=device)
    order = torch.randperm(num_seqs * blocks_per_seq, device=device)
    return k_cache, v_cache, order.view(num_seqs, blocks_per_seq).to(torch.int32)


def _dense(cache: torch.Tensor, block_tables: torch.Tensor, context: int) -> torch.Tensor:
    # cache: [N, block_size, Hkv, D] -> contiguous [B, Hkv, context, D] (SDPA's layout)
    gathered = cache[block_tables.long()].flatten(1, 2)[:, :context]  # [B, L, Hkv, D]
    return gathered.permute(0, 2, 1, 3).contiguous()


def _relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref.float()).norm() / ref.float().norm())


def decode_cell(batch: int, context: int, args, device, copy_bps: float) -> dict:
    dtype = getattr(torch, args.dtype)
    element_bytes = torch.empty((), dtype=dtype).element_size()
    group, scale = args.heads // args.kv_heads, args.head_dim**-0.5
    k_cache, v_cache, block_tables = _random_paged_cache(batch, context, args, device, dtype)
    context_lens = torch.full((batch,), context, dtype=torch.int32, device=device)
    q = torch.randn(batch, args.heads, args.head_dim, dtype=dtype, device=device)
    out = torch.empty_like(q)

    def paged():
        return triton_ops.paged_decode_attention(
            q, k_cache, v_cache, block_tables, context_lens, scale, out=out
        )

    paged_s = median_seconds(paged, device)
    # Dense baseline: each KV head's query heads form a length-`group` query, so SDPA needs no GQA expansion.
    k_dense, v_dense = (
        _dense(k_cache, block_tables, context),
        _dense(v_cache, block_tables, context),
    )
    k_cache = v_cache = None  # free the paged cache before the dense baseline runs
    q_dense = q.view(batch, args.kv_heads, group, args.head_dim)
    sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
        q_dense, k_dense, v_dense, scale=scale
    )
    sdpa_s = median_seconds(sdpa, device)

    kv_bytes = 2 * batch * context * args.kv_heads * args.head_dim * element_bytes
    moved_bytes = kv_bytes + 2 * q.numel() * element_bytes + block_tables.numel() * 4
    target = 80 if batch * context >= 64 * 4096 else 60 if batch == 1 and context >= 8192 else None
    pct = 100 * moved_bytes / paged_s / copy_bps
    splits = _splits_used(batch, args, block_tables.shape[1] * args.block_size, device)
    return dict(
        batch=batch,
        context=context,
        splits=splits,
        paged_us=paged_s * 1e6,
        paged_GBps=moved_bytes / paged_s / 1e9,
        pct_of_copy=pct,
        target_pct=target,
        met=None if target is None else ("yes" if pct >= target else "NO"),
        sdpa_us=sdpa_s * 1e6,
        sdpa_GBps=moved_bytes / sdpa_s / 1e9,
        rel_err_vs_sdpa=_relative_error(out, sdpa().reshape(batch, args.heads, args.head_dim)),
    )


def _splits_used(batch: int, args, max_context_tokens: int, device) -> int:
    from kernels.triton_common import num_multiprocessors
    from kernels.triton_decode import choose_num_splits, split_layout

    wanted = choose_num_splits(
        batch, args.kv_heads, max_context_tokens, num_multiprocessors(device)
    )
    return split_layout(max_context_tokens, wanted)[1]


def prefill_cell(prompt: int, args, device) -> dict:
    dtype = getattr(torch, args.dtype)
    group, scale = args.heads // args.kv_heads, args.head_dim**-0.5
    k_cache, v_cache, block_tables = _random_paged_cache(1, prompt, args, device, dtype)
    q = torch.randn(prompt, args.heads, args.head_dim, dtype=dtype, device=device)
    cu_seqlens = torch.tensor([0, prompt], dtype=torch.int32, device=device)
    context_lens = torch.tensor([prompt], dtype=torch.int32, device=device)
    out = torch.empty_like(q)

    def paged():
        return triton_ops.paged_prefill_attention(
            q,
            k_cache,
            v_cache,
            cu_seqlens,
            context_lens,
            block_tables,
            scale,
            max_seqlen_q=prompt,
            out=out,
        )

    paged_s = median_seconds(paged, device)
    # SDPA on K/V repeated to every query head, so its fused (flash) kernels apply.
    k_dense = _dense(k_cache, block_tables, prompt).repeat_interleave(group, dim=1)  # [1, Hq, L, D]
    v_dense = _dense(v_cache, block_tables, prompt).repeat_interleave(group, dim=1)
    q_dense = q.transpose(0, 1).unsqueeze(0)  # [1, Hq, L, D]
    sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
        q_dense, k_dense, v_dense, is_causal=True, scale=scale
    )
    sdpa_s = median_seconds(sdpa, device)
    causal_flops = (
        4 * (prompt * (prompt + 1) // 2) * args.heads * args.head_dim
    )  # QK^T and PV over kept pairs
    return dict(
        prompt=prompt,
        paged_ms=paged_s * 1e3,
        paged_TFLOPs=causal_flops / paged_s / 1e12,
        sdpa_ms=sdpa_s * 1e3,
        sdpa_TFLOPs=causal_flops / sdpa_s / 1e12,
        rel_err_vs_sdpa=_relative_error(out, sdpa()[0].transpose(0, 1)),
    )


def _kv_gib(batch: int, context: int, args) -> float:
    element_bytes = torch.empty((), dtype=getattr(torch, args.dtype)).element_size()
    return 2 * batch * context * args.kv_heads * args.head_dim * element_bytes / 2**30


def main() -> None:
    args = parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type != "cuda" and not args.smoke:
        raise SystemExit(
            "no CUDA device: this benchmark needs a GPU (--smoke checks the script on a CPU)"
        )
    header = hardware_header(device, "Paged attention kernels vs memory roofline")
    header.update(
        heads=args.heads,
        kv_heads=args.kv_heads,
        head_dim=args.head_dim,
        dtype=args.dtype,
        block_size=args.block_size,
    )
    copy_bps = copy_bandwidth_bytes_per_s(
        device, (1 << 30) if device.type == "cuda" else (64 << 20)
    )
    header["copy_GBps"] = round(copy_bps / 1e9, 1)
    print_header(header)

    cells = [(b, c) for b in args.batches for c in args.contexts]
    skipped = [(b, c) for b, c in cells if _kv_gib(b, c, args) > args.max_kv_gib]
    decode_rows = []
    for batch, context in tqdm(
        [cell for cell in cells if cell not in skipped], desc="decode", leave=False
    ):
        decode_rows.append(decode_cell(batch, context, args, device, copy_bps))
        _release(device)
    print_table(
        decode_rows,
        DECODE_COLUMNS,
        f"Paged decode (GB/s over K/V + q + out + block table; copy {copy_bps / 1e9:.0f} GB/s)",
    )
    if skipped:
        print(f"skipped (paged K+V over --max-kv-gib {args.max_kv_gib}): {skipped}\n")
    prefill_rows = []
    for prompt in tqdm(args.prompts, desc="prefill", leave=False):
        prefill_rows.append(prefill_cell(prompt, args, device))
        _release(device)
    print_table(prefill_rows, PREFILL_COLUMNS, "Paged prefill, one prompt (causal attention FLOPs)")
    save_json(
        args.json,
        header,
        {"decode": decode_rows, "decode_skipped": skipped, "prefill": prefill_rows},
    )


def _release(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
