"""A small aiconfigurator database of our own, in its layout and columns (systems/data/h200_sxm/
{gemm,attention,comm}/vllm/<version>/*.parquet), with times from known kernel models that an H200
could run (`plausibility`), so a fit on it must give them back; shared by the importer's tests."""

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

# Known kernel models of the fixture database (seconds), within what an H200 can do
# (`plausibility`): weights read at 68% of its HBM peak, the KV cache at 85%
GEMM_FIXED_S, GEMM_PEAK, GEMM_KNEE = 5e-6, 200e12, 61  # 61: a point of the knee grid searched
DECODE = (10e-6, 0.2e-6, 1e-9)  # floor, per sequence, per context token (per layer)
DECODE_FP8 = (8e-6, 0.05e-6, 0.5e-9)  # an fp8-KV kernel: less work per sequence, half the bytes
PREFILL = (8e-6, 1e-9, 2e-11)  # floor, per token, per causal pair (per layer)
REDUCE = (6e-6, 1e-12)  # latency, per element


def gemm_s(m: float, n: float, k: float) -> float:
    return GEMM_FIXED_S + 2 * max(m, GEMM_KNEE) * n * k / GEMM_PEAK


def _write(path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def _attention_rows(
    op: str, heads: int, kv_heads: int, batches, lengths, seconds, fp8_seconds=None
) -> list[dict]:
    base = {
        "framework": "VLLM",
        "version": "0.24.0",
        "device": "NVIDIA H200",
        "op_name": op,
        "kernel_source": "fixture",
        "num_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": 128,
        "beam_width": 1,
        "attn_dtype": "bfloat16",
        "window_size": 0,
    }
    rows = []
    for batch in batches:
        for length in lengths:
            step = (
                {"isl": 1, "step": length - 1}
                if op == "generation_attention"
                else {"isl": length, "step": 0}
            )
            # fp8-KV rows are left out of the bf16 fit (twice as fast here, or another decode
            # model: `fp8_seconds`) and fitted on their own
            for kv_dtype in ("bfloat16", "fp8"):
                latency = (
                    seconds(batch, length)
                    if kv_dtype == "bfloat16"
                    else fp8_seconds(batch, length)
                    if fp8_seconds
                    else 0.5 * seconds(batch, length)
                )
                rows.append(
                    {
                        **base,
                        **step,
                        "batch_size": batch,
                        "kv_cache_dtype": kv_dtype,
                        "latency": latency * 1e3,
                    }
                )
    return rows


def write_fixture_db(root):
    """systems/data/h200_sxm/{gemm,attention,comm}/vllm/<version>/*.parquet, known times (ms)."""
    ms = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
    grid = [1024, 4096, 8192, 16384, 32768]
    gemm = [
        {
            "framework": "VLLM",
            "version": "0.24.0",
            "device": "NVIDIA H200",
            "op_name": "gemm",
            "kernel_source": "torch.nn.functional.linear",
            "gemm_dtype": dtype,
            "m": m,
            "n": n,
            "k": k,
            "latency": gemm_s(m, n, k) * 1e3 * (1 if dtype == "bfloat16" else 0.5),
        }
        for m in ms
        for n in grid
        for k in grid[:4]
        for dtype in ("bfloat16", "fp8")
    ]
    _write(root / "h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet", gemm)
    _write(
        root / "h200_sxm/gemm/vllm/0.9.0/gemm_perf.parquet",
        [{**row, "latency": 1.0} for row in gemm[:50]],
    )
    decode = _attention_rows(
        "generation_attention",
        32,
        8,
        [1, 4, 16, 64, 256],
        [64, 512, 2048, 8192],
        lambda b, c: DECODE[0] + DECODE[1] * b + DECODE[2] * b * c,
        lambda b, c: DECODE_FP8[0] + DECODE_FP8[1] * b + DECODE_FP8[2] * b * c,
    )
    prefill = _attention_rows(
        "context_attention",
        32,
        8,
        [1, 2, 8],
        [16, 128, 1024, 4096],
        lambda b, s: PREFILL[0] + PREFILL[1] * b * s + PREFILL[2] * b * s * (s + 1) / 2,
    )
    _write(root / "h200_sxm/attention/vllm/0.24.0/generation_attention_perf.parquet", decode)
    _write(root / "h200_sxm/attention/vllm/0.24.0/context_attention_perf.parquet", prefill)
    reduce = [
        {
            "framework": "vLLM",
            "version": "0.24.0",
            "device": "NVIDIA H200",
            "op_name": "all_reduce",
            "kernel_source": kernel,
            "allreduce_dtype": "bfloat16",
            "num_gpus": gpus,
            "message_size": size,
            "latency": (REDUCE[0] + REDUCE[1] * size)
            * 1e3
            * (1 if kernel.endswith("graph") else 3),
            "backend": "vllm",
        }
        for kernel in ("vLLM_custom_graph", "vLLM_custom_eager")
        for gpus in (2, 4)
        for size in [2**p for p in range(10, 27)]
    ]
    _write(root / "h200_sxm/comm/vllm/0.24.0/custom_allreduce_perf.parquet", reduce)
    return root
