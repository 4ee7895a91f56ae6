"""Where aiconfigurator's closed-loop vLLM V1 first tokens go missing: each run of
`aic-silicon-vllm-v1-hopper` (held out; Llama-3.1-70B fp8, TP4 / TP8, H100 / H200, 4-64 requests in
flight) replayed as `surgeplan validate --published` does, with the simulated steps around each
measured request: the wait from its send to its first scheduled step, the step running when it
arrives, the number of steps its prefill takes, how many prefills share its last prefill step, and the
gap's size per request in flight and per prefill step (gap / (N x the simulated prefill span)).

Then what each candidate mechanism would change, measured in the simulator (what-ifs, nothing fitted,
nothing shipped): (a)/(d) the first token one engine step later (V1's output path, or async
scheduling admitting a request one step later: in this closed loop both add the step after the
request's own), and (c) aiperf's profiling phase as its source runs it (`aiperf/timing/
credit_issuing_strategy.py`: the phase starts after every warm-up request has returned, and the
concurrency-burst mode drops all N credits at once), i.e. 20 N requests sent at t = 0 into an idle
engine (aiconfigurator's `bench_run.sh.j2` at 095f58a: `--num-requests 20 N`), with no client
latency, so the first turn's groups never break up; and its first turn alone in lock step, the other
19 desynchronised (the staggered replay), a lower bound of the lock-step start's share. Diagnosis only.
No GPU.

    .venv/bin/python benchmarks/v1_ttft_closed_loop.py [--turns 20] [--json FILE]
"""

import argparse
import copy
import datetime as dt
import json
import math
import sys
from pathlib import Path

import numpy as np

# Run as a script, this folder comes first on sys.path, and benchmarks/kernels.py would shadow the
# `kernels` package: put the repository root first instead.
sys.path[:1] = [str(Path(__file__).resolve().parents[1])]

from simulator.simulation import build_cluster  # noqa: E402
from simulator.validation.published_replay import (  # noqa: E402
    replay_inputs,
    replay_records,
    source_profile,
)
from simulator.validation.published_sets import load_published  # noqa: E402

SET_NAME = "aic-silicon-vllm-v1-hopper"


def steps_around(data: dict, run: dict, profile) -> dict:
    """The staggered replay's measured requests with the steps around each (means over them)."""
    scenario, trace, own, n, _start_s = replay_inputs(data, run, profile)
    cluster, _facts = build_cluster(scenario, trace, profile=own)
    replica = cluster.replicas[0]
    replica.step_shapes = []  # every step's shape, stretches included
    cluster.run()
    times_s = np.array([replica.cost_model.step_time(shape) for shape in replica.step_shapes])
    ends_s = np.cumsum(times_s)  # a closed loop never idles mid-run
    prefills = np.array([shape.num_prefill_seqs for shape in replica.step_shapes])
    rows = []
    for record in cluster.records[-n:]:
        first_token_s = record.arrival_s + record.ttft_s
        scheduled_s = record.arrival_s + record.queue_s
        last = int(np.searchsorted(ends_s, first_token_s - 1e-9))
        first = int(np.searchsorted(ends_s - times_s, scheduled_s - 1e-9))
        running = int(np.searchsorted(ends_s, record.arrival_s + 1e-12))
        rows.append(
            (
                record.ttft_s,
                record.queue_s,
                first_token_s - scheduled_s,
                last - first + 1,
                prefills[last],
                prefills[running] > 0,
                times_s[last + 1] if last + 1 < len(times_s) else 0.0,
            )
        )
    ttft, wait, span, num_steps, share, in_prefill, next_step = np.mean(rows, axis=0)
    return {
        "ttft_s": ttft,
        "wait_s": wait,
        "prefill_span_s": span,
        "prefill_steps": num_steps,
        "prefills_sharing": share,
        "arrivals_in_prefill_step": in_prefill,
        "one_step_later_s": ttft + next_step,
        "decode_step_s": float(np.median(times_s[prefills == 0])),
    }


