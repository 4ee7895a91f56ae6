"""Goodput per GPU, co-located vs disaggregated, in the simulator: the direction and rough size of
DistServe's and Splitwise's results (their published figures: benchmarks/data/disaggregation_published.csv).

Goodput (DistServe's definition): the highest Poisson request rate at which ≥ 90% of requests meet both
their TTFT and their TPOT target (TPOT: a request's own mean time per output token after the first);
per GPU: divided by the layout's GPUs. Found per layout on a fixed fleet (no autoscaler): the rate is
doubled until attainment falls under 90%, then bisected (the same seed at every rate).

Workloads and the layouts each runs on: `benchmarks/disaggregation_workloads.py` (DistServe's
motivating example and its chatbot on ShareGPT lengths, at 13B and 66B class, and at 13B with each
system's own step times from DistServe's artifact, `benchmarks/distserve_steps.py`, where the
attainment at fixed rates per GPU is printed too; ours). Splitwise
(conversation and coding, Llama-2-70B on DGX-A100 / DGX-H100 machines): its designs at iso-cost under
its own slowdown SLOs, throughput against the co-located baseline (`benchmarks/splitwise_anchor.py`
says how; the last table), machines priced at the hardware catalog's list prices or
(`--splitwise-prices splitwise`) at Splitwise's own cost model, which chooses other fleets. Published:
up to 1.4x throughput at 20% lower cost (the best of its models and traces).

Which target binds: each layout is also run at 1.25x its goodput, and the shares of requests within
TTFT alone and within TPOT alone there are printed (DistServe's Fig. 8 draws the same two curves); the
lower one is the target that binds.

The step-cost model is the same for every layout (no interference term: a mixed step's linear layers
cost what its total tokens cost, measured to be sub-additive, see the first table). What makes
co-location lose is scheduling, not a penalty: a prefill step stalls the replica's decodes for its
whole length, and with short answers the stall is a large part of a request's TPOT.

The first table checks that step-cost assumption against measured data: Vidur's A100 operator tables
(../shared/calibration/vidur, Llama-2-7B, TP1) give the linear layers' time at P + D tokens, so the
marginal cost of D decode tokens riding on a P-token prefill, against a D-token decode step's; beside
it the same ratio from the shipped calibration's cost model.

Prints the tables and writes benchmarks/results/disaggregation.json. `--quick`: shorter traffic and
fewer bisection steps (the README's figures).
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

from benchmarks import splitwise_anchor as splitwise  # noqa: E402
from benchmarks.disaggregation_workloads import WORKLOADS  # noqa: E402
from benchmarks.distserve_steps import with_artifact_steps  # noqa: E402
from benchmarks.goodput_search import highest_rate, scenario_for  # noqa: E402
from benchmarks.machine import describe_machine  # noqa: E402
from benchmarks.splitwise_rows import splitwise_rows  # noqa: E402
from engine.core.step_shape import StepShape  # noqa: E402
from simulator import simulate  # noqa: E402
from simulator.calibration.cost_model import CostModel  # noqa: E402
from simulator.calibration.shipped import calibration_for  # noqa: E402
from simulator.calibration.vidur_import import PER_LAYER_OPS as LINEAR_OPS  # noqa: E402
from simulator.planner.split import Layout, layout_scenario  # noqa: E402
from simulator.slo import SLO  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VIDUR_MLP = ROOT.parent / "shared/calibration/vidur/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv"


def mixed_step_check() -> list[dict]:
    """Marginal linear-layer cost of D decodes riding on a P-token prefill, over a D-token step's."""
    with VIDUR_MLP.open() as f:
        rows = {
            int(row["num_tokens"]): sum(float(row[f"time_stats.{op}.median"]) for op in LINEAR_OPS)
            for row in csv.DictReader(f)
            if row["num_tensor_parallel_workers"] == "1"
        }
    model = CostModel.from_calibration(calibration_for("llama-2-7b", "A100-80GB", 1))

    def ours(prefill: int, decodes: int) -> float:
        chunks = ((prefill, 0),) if prefill else ()
        return model.step_time(StepShape(chunks, (1,) * decodes))

    out = []
    for prefill in (512, 1024, 2048):
        for decodes in (32, 64):
            measured = (rows[prefill + decodes] - rows[prefill]) / rows[decodes]
            modelled = (ours(prefill, decodes) - ours(prefill, 0)) / ours(0, decodes)
            out.append(
                {
                    "prefill_tokens": prefill,
                    "decode_tokens": decodes,
                    "measured_marginal_over_alone": round(measured, 3),
                    "model_marginal_over_alone": round(modelled, 3),
                }
            )
    return out


