"""Goodput per GPU, co-located vs disaggregated, in the simulator: the direction and rough size of
DistServe's and Splitwise's results (their published figures: benchmarks/data/disaggregation_published.csv).

Goodput (DistServe's definition): the highest Poisson request rate at which ≥ 90% of requests meet both
the TTFT and the TPOT target; per GPU: divided by the GPUs of the layout. Found by bisection on the rate
(the same seed at each rate), for each layout, on a fixed fleet (no autoscaler):

- DistServe-like chatbot: Llama-2-7B on A100-80GB (shipped Vidur-fitted calibration), Azure-conversation
  lengths (ShareGPT-like but longer prompts: DistServe's 0.25 s TTFT would be missed by the longest
  prompts alone, so TTFT ≤ 0.5 s), TPOT ≤ 0.025 s (about twice a decode step at batch 32); co-located
  1 x TP1 against 1P1D and 2P1D over NVLink 3.
- Splitwise-like coding: Llama-2-70B on A100-80GB TP4 (shipped calibration), Azure-code-like
  lengths (long prompts, short outputs: presets azure-code-*), TTFT ≤ 1 s, TPOT ≤ 0.1 s; co-located
  2 x TP4 against 1P1D and 2P1D TP4 over InfiniBand HDR.

Each workload's first row is the papers' co-located baseline (no chunked prefill: a whole prompt in one
step, `vs_baseline` = 1); the second is today's co-located scheduler with small prefill chunks (512-token
steps, Sarathi-Serve's answer to the same interference), which the papers did not compare against.
Disaggregated pools take up to 8192 tokens per step (the prefill pool batches whole prompts).

Prints a table and writes benchmarks/results/disaggregation.json. `--quick`: fewer bisection steps.
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path[:1] = [str(Path(__file__).resolve().parents[1])]

from benchmarks.machine import describe_machine  # noqa: E402
from simulator import Scenario, simulate  # noqa: E402
from simulator.planner.split import Layout, layout_scenario  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# the papers' co-located baseline (vLLM of early 2024): a prompt is prefilled whole in one step, every
# decode of the replica waiting for it; the default co-located run chunks prefills (vLLM v1, Sarathi)
NO_CHUNKS = {"max_num_batched_tokens": 8192, "label": "no chunked prefill (the papers' baseline)"}
CHUNKED = {
    "max_num_batched_tokens": 512,
    "label": "chunked prefill, 512-token steps (Sarathi-Serve)",
}

WORKLOADS = {
    "chatbot (DistServe-like)": dict(
        model="llama-2-7b",
        gpu="A100-80GB",
        prompt="azure-conv-prompt",
        output="azure-conv-output",
        ttft_s=0.5,
        tpot_s=0.025,
        link="nvlink-3",
        batched=8192,
        high_rps=24.0,
        layouts=[
            (Layout("colocated", 0, replicas=1, tensor_parallel=1), NO_CHUNKS),
            (Layout("colocated", 0, replicas=1, tensor_parallel=1), CHUNKED),
            (
                Layout(
                    "disaggregated",
                    0,
                    prefill_replicas=1,
                    decode_replicas=1,
                    prefill_tensor_parallel=1,
                    decode_tensor_parallel=1,
                ),
                None,
            ),
            (
                Layout(
                    "disaggregated",
                    0,
                    prefill_replicas=2,
                    decode_replicas=1,
                    prefill_tensor_parallel=1,
                    decode_tensor_parallel=1,
                ),
                None,
            ),
        ],
    ),
    "coding (Splitwise-like)": dict(
        model="llama-2-70b",
        gpu="A100-80GB",
        prompt="azure-code-prompt",
        output="azure-code-output",
        ttft_s=1.0,
        tpot_s=0.1,
        link="infiniband-hdr",
        batched=8192,
        high_rps=30.0,
        layouts=[
            (Layout("colocated", 0, replicas=2, tensor_parallel=4), NO_CHUNKS),
            (Layout("colocated", 0, replicas=2, tensor_parallel=4), CHUNKED),
            (
                Layout(
                    "disaggregated",
                    0,
                    prefill_replicas=1,
                    decode_replicas=1,
                    prefill_tensor_parallel=4,
                    decode_tensor_parallel=4,
                ),
                None,
            ),
            (
                Layout(
                    "disaggregated",
                    0,
                    prefill_replicas=2,
                    decode_replicas=1,
                    prefill_tensor_parallel=4,
                    decode_tensor_parallel=4,
                ),
                None,
            ),
        ],
    ),
}


def scenario_for(
    workload: dict, rate: float, duration_s: float, batched: int | None = None
) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "goodput",
            "seed": 0,
            "traffic": {
                "arrivals": {"kind": "poisson", "rate_per_s": rate},
                "duration_s": duration_s,
                "prompt": {"kind": "preset", "name": workload["prompt"]},
                "output": {"kind": "preset", "name": workload["output"]},
                "too_long": "clip",
            },
            "model": {"name": workload["model"]},
            "hardware": {"gpu": workload["gpu"]},
            "scheduler": {
                "max_num_seqs": 256,
                "max_num_batched_tokens": batched or workload["batched"],
                "max_model_len": 4096,
            },
            "slo": {"ttft_p99_s": workload["ttft_s"], "tpot_p99_s": workload["tpot_s"]},
        }
    )


def attainment(
    workload: dict, layout: Layout, rate: float, duration_s: float, batched: int | None
) -> float:
    scenario = layout_scenario(
        scenario_for(workload, rate, duration_s, batched), layout, workload["link"]
    )
    return simulate(scenario).summary["slo_attainment"]


def goodput(
    workload: dict, layout: Layout, duration_s: float, steps: int, batched: int | None
) -> float:
    low, high = 0.0, workload["high_rps"]
    for _ in range(steps):
        mid = (low + high) / 2
        if attainment(workload, layout, mid, duration_s, batched) >= 0.9:
            low = mid
        else:
            high = mid
    return low


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="7 bisection steps, 120 s of traffic")
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "disaggregation.json")
    )
    args = parser.parse_args()
    steps, duration_s = (7, 120.0) if args.quick else (9, 300.0)
    rows = []
    for name, workload in WORKLOADS.items():
        base = None
        for layout, changes in workload["layouts"]:
            started = time.process_time()
            rate = goodput(
                workload, layout, duration_s, steps, changes and changes["max_num_batched_tokens"]
            )
            per_gpu = rate / layout.gpus
            base = per_gpu if base is None else base
            label = layout.label + (f", {changes['label']}" if changes else "")
            rows.append(
                {
                    "workload": name,
                    "layout": label,
                    "gpus": layout.gpus,
                    "goodput_rps": round(rate, 3),
                    "goodput_per_gpu_rps": round(per_gpu, 3),
                    "vs_baseline": round(per_gpu / base, 2) if base else None,
                    "cpu_s": round(time.process_time() - started, 1),
                }
            )
            print(" | ".join(f"{k}={v}" for k, v in rows[-1].items()), flush=True)
    print(
        f"\n{describe_machine()}; traffic {duration_s:g} s per rate, {steps} bisection steps, 90% SLO attainment"
    )
    header = [
        "workload",
        "layout",
        "gpus",
        "goodput_rps",
        "goodput_per_gpu_rps",
        "vs_baseline",
        "cpu_s",
    ]
    print(" | ".join(header))
    for row in rows:
        print(" | ".join(str(row[column]) for column in header))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps(
            {"machine": describe_machine(), "duration_s": duration_s, "steps": steps, "rows": rows},
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
