"""Parallel replicas: how fast a large fixed fleet simulates when its replicas advance in parallel
between the router's scrapes, and how far the stale router moves the answer.

Speed table: workload (b) of issue 19, `--rate` requests/s of Azure-conversation-like requests for
`--duration-s` seconds on `--replicas` Llama-2-7B/A100 replicas (least_outstanding), run
(1) sequentially (router staleness 0: the exact path), (2) with the default staleness (the engine's
metrics interval, 50 ms) in one process, (3) the same in `--workers` local worker processes and
(4) as many Ray actors (`--ray`, a local Ray instance). Rows 2-4 must be the same run (fingerprint of
every request's TTFT, end-to-end time and preemptions). CPU s counts the worker processes (not Ray's).

Spread table (`--seeds N`): for each of N seeds, the staleness-0 and default-staleness runs of a smaller
fleet (`--spread-rate`, `--spread-replicas`, `--spread-duration-s`); the answer's figures (P50/P99 TTFT,
P99 TPOT, SLO attainment), their spread over seeds (max - min of the staleness-0 runs), and per
staleness (the default and `--staleness-s`) the largest move from the exact run of the same seed and
the mean shift. The stale router is within the seeds' spread when the move is no larger.

    .venv/bin/python benchmarks/parallel_replicas.py --duration-s 60 --workers 2 --seeds 5 --ray
"""

import argparse
import hashlib
import json
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Run as a script (not imported by a test), the repo root, not benchmarks/, goes first on the path.
if not __package__:
    sys.path[:1] = [str(REPO)]

from simulator import Scenario  # noqa: E402
from simulator.cluster.shards import ShardSpec  # noqa: E402
from simulator.result import summarize  # noqa: E402
from simulator.simulation import build_cluster, load_traffic  # noqa: E402

FIGURES = ("ttft_p50_s", "ttft_p99_s", "tpot_p99_s", "slo_attainment")


def fleet(rate: float, duration_s: float, replicas: int, staleness_s: float | None, seed: int = 0):
    """`staleness_s` None: the engine's metrics interval (MetricsConfig, 50 ms)."""
    from engine.core.config import MetricsConfig

    if staleness_s is None:
        staleness_s = MetricsConfig().metrics_interval_s
    router = {"staleness_s": staleness_s}
    return Scenario(
        name="fleet",
        seed=seed,
        traffic=dict(
            arrivals=dict(kind="poisson", rate_per_s=rate), duration_s=duration_s, too_long="clip"
        ),
        cluster=dict(replicas=replicas, router=router),
        scheduler=dict(max_num_batched_tokens=4096),
    )


def _cpu_s() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def run(scenario: Scenario, shards: ShardSpec) -> dict:
    trace = load_traffic(scenario)
    cpu, wall = _cpu_s(), time.perf_counter()
    cluster, facts = build_cluster(scenario, trace, shards=shards)
    end = cluster.run()
    summary = summarize(scenario, cluster, end, facts).summary
    cpu, wall = _cpu_s() - cpu, time.perf_counter() - wall
    outcome = repr(([(r.ttft_s, r.e2e_s, r.num_preemptions) for r in cluster.records], end))
    return {
        "requests": len(trace),
        "cpu_s": cpu,
        "wall_s": wall,
        "fingerprint": hashlib.sha1(outcome.encode()).hexdigest()[:12],
        **{name: getattr(summary, name) for name in FIGURES},
    }


def speed_rows(args) -> list[tuple[str, dict]]:
    rows = []
    sequential = fleet(args.rate, args.duration_s, args.replicas, 0.0)
    stale = fleet(args.rate, args.duration_s, args.replicas, None)
    staleness = stale.cluster.router.staleness_s
    if not args.skip_sequential:
        rows.append(("sequential (staleness 0, exact)", run(sequential, ShardSpec())))
    rows.append((f"staleness {staleness * 1e3:g} ms, 1 process", run(stale, ShardSpec())))
    for workers in args.workers:
        rows.append(
            (
                f"staleness {staleness * 1e3:g} ms, {workers} processes",
                run(stale, ShardSpec(workers)),
            )
        )
    if args.ray:
        for workers in args.workers:
            rows.append(
                (
                    f"staleness {staleness * 1e3:g} ms, {workers} Ray actors",
                    run(stale, ShardSpec(workers, "ray")),
                )
            )
    return rows