def attainment(
    workload: dict,
    layout: Layout,
    rate: float,
    duration_s: float,
    changes: dict,
    engine: str | None = None,
) -> float:
    return attainments(workload, layout, rate, duration_s, changes, engine)["both"]


def attainments(
    workload: dict,
    layout: Layout,
    rate: float,
    duration_s: float,
    changes: dict,
    engine: str | None = None,
) -> dict[str, float]:
    """Shares of requests within both targets (the summary's `slo_attainment`), TTFT alone, TPOT alone;
    `engine`: timed by that system's steps from DistServe's artifact (`benchmarks/distserve_steps.py`)."""
    scenario = layout_scenario(
        scenario_for(workload, rate, duration_s, changes), layout, workload["link"]
    )
    if engine is not None:
        scenario = with_artifact_steps(scenario, engine)
    result = simulate(scenario)
    slo = SLO(ttft_p99_s=workload["ttft_s"], tpot_p99_s=workload["tpot_s"])
    late = [slo.late(r.ttft_s, r.tpot_s) if r.ok else (True, True) for r in result.records]
    count = max(len(late), 1)
    return {
        "both": result.summary["slo_attainment"],
        "ttft": sum(not ttft for ttft, _ in late) / count,
        "tpot": sum(not tpot for _, tpot in late) / count,
    }


