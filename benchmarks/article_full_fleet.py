"""The article-scale plan's answer and smaller fleets, each run whole in one process.

`benchmarks/planner.py --article` plans the article's scale (a 10x spike peaking at 10,000 requests/s,
A100-80GB, the `answer` profile, round robin): fleets above 256 replicas are searched on 256-replica
samples with their share of the traffic, and the answer is confirmed on its whole fleet in parts
(`simulator/planner/parts.py`); its one-fewer check stays the sample's. This script runs that plan, then
simulates the answer's whole fleet, N replicas and N - 1, with the batch settings the plan chose, each
judged by the scenario's SLO exactly as the planner judges a full-fleet confirmation (`evaluate_job`,
early stop off), side by side in worker processes (`--also`: smaller fleets too): the answer is exact
on the whole fleet when N meets and N - 1 misses, conservative when N - 1 meets too, optimistic when N
misses. Prints the verdicts, their SLO ratios and the times; saves JSON.

    .venv/bin/python benchmarks/article_full_fleet.py --workers 2
"""

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path

if not __package__:  # run as a script: the repo root first on the path
    import sys

    sys.path[:1] = [str(Path(__file__).resolve().parents[1])]

from benchmarks.machine import describe_machine  # noqa: E402
from benchmarks.planner import ANSWER_ONLY, DASHBOARD, article_scenario  # noqa: E402
from simulator.planner.evaluate import evaluate_job, make_job  # noqa: E402
from simulator.planner.fleet import Batch, fleet_scenario  # noqa: E402
from simulator.planner.recommend import plan  # noqa: E402
from simulator.planner.spec import PlanSettings, load_plan  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _timed_job(job: dict) -> tuple[dict, float]:
    started = time.perf_counter()
    outcome = evaluate_job(job)
    return outcome.to_json(), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration-s", type=float, default=60.0, help="seconds of traffic")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--also", type=int, nargs="*", default=[], help="smaller whole fleets to try as well"
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "article_full_fleet.json"
    )
    args = parser.parse_args()
    print(describe_machine())
    base, _ = load_plan(DASHBOARD)
    article = article_scenario(base, args.duration_s)
    settings = PlanSettings(candidates=[{"gpu": "A100-80GB"}], max_replicas=4096, **ANSWER_ONLY)
    started = time.perf_counter()
    result = plan(article, settings, workers=args.workers, progress=False)
    plan_s = time.perf_counter() - started
    rec = result.report.recommendation
    batch = Batch(rec.max_num_seqs, rec.max_num_batched_tokens)  # (the answer profile: continuous)
    print(
        f"plan: {rec.replicas} x {rec.gpu} (TP {rec.tensor_parallel}, max_num_seqs "
        f"{rec.max_num_seqs}, max_num_batched_tokens {rec.max_num_batched_tokens}) in {plan_s:.1f} s"
    )
    sizes = [rec.replicas, rec.replicas - 1] + [n for n in args.also if n < rec.replicas - 1]
    jobs = [
        make_job(fleet_scenario(article, rec.gpu, rec.tensor_parallel, n, batch), early_stop=False)
        for n in sizes
    ]
    started = time.perf_counter()
    with ProcessPoolExecutor(min(args.workers, len(jobs))) as pool:
        done = list(pool.map(_timed_job, jobs))
    wall_s = time.perf_counter() - started
    rows = []
    for n, (outcome, seconds) in zip(sizes, done):
        rows.append({"replicas": n, "wall_s": seconds, **outcome})
        ratios = ", ".join(f"{k} {v:.3f}" for k, v in (outcome.get("ratios") or {}).items())
        print(
            f"{n:>6} replicas, whole fleet: {'meets' if outcome['meets'] else 'misses'} "
            f"({outcome['status']}; {ratios}); {seconds:.1f} s wall, {outcome['cpu_s']:.1f} CPU s"
        )
    meets = {row["replicas"]: row["meets"] for row in rows}
    if not meets[rec.replicas]:
        verdict = "optimistic: the whole fleet of that size misses"
    elif meets[rec.replicas - 1]:
        fewest = min(n for n, ok in meets.items() if ok)
        verdict = f"conservative: the whole fleet meets with {fewest} (the fewest of those tried)"
    else:
        verdict = "exact: the whole fleet meets with it and misses with one replica less"
    holds = meets[rec.replicas]
    print(
        f"the plan's answer on the whole fleet: {verdict} ({len(rows)} fleets simulated in "
        f"{wall_s:.1f} s wall on {args.workers} processes)"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "machine": describe_machine(),
                "plan_wall_s": plan_s,
                "answer": asdict(rec),
                "full_fleet": rows,
                "holds": holds,
                "full_fleet_wall_s": wall_s,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