def spread_rows(args) -> list[dict]:
    rows = []
    for seed in range(args.seeds):
        for staleness in (0.0, None, *args.staleness_s):
            scenario = fleet(
                args.spread_rate, args.spread_duration_s, args.spread_replicas, staleness, seed
            )
            result = run(scenario, ShardSpec())
            rows.append({"seed": seed, "staleness_s": scenario.cluster.router.staleness_s} | result)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=10000.0)
    parser.add_argument("--duration-s", type=float, default=60.0)
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--workers", type=int, nargs="*", default=[2])
    parser.add_argument("--ray", action="store_true", help="also run the shards as Ray actors")
    parser.add_argument("--skip-sequential", action="store_true")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--seeds", type=int, default=0, help="spread table over this many seeds")
    parser.add_argument(
        "--staleness-s",
        type=float,
        nargs="*",
        default=[0.01],
        help="spread table: staleness values besides 0 and the default",
    )
    parser.add_argument("--spread-rate", type=float, default=40.0)
    parser.add_argument("--spread-duration-s", type=float, default=120.0)
    parser.add_argument("--spread-replicas", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None, help="also save the rows here")
    args = parser.parse_args()
    from benchmarks.machine import describe_machine

    print(describe_machine())
    saved = {}
    if not args.skip_speed:
        rows = speed_rows(args)
        saved["speed"] = rows
        print(
            f"\n(b) {args.rate:g} req/s x {args.duration_s:g} s, {args.replicas} x Llama-2-7B/A100, "
            "least_outstanding; CPU s includes worker processes (not Ray actors)"
        )
        print(
            f"{'run':<40}{'requests':>9}{'wall s':>8}{'CPU s':>8}{'P99 TTFT':>10}{'fingerprint':>14}"
        )
        for name, r in rows:
            print(
                f"{name:<40}{r['requests']:>9}{r['wall_s']:>8.1f}{r['cpu_s']:>8.1f}"
                f"{r['ttft_p99_s']:>10.3f}{r['fingerprint']:>14}"
            )
    if args.seeds:
        rows = spread_rows(args)
        saved["spread"] = rows
        print(
            f"\nspread: {args.spread_rate:g} req/s x {args.spread_duration_s:g} s, "
            f"{args.spread_replicas} replicas, seeds 0-{args.seeds - 1}"
        )
        print(f"{'seed':>5}{'staleness':>11}" + "".join(f"{name:>16}" for name in FIGURES))
        for r in rows:
            print(
                f"{r['seed']:>5}{r['staleness_s']:>11g}"
                + "".join(f"{r[name]:>16.4f}" for name in FIGURES)
            )
        exact = [r for r in rows if r["staleness_s"] == 0]
        spread = {n: max(r[n] for r in exact) - min(r[n] for r in exact) for n in FIGURES}
        print(f"{'':>16}" + "".join(f"{name:>16}" for name in FIGURES))
        print(f"{'seed spread':>16}" + "".join(f"{spread[n]:>16.4f}" for n in FIGURES))
        for staleness in dict.fromkeys(r["staleness_s"] for r in rows if r["staleness_s"]):
            stale = [r for r in rows if r["staleness_s"] == staleness]
            move = {n: max(abs(a[n] - b[n]) for a, b in zip(exact, stale)) for n in FIGURES}
            shift = {
                n: sum(b[n] - a[n] for a, b in zip(exact, stale)) / len(stale) for n in FIGURES
            }
            label = f"{staleness * 1e3:g} ms"
            print(f"{label + ' move':>16}" + "".join(f"{move[n]:>16.4f}" for n in FIGURES))
            print(f"{label + ' mean':>16}" + "".join(f"{shift[n]:>+16.4f}" for n in FIGURES))
            print(
                f"{'within spread':>16}"
                + "".join(f"{'yes' if move[n] <= spread[n] else 'NO':>16}" for n in FIGURES)
            )
    if args.json is not None:
        args.json.write_text(json.dumps(saved, indent=1))


if __name__ == "__main__":
    main()