def goodput(
    workload: dict,
    layout: Layout,
    duration_s: float,
    steps: int,
    changes: dict,
    engine: str | None = None,
) -> float:
    """Doubling from the workload's start rate (scaled by the layout's GPUs) to a miss, then bisection."""

    def holds(rate: float) -> bool:
        return attainment(workload, layout, rate, duration_s, changes, engine) >= 0.9

    return highest_rate(holds, workload["start_rps"] * layout.gpus, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="90 s of traffic, 5 bisection steps")
    parser.add_argument("--workload", action="append", help="only these (name prefix); repeat")
    parser.add_argument(
        "--splitwise-budget",
        type=int,
        default=splitwise.BUDGET_H100_MACHINES,
        help="Splitwise: iso-cost budget in DGX-H100 machines (the baseline's fleet)",
    )
    parser.add_argument(
        "--splitwise-design",
        action="append",
        help="Splitwise: only these designs (name prefix, e.g. Splitwise-HA); the baseline always",
    )
    parser.add_argument(
        "--splitwise-step-model",
        action="append",
        choices=["shipped", "roofline", "splitwise-measured", "splitwise-sim"],
        help="Splitwise: step models to run (default: shipped and roofline; splitwise-measured: "
        "Splitwise's own characterization, benchmarks/splitwise_steps.py; splitwise-sim: the same "
        "with token steps as Splitwise's simulator times them); repeat",
    )
    parser.add_argument(
        "--splitwise-prices",
        choices=splitwise.PRICES,
        default="catalog",
        help="Splitwise: price machines at the hardware catalog's list prices or at Splitwise's own "
        "cost model (DGX-H100 2.15x a DGX-A100); chooses the iso-cost designs",
    )
    parser.add_argument(
        "--splitwise-mixed-pool",
        nargs="?",
        type=int,
        const=splitwise.SPLITWISE_QUEUE_TOKENS,
        metavar="TOKENS",
        help="Splitwise: run each split also with Splitwise's mixed pool (cluster.disaggregation."
        "mixed_pool), a queue long past TOKENS pending prompt tokens (default: Splitwise's 8192), "
        "as '<design> + mixed pool'",
    )
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "disaggregation.json")
    )
    args = parser.parse_args()
    steps, duration_s = (5, 90.0) if args.quick else (7, 240.0)
    check = mixed_step_check()
    print(
        "mixed step, linear layers: marginal cost of D decodes on a P-token prefill / a D-token step"
    )
    print("prefill_tokens | decode_tokens | measured (Vidur A100) | model (shipped calibration)")
    for row in check:
        print(" | ".join(str(value) for value in row.values()), flush=True)
    rows = []
    for name, workload in WORKLOADS.items():
        if args.workload and not any(name.startswith(prefix) for prefix in args.workload):
            continue
        base = None
        for layout, schedule, *engine in workload["layouts"]:
            label, changes = schedule or ("", {})
            engine = engine[0] if engine else None  # (layout, schedule[, artifact engine])
            if engine:
                label = ", ".join(filter(None, (label, f"{engine}'s steps (DistServe artifact)")))
            started = time.process_time()
            rate = goodput(workload, layout, duration_s, steps, changes, engine)
            per_gpu = rate / layout.gpus
            past = attainments(workload, layout, 1.25 * rate, duration_s, changes, engine)
            base = per_gpu if base is None else base
            curve = {  # attainment (both targets) at fixed rates per GPU, as DistServe's Fig. 8 draws
                f"{at:g}": round(
                    attainment(workload, layout, at * layout.gpus, duration_s, changes, engine), 3
                )
                for at in workload.get("curve_rates_per_gpu", ())  # (req/s per GPU)
            }
            rows.append(
                {
                    "workload": name,
                    "layout": layout.label + (f", {label}" if label else ""),
                    "gpus": layout.gpus,
                    "goodput_rps": round(rate, 3),
                    "goodput_per_gpu_rps": round(per_gpu, 3),
                    "vs_baseline": round(per_gpu / base, 2) if base else None,
                    "within_ttft_at_1.25x": round(past["ttft"], 3),
                    "within_tpot_at_1.25x": round(past["tpot"], 3),
                    "binds": "TTFT" if past["ttft"] < past["tpot"] else "TPOT",
                    "published": workload["published"],
                    "cpu_s": round(time.process_time() - started, 1),
                }
                | ({"attainment_at_rate_per_gpu": curve} if curve else {})
            )
            print(" | ".join(f"{k}={v}" for k, v in rows[-1].items()), flush=True)
    print(
        f"\n{describe_machine()}; traffic {duration_s:g} s per rate, doubling then {steps} "
        "bisection steps, 90% of requests within both TTFT and TPOT"
    )
    header = ["workload", "layout", "gpus", "goodput_rps", "goodput_per_gpu_rps", "vs_baseline"]
    header += ["within_ttft_at_1.25x", "within_tpot_at_1.25x", "binds"]
    print(" | ".join(header))
    for row in rows:
        print(" | ".join(str(row[column]) for column in header))
    curves = [row for row in rows if "attainment_at_rate_per_gpu" in row]
    if curves:
        rates = list(curves[0]["attainment_at_rate_per_gpu"])
        print("\nattainment (both targets) at a rate per GPU of " + " / ".join(rates) + " req/s")
        for row in curves:
            shares = row["attainment_at_rate_per_gpu"].values()
            print(
                f"{row['workload']} | {row['layout']} | " + " / ".join(f"{a:.1%}" for a in shares)
            )
    designs = ["Baseline-H100"] + args.splitwise_design if args.splitwise_design else None
    split_rows = splitwise_rows(
        duration_s,
        steps,
        args.workload,
        args.splitwise_budget,
        designs,
        tuple(args.splitwise_step_model or ("shipped", "roofline")),
        args.splitwise_prices,
        args.splitwise_mixed_pool,
    )
    if split_rows:
        print(
            f"\nSplitwise: throughput (req/s) under Splitwise's slowdown SLO, iso-cost against "
            f"{args.splitwise_budget} co-located DGX-H100s at {args.splitwise_prices} prices; "
            "published: up to 1.4x throughput at 20% lower cost"
        )
        columns = [
            "workload",
            "step_model",
            "design",
            "cost_per_hour",
            "cost_vs_baseline",
            "throughput_rps",
            "vs_baseline",
            "vs_v0_baseline",
            "per_cost_vs_baseline",
            "binding_at_miss",
        ]
        print(" | ".join(columns))
        for row in split_rows:
            print(" | ".join(str(row[column]) for column in columns))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps(
            {
                "machine": describe_machine(),
                "duration_s": duration_s,
                "steps": steps,
                "mixed_step_check": check,
                "rows": rows,
                "splitwise_rows": split_rows,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
