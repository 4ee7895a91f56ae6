"""Does FP8 KV help? The planner's answer for the spike scenario, and a plausibility check against
MLPerf.

(a) `examples/scenarios/plan-spike-llama-2-7b.yaml` (Llama-2-7B, a 10x spike, 10 s clients) planned
    on A100-80GB with the KV cache in auto (float16), fp8 and int8 at the same batch settings: KV
    blocks per replica (the one memory formula), replicas / GPUs, $/request and P99 TTFT / TPOT
    (simulated; fp8/int8 decode attention derived from the KV bytes read), beside each dtype's
    measured quality (simulator/data/kv_cache_quality.json, from benchmarks/kv_cache_quality.py).
(b) Plausibility: MLPerf Inference v4.1 Llama-2-70B (FP8 TensorRT-LLM, 8 GPUs; figures with their
    sources in simulator/data/mlperf_v41_llama2_70b.csv) has H200 / H100 = 1.28x tokens/s offline
    and 1.35x server. The simulator's ratio: one Llama-2-70B TP8 replica, offline (every request at
    t=0, MLPerf-like OpenOrca lengths: 2,000 requests of ~300 prompt / ~290 output tokens:
    lognormal, medians 220 / 210), output tokens/s on H200-141GB / H100-80GB, in four set-ups:
    the default engine profile (vllm-v1) and calibrations with the KV cache in auto and fp8 (float16
    GEMMs), then the TensorRT-LLM engine profile on aiconfigurator's TRT-LLM kernel calibrations
    with an fp8 KV cache and bf16 or fp8 weights (`model.weight_dtype`: linear layers from the
    fitted fp8 GEMM terms, half the weight bytes): MLPerf's own precision. Absolute figures are not
    MLPerf's (no MLPerf-tuned engine); the ratio is what is compared.

  .venv/bin/python benchmarks/kv_cache_plan.py [--skip-plan] [--skip-mlperf]
Prints the tables and writes benchmarks/results/kv_cache_plan.json.
"""

import argparse
import csv
import json
import sys
import time
from pathlib import Path

# Run as a script (not imported by a test), the repo root, not benchmarks/, goes first on the path.
if not __package__:
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


# MLPerf Inference v4.1, NVIDIA's closed Llama-2-70B configs (configs/llama2-70b/{Offline,Server}
# in mlcommons/inference_results_v4.1): H100-SXM TP2 engines × 4, batch 896 offline / 1024 server;
# H200-SXM TP1 engines × 8, batch 806 offline / 896 server; FP8 weights and KV cache throughout
MLPERF_LAYOUT = {"H100-80GB": (2, 896), "H200-141GB": (1, 806)}
TP8 = {"H100-80GB": (8, 1024), "H200-141GB": (8, 1024)}
TP2 = {"H100-80GB": (2, 896), "H200-141GB": (2, 896)}
# (label, engine profile, weight_dtype, kv_cache_dtype, {GPU: (tensor_parallel, max_num_seqs)})
SETUPS = [
    ("TP8, default profile, fp16 weights, KV auto", None, "auto", "auto", TP8),
    ("TP8, default profile, fp16 weights, KV fp8", None, "auto", "fp8", TP8),
    ("TP2, trtllm, bf16 weights, KV fp8", "trtllm", "auto", "fp8", TP2),
    ("TP2, trtllm, fp8 weights, KV fp8", "trtllm", "fp8", "fp8", TP2),
    ("MLPerf layouts, trtllm, fp8 weights, KV fp8", "trtllm", "fp8", "fp8", MLPERF_LAYOUT),
]
GPUS_PER_SYSTEM = 8


