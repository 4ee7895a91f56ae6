"""aiconfigurator's GEMM tables by collector version: one Llama-3-70B layer's linear time (its four
GEMMs at TP4, fp8 by default) at 8-8,192 tokens, read from each vLLM version's table of a GPU and
divided by the newest version's, the one the shipped `-aic-vllm` calibrations read. The question: do
the older tables time an older, slower kernel era that the replayed stacks (vLLM 0.10.2 in
InferenceMAX's runs) would have run? It also prints each table's bf16 and fp8 rate at 8,192 tokens
against the GPU's catalog peak, a check of the tables themselves. No GPU: reads an aiconfigurator
`systems/data` folder (the installed `aiconfigurator-core`, or a folder laid out like it).

    .venv/bin/python benchmarks/aic_gemm_versions.py --aic-dir DIR [--backends vllm trtllm] \
        [--dtypes fp8 bfloat16] [--json benchmarks/results/aic_gemm_versions.json]
"""

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

# Run as a script, this folder comes first on sys.path, and benchmarks/kernels.py would shadow the
# `kernels` package: put the repository root first instead.
sys.path[:1] = [str(Path(__file__).resolve().parents[1])]

from simulator.calibration import aic_tables  # noqa: E402
from simulator.calibration.aic_fit import layer_gemms  # noqa: E402
from simulator.hardware.catalog import get_hardware  # noqa: E402
from simulator.model_spec import ModelSpec  # noqa: E402

TOKENS = (8, 64, 256, 1024, 2048, 4096, 8192)
SYSTEMS = {"h100_sxm": "H100-80GB", "h200_sxm": "H200-141GB", "b200_sxm": "B200-180GB"}


def layer_seconds(table: aic_tables.GemmTable, gemms: list[tuple[str, int, int]], m: int) -> float:
    """One layer's GEMM time at `m` tokens, each GEMM read from the table (bilinear in n, k)."""
    return sum(table.time_s(m, n, k) for _, n, k in gemms)


def version_ratios(
    tables: dict[str, aic_tables.GemmTable], gemms: list[tuple[str, int, int]], tokens=TOKENS
) -> dict[str, dict[int, float]]:
    """{version: {m: layer time over the newest version's}} for every version whose table covers
    the layer at m (a version missing a row at m is left out at that m)."""
    newest = max(tables, key=aic_tables._version_key)
    ratios: dict[str, dict[int, float]] = {}
    for version, table in tables.items():
        row = {}
        for m in tokens:
            try:
                row[m] = layer_seconds(table, gemms, m) / layer_seconds(tables[newest], gemms, m)
            except ValueError:
                continue
        ratios[version] = row
    return ratios


def peak_share(
    table: aic_tables.GemmTable, gemms: list[tuple[str, int, int]], m: int, peak_flops: float
) -> float:
    """The layer's achieved FLOP rate at `m` tokens over `peak_flops` (above 1: faster than the peak)."""
    flops = sum(2.0 * m * n * k for _, n, k in gemms)
    return flops / layer_seconds(table, gemms, m) / peak_flops


def versions_with(
    root: Path, system: str, backend: str, dtype: str
) -> dict[str, aic_tables.GemmTable]:
    folder = Path(root) / system / "gemm" / backend
    found = {}
    for version in sorted(d.name for d in folder.iterdir() if (d / "gemm_perf.parquet").exists()):
        try:
            found[version] = aic_tables.read_gemm(Path(root), system, backend, version, dtype)
        except ValueError:  # a version without rows of this dtype
            continue
    return found


def report(
    aic_dir: Path, backend: str, dtype: str, gemms: list[tuple[str, int, int]]
) -> list[dict]:
    """Print one backend and dtype's table; its rows as dicts."""
    rows = []
    print(f"\n{backend} tables, {dtype}: each version's layer time over the newest version's")
    print(
        f"{'GPU':12s} {'version':10s} "
        + " ".join(f"{m:>6d}" for m in TOKENS)
        + "   bf16 / fp8 share of peak at 8,192"
    )
    for system, gpu in SYSTEMS.items():
        if not (aic_dir / system / "gemm" / backend).is_dir():
            continue
        tables = versions_with(aic_dir, system, backend, dtype)
        if not tables:
            continue
        ratios = version_ratios(tables, gemms)
        hardware = get_hardware(gpu)
        for version in sorted(tables, key=aic_tables._version_key):
            shares: dict[str, float | None] = {}
            for peak_dtype in ("bfloat16", "fp8"):
                try:
                    table = aic_tables.read_gemm(aic_dir, system, backend, version, peak_dtype)
                    shares[peak_dtype] = peak_share(
                        table, gemms, 8192, hardware.peak_flops(peak_dtype)
                    )
                except ValueError:  # no rows of this dtype in this version
                    shares[peak_dtype] = None
            cells = " ".join(
                f"{ratios[version][m]:6.2f}" if m in ratios[version] else f"{'-':>6s}"
                for m in TOKENS
            )
            share_text = " / ".join("-" if v is None else f"{v:.2f}" for v in shares.values())
            print(f"{gpu:12s} {version:10s} {cells}   {share_text}")
            rows.append(
                {
                    "backend": backend,
                    "dtype": dtype,
                    "gpu": gpu,
                    "version": version,
                    "ratio_to_newest": ratios[version],
                    "peak_share_8192": shares,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--aic-dir", type=Path, required=True, help="aiconfigurator's systems/data folder"
    )
    parser.add_argument("--backends", nargs="+", default=["vllm", "trtllm"])
    parser.add_argument(
        "--dtypes", nargs="+", default=["fp8", "bfloat16"], choices=["fp8", "bfloat16"]
    )
    parser.add_argument("--tensor-parallel", type=int, default=4)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--source",
        default="",
        help="where the folder came from, recorded in the JSON (a commit, a wheel)",
    )
    args = parser.parse_args()

    gemms = layer_gemms(
        ModelSpec.from_preset("llama-3-70b", dtype="bfloat16"), args.tensor_parallel
    )
    print(f"Llama-3-70B, one layer's four GEMMs at TP{args.tensor_parallel}, by collector version")
    rows = [
        row
        for backend in args.backends
        for dtype in args.dtypes
        for row in report(args.aic_dir, backend, dtype, gemms)
    ]
    if args.json:
        out = {
            "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "aic_dir": str(args.aic_dir),
            "source": args.source,
            "model": "llama-3-70b",
            "tensor_parallel": args.tensor_parallel,
            "tokens": list(TOKENS),
            "rows": rows,
        }
        args.json.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
