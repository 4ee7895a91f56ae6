"""Does FP8 KV help? The planner's answer for the spike scenario, and a plausibility check against
MLPerf.

(a) `examples/scenarios/plan-spike-llama-2-7b.yaml` (Llama-2-7B, a 10x spike, 10 s clients) planned
on
    A100-80GB with the KV cache in auto (float16), fp8 and int8 at the same batch settings: KV
    blocks
    per replica (the one memory formula), replicas / GPUs, $/request and P99 TTFT / TPOT (simulated;
    fp8/int8 decode attention derived from the KV bytes read), beside each dtype's measured quality
    (simulator/data/kv_cache_quality.json, from benchmarks/kv_cache_quality.py).
(b) Plausibility: MLPerf Inference v4.1 Llama-2-70B (FP8 TensorRT-LLM, 8 GPUs; figures with their
    sources in simulator/data/mlperf_v41_llama2_70b.csv) has H200 / H100 = 1.28x tokens/s offline
    and
    1.35x server. The simulator's ratio: one Llama-2-70B TP8 replica with an fp8 KV cache, offline
    (every request at t=0, MLPerf-like OpenOrca lengths: 2,000 requests of ~300 prompt / ~290 output
    tokens: lognormal, medians 220 / 210), output tokens/s on H200-141GB / H100-80GB. The simulator
    keeps float16 GEMMs (no public
    fp8 GEMM measurement in our calibrations), so its absolute figures are not MLPerf's; the ratio
    is
    what is compared.

  .venv/bin/python benchmarks/kv_cache_plan.py [--skip-plan] [--skip-mlperf]
Prints the tables and writes benchmarks/results/kv_cache_plan.json.
"""

import argparse
import csv
import json
import sys
import time
from pathlib import Path

sys.path[:1] = [str(Path(__file__).resolve().parents[1])]

from simulator import Scenario, simulate  # noqa: E402
from simulator.planner.cli import kv_cache_lines  # noqa: E402
from simulator.planner.recommend import plan  # noqa: E402
from simulator.planner.spec import PlanSettings, load_plan  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPIKE = ROOT / "examples" / "scenarios" / "plan-spike-llama-2-7b.yaml"
MLPERF = ROOT / "simulator" / "data" / "mlperf_v41_llama2_70b.csv"
KV_DTYPES = ["auto", "fp8", "int8"]


def spike_plan(workers: int | None) -> dict:
    scenario, _ = load_plan(SPIKE)
    settings = PlanSettings(
        candidates=[{"gpu": "A100-80GB", "tensor_parallel": 1}],
        max_replicas=32,
        uncertainty=False,
        static_baseline=False,
        autoscaled=False,
        dynamic_batch=False,
        batch={"max_num_seqs": [256], "max_num_batched_tokens": [4096]},
        kv_cache_dtypes=KV_DTYPES,
    )
    started = time.perf_counter()
    report = plan(scenario, settings, workers=workers, progress=False).report
    print(
        f"(a) {scenario.name}: {report.traffic.requests:,} requests, peak "
        f"{report.traffic.peak_rate_per_s:.0f}/s; SLO P99 TTFT ≤ {scenario.slo.ttft_p99_s:g} s, "
        f"TPOT ≤ {scenario.slo.tpot_p99_s:g} s; A100-80GB, max_num_seqs 256, max_num_batched_tokens 4096 "
        f"({time.perf_counter() - started:.0f} s)"
    )
    for line in kv_cache_lines(report.kv_cache_dtypes):
        print(line)
    data = report.to_json()
    return {"kv_cache_dtypes": data["kv_cache_dtypes"], "recommendation": data["recommendation"]}


def offline_tokens_per_s(gpu: str, kv_cache_dtype: str) -> dict:
    scenario = Scenario.model_validate(
        {
            "name": f"mlperf-like-{gpu}-{kv_cache_dtype}",
            "seed": 0,
            "model": {"name": "llama-2-70b", "dtype": "float16"},
            "hardware": {"gpu": gpu, "tensor_parallel": 8},
            "traffic": {
                "arrivals": {"kind": "constant", "rate_per_s": 1e6},
                "duration_s": 2000 / 1e6,
                "prompt": {
                    "kind": "lognormal",
                    "median_tokens": 220,
                    "sigma": 0.8,
                    "max_tokens": 1024,
                },
                "output": {
                    "kind": "lognormal",
                    "median_tokens": 210,
                    "sigma": 0.8,
                    "max_tokens": 1024,
                },
                "too_long": "clip",
            },
            "cluster": {"replicas": 1},
            "scheduler": {
                "max_num_seqs": 1024,
                "max_num_batched_tokens": 8192,
                "kv_cache_dtype": kv_cache_dtype,
            },
        }
    )
    result = simulate(scenario)
    summary = result.summary
    return {
        "gpu": gpu,
        "kv_cache_dtype": kv_cache_dtype,
        "output_tokens_per_s": summary.output_tokens_per_s,
        "kv_blocks_per_replica": result.facts["kv_blocks_per_replica"],
        "calibration": result.facts["calibration"]["name"],
        "label": result.facts["calibration"]["label"],
    }


def mlperf_check() -> dict:
    rows = [
        row for row in csv.DictReader(line for line in MLPERF.open() if not line.startswith("#"))
    ]
    published = {(row["gpu"], row["scenario"]): float(row["tokens_per_s"]) for row in rows}
    ratios = {
        scenario: published[("H200-141GB", scenario)] / published[("H100-80GB", scenario)]
        for scenario in ("Offline", "Server")
    }
    simulated = {
        kv: {gpu: offline_tokens_per_s(gpu, kv) for gpu in ("H100-80GB", "H200-141GB")}
        for kv in ("auto", "fp8")
    }
    print(
        "\n(b) H200 / H100, Llama-2-70B on 8 GPUs: MLPerf Inference v4.1 (published, FP8 TensorRT-LLM) vs "
        "surgeplan's simulator (offline, one TP8 replica)"
    )
    print(f"{'source':<44}{'H100 tok/s':>12}{'H200 tok/s':>12}{'H200/H100':>11}")
    for scenario in ("Offline", "Server"):
        print(
            f"{'MLPerf v4.1 ' + scenario + ' (measured)':<44}{published[('H100-80GB', scenario)]:>12,.0f}"
            f"{published[('H200-141GB', scenario)]:>12,.0f}{ratios[scenario]:>11.2f}"
        )
    out = {
        "published": {f"{gpu} {scenario}": value for (gpu, scenario), value in published.items()},
        "published_ratio": ratios,
        "simulated": {},
    }
    for kv, pair in simulated.items():
        h100, h200 = pair["H100-80GB"], pair["H200-141GB"]
        ratio = h200["output_tokens_per_s"] / h100["output_tokens_per_s"]
        print(
            f"{'simulated, kv_cache_dtype=' + kv + ' (' + h100['label'] + ')':<44}"
            f"{h100['output_tokens_per_s']:>12,.0f}{h200['output_tokens_per_s']:>12,.0f}{ratio:>11.2f}"
            f"   blocks {h100['kv_blocks_per_replica']:,} / {h200['kv_blocks_per_replica']:,}"
        )
        out["simulated"][kv] = {"H100-80GB": h100, "H200-141GB": h200, "ratio": ratio}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--skip-plan", action="store_true")
    parser.add_argument("--skip-mlperf", action="store_true")
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    results = {}
    if not args.skip_plan:
        results["spike_plan"] = spike_plan(args.workers)
    if not args.skip_mlperf:
        results["mlperf"] = mlperf_check()
    out = ROOT / "benchmarks" / "results" / "kv_cache_plan.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, default=str) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