def offline_tokens_per_s(
    gpu: str,
    kv_cache_dtype: str,
    weight_dtype: str = "auto",
    engine_profile: str | None = None,
    tensor_parallel: int = 8,
    max_num_seqs: int = 1024,
) -> dict:
    """One replica of `tensor_parallel` GPUs served offline; its output tokens/s and, per system
    of 8 GPUs, that times the replicas it holds."""
    scenario = Scenario.model_validate(
        {
            "name": f"mlperf-like-{gpu}-tp{tensor_parallel}-{weight_dtype}-{kv_cache_dtype}",
            "seed": 0,
            "engine_profile": engine_profile,
            "model": {"name": "llama-2-70b", "dtype": "float16", "weight_dtype": weight_dtype},
            "hardware": {"gpu": gpu, "tensor_parallel": tensor_parallel},
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
                "max_num_seqs": max_num_seqs,
                "max_num_batched_tokens": 8192,
                "kv_cache_dtype": kv_cache_dtype,
            },
        }
    )
    started = time.process_time()
    result = simulate(scenario)
    summary = result.summary
    replicas = GPUS_PER_SYSTEM // tensor_parallel
    return {
        "gpu": gpu,
        "tensor_parallel": tensor_parallel,
        "max_num_seqs": max_num_seqs,
        "kv_cache_dtype": kv_cache_dtype,
        "weight_dtype": weight_dtype,
        "engine_profile": result.facts["calibration"]["engine_profile"],
        "cpu_s": time.process_time() - started,
        "replica_output_tokens_per_s": summary.output_tokens_per_s,
        "output_tokens_per_s": summary.output_tokens_per_s * replicas,
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
        label: {
            gpu: offline_tokens_per_s(gpu, kv, weights, profile, *layout[gpu])
            for gpu in ("H100-80GB", "H200-141GB")
        }
        for label, profile, weights, kv, layout in SETUPS
    }
    print(
        "\n(b) H200 / H100, Llama-2-70B on 8 GPUs: MLPerf Inference v4.1 (published, FP8 TensorRT-LLM) vs "
        "surgeplan's simulator (offline: one replica simulated, tokens/s × the replicas 8 GPUs hold)"
    )
    print(f"{'source':<52}{'H100 tok/s':>12}{'H200 tok/s':>12}{'H200/H100':>11}")
    for scenario in ("Offline", "Server"):
        print(
            f"{'MLPerf v4.1 ' + scenario + ' (measured)':<52}{published[('H100-80GB', scenario)]:>12,.0f}"
            f"{published[('H200-141GB', scenario)]:>12,.0f}{ratios[scenario]:>11.2f}"
        )
    out = {
        "published": {f"{gpu} {scenario}": value for (gpu, scenario), value in published.items()},
        "published_ratio": ratios,
        "simulated": {},
    }
    for label, pair in simulated.items():
        h100, h200 = pair["H100-80GB"], pair["H200-141GB"]
        ratio = h200["output_tokens_per_s"] / h100["output_tokens_per_s"]
        print(
            f"{'simulated: ' + label:<52}"
            f"{h100['output_tokens_per_s']:>12,.0f}{h200['output_tokens_per_s']:>12,.0f}{ratio:>11.2f}"
            f"   blocks {h100['kv_blocks_per_replica']:,} / {h200['kv_blocks_per_replica']:,}; "
            f"{h100['calibration']} / {h200['calibration']} ({h100['label']} / {h200['label']}); "
            f"{h100['cpu_s'] + h200['cpu_s']:.0f} CPU-s"
        )
        out["simulated"][label] = {"H100-80GB": h100, "H200-141GB": h200, "ratio": ratio}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--skip-plan", action="store_true")
    parser.add_argument("--skip-mlperf", action="store_true")
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    out = ROOT / "benchmarks" / "results" / "kv_cache_plan.json"
    # a skipped part keeps its figures from the last run
    results = json.loads(out.read_text()) if out.exists() else {}
    if not args.skip_plan:
        results["spike_plan"] = spike_plan(args.workers)
    if not args.skip_mlperf:
        results["mlperf"] = mlperf_check()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, default=str) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