def lock_step(data: dict, run: dict, profile, turns: int) -> tuple[float, float]:
    """Mean TTFT of aiperf's profiling phase replayed in lock step (`turns` x N requests, all N sent
    at t = 0 into an idle engine), and of its first turn alone."""
    limit = int(run["max_concurrency"])
    locked = copy.deepcopy(run)
    locked["staggered_warmup"] = False
    locked["num_requests"] = turns * limit
    locked["prompt_tokens"] = [run["prompt_tokens"][0]] * (turns * limit)
    locked["output_tokens"] = [run["output_tokens"][0]] * (turns * limit)
    records, _start_s = replay_records(data, locked, profile)
    ttfts = np.array([record.ttft_s for record in records])
    return float(ttfts.mean()), float(ttfts[:limit].mean())


def summary(errors: list[float]) -> str:
    errors_array = np.asarray(errors)
    bias = math.exp(float(np.mean(np.log1p(errors_array))))
    return (
        f"{np.median(np.abs(errors_array)):6.1%} / {bias:.3f} / "
        f"{np.mean(np.abs(errors_array) <= 0.10):4.0%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20, help="aiperf's requests per client")
    parser.add_argument("--json", type=Path, default=None, help="also write the table here")
    args = parser.parse_args()
    data = load_published(SET_NAME)
    profile = source_profile(data)
    rows = []
    header = (
        f"{'run':<36} {'meas':>5} {'sim':>5} {'wait':>5} {'span':>5} {'nst':>4} {'shr':>4} "
        f"{'gap/NTp':>7} | {'+1st':>5} {'lock':>5} {'1st-t':>5}   (ms)"
    )
    print(f"{SET_NAME}, profile {profile.name}: mean TTFT per run, simulated steps around it")
    print(header)
    for run in data["runs"]:
        measured_s = run["measured"]["ttft_mean_s"]
        limit = int(run["max_concurrency"])
        around = steps_around(data, run, profile)
        locked_s, first_turn_s = lock_step(data, run, profile, args.turns)
        bound_s = (first_turn_s + (args.turns - 1) * around["ttft_s"]) / args.turns
        row = {
            "run": run["id"],
            "gpu": run["gpu"],
            "max_concurrency": limit,
            "measured_s": measured_s,
            **around,
            "gap_per_n_prefill_span": (measured_s - around["ttft_s"])
            / (limit * around["prefill_span_s"]),
            "lock_step_s": locked_s,
            "first_turn_lock_step_s": bound_s,
        }
        rows.append(row)
        print(
            f"{run['id'][-36:]:<36} {1e3 * measured_s:5.0f} {1e3 * row['ttft_s']:5.0f} "
            f"{1e3 * row['wait_s']:5.0f} {1e3 * row['prefill_span_s']:5.0f} "
            f"{row['prefill_steps']:4.1f} {row['prefills_sharing']:4.2f} "
            f"{row['gap_per_n_prefill_span']:7.3f} | {1e3 * row['one_step_later_s']:5.0f} "
            f"{1e3 * locked_s:5.0f} {1e3 * bound_s:5.0f}",
            flush=True,
        )
    print("\nmean TTFT rows: median |error| / bias / share within 10%, per GPU")
    variants = {
        "as shipped (staggered)": "ttft_s",
        "(a)/(d) one step later": "one_step_later_s",
        f"(c) lock step, {args.turns} turns": "lock_step_s",
        "(c) first turn locked only": "first_turn_lock_step_s",
    }
    for gpu in sorted({row["gpu"] for row in rows}):
        for name, key in variants.items():
            errors = [row[key] / row["measured_s"] - 1 for row in rows if row["gpu"] == gpu]
            print(f"  {gpu:<11} {name:<28} {summary(errors)}")
    for name, key_of in (
        ("N", lambda run_id: int(run_id.rsplit("-c", 1)[1])),
        ("TP", lambda run_id: run_id.split("-tp")[1].split("-")[0]),
        ("ISL x OSL", lambda run_id: run_id.split("-")[-2]),
        ("GPU", lambda run_id: run_id.split("-")[0]),
    ):
        groups: dict = {}
        for row in rows:
            groups.setdefault(key_of(row["run"]), []).append(row["gap_per_n_prefill_span"])
        print(
            f"gap / (N x prefill span), median by {name}: "
            + ", ".join(f"{key}: {np.median(v):.3f}" for key, v in sorted(groups.items()))
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"date": dt.date.today().isoformat(), "turns": args.turns, "rows": rows},
                indent=1,
                default=float,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
