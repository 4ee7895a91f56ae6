"""How fast the simulator runs: simulated requests per CPU-second, single process.

(a) the Azure conversation trace (19,366 requests) on 4 replicas of Llama-2-7B / A100-80GB, arrivals
    sped up so the fleet runs near 80% of its capacity (`--rate-scale`);
(b) the article's scale: 10,000 requests/s of Azure-conversation-like requests through ~100 replicas
    (`--fleet-duration-s` of traffic; the issue's figure is 60 s);
(c) Mooncake-style long shared prefixes: (a)'s requests, each starting with one of 16 shared
    2,048-token prefixes (hash ids per 16-token block, so the prefix cache hits), prompts to ~4k tokens.

Prints a table; targets (not timed tests): (a) ≥ 10,000 simulated requests per CPU-second; (b) under
60 s wall for 60 s of traffic; (c) ≥ 5,000 requests per CPU-second. `--stretch 1` turns decode
stretches off, for the comparison. `--baseline PATH` runs the same rows on another checkout of the
project (the code before a change, e.g. `git worktree add /tmp/before HEAD~3` or `git archive`), in a
subprocess importing the simulator from there, prints its rows beside these with the speed-up, and
checks that both ran the same simulation (a fingerprint of every request's TTFT, end-to-end time and
preemptions, and the simulated end time).

    .venv/bin/python benchmarks/simulator.py --requests 8000 --skip b --baseline /tmp/before
"""

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Run as a script (not imported by a test), the repo root, not benchmarks/, goes first on the path.
if not __package__:
    if "--tree" in sys.argv:  # import the simulator from another checkout
        sys.path[:1] = [str(Path(sys.argv[sys.argv.index("--tree") + 1]).resolve())]
    else:
        sys.path[:1] = [str(REPO)]

import engine.core  # noqa: E402
from simulator import Scenario  # noqa: E402
from simulator.simulation import build_cluster, load_traffic  # noqa: E402

AZURE_CONV = REPO.parent / "shared" / "traces" / "AzureLLMInferenceTrace_conv.csv"


def core_build() -> str:
    """`engine.core.core_build()`, or "unknown" in a `--tree` baseline older than that function."""
    return getattr(engine.core, "core_build", lambda: "unknown")()


def run(scenario: Scenario, stretch: int) -> dict:
    trace = load_traffic(scenario)
    cpu, wall = time.process_time(), time.perf_counter()
    cluster, facts = build_cluster(scenario, trace)
    cluster.config.__dict__["max_stretch_steps"] = (
        stretch  # frozen dataclass: benchmark-only override
    )
    for replica in cluster.replicas:
        replica.max_stretch_steps = stretch
    end = cluster.run()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    steps = sum(r.num_steps for r in cluster.replicas)
    busy = sum(r.busy_s for r in cluster.replicas) / (len(cluster.replicas) * end)
    outcome = repr(([(r.ttft_s, r.e2e_s, r.num_preemptions) for r in cluster.records], end))
    return {
        "requests": len(trace),
        "cpu_s": cpu,
        "wall_s": wall,
        "req_per_cpu_s": len(trace) / cpu,
        "steps": steps,
        "us_per_step": cpu / max(steps, 1) * 1e6,
        "busy": busy,
        "completed": sum(r.ok for r in cluster.records),
        "simulated_s": end,
        "fingerprint": hashlib.sha1(outcome.encode()).hexdigest()[:12],
        "build": core_build(),
    }


def scenarios(args) -> list[tuple[str, Scenario]]:
    rows = []
    first = dict(max_requests=args.requests) if args.requests else {}
    if "a" not in args.skip:
        rows.append(
            (
                "(a) Azure conv, 4 x Llama-2-7B/A100",
                Scenario(
                    name="azure-conv",
                    traffic=dict(
                        trace=str(AZURE_CONV), rate_scale=args.rate_scale, too_long="clip", **first
                    ),
                    cluster=dict(replicas=4),
                    scheduler=dict(max_num_batched_tokens=4096),
                ),
            )
        )
    if "b" not in args.skip:
        name = f"(b) 10k req/s x {args.fleet_duration_s:g} s, {args.fleet_replicas} replicas"
        rows.append(
            (
                name,
                Scenario(
                    name="fleet",
                    traffic=dict(
                        arrivals=dict(kind="poisson", rate_per_s=10000.0),
                        duration_s=args.fleet_duration_s,
                        too_long="clip",
                    ),
                    cluster=dict(replicas=args.fleet_replicas),
                    scheduler=dict(max_num_batched_tokens=4096),
                ),
            )
        )
    if "c" not in args.skip:
        limit = dict(max_requests=args.prefix_requests) if args.prefix_requests else first
        rows.append(
            (
                "(c) (a) + 16 shared 2k-token prefixes",
                Scenario(
                    name="mooncake-style",
                    traffic=dict(
                        trace=str(AZURE_CONV),
                        rate_scale=args.rate_scale,
                        too_long="clip",
                        shared_prefix_groups=16,
                        shared_prefix_tokens=2048,
                        **limit,
                    ),
                    cluster=dict(replicas=4),
                    scheduler=dict(max_num_batched_tokens=4096),
                ),
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rate-scale",
        type=float,
        default=7.0,
        help="(a), (c): arrival speed-up of the Azure trace",
    )
    parser.add_argument(
        "--requests", type=int, default=None, help="(a), (c): only the first N requests"
    )
    parser.add_argument(
        "--prefix-requests",
        type=int,
        default=None,
        help="(c): only the first N (default --requests)",
    )
    parser.add_argument(
        "--fleet-duration-s", type=float, default=60.0, help="(b) seconds of 10,000 req/s traffic"
    )
    parser.add_argument("--fleet-replicas", type=int, default=100)
    parser.add_argument(
        "--stretch", type=int, default=256, help="max decode steps advanced at once (1: off)"
    )
    parser.add_argument("--skip", choices=("a", "b", "c"), action="append", default=[])
    parser.add_argument(
        "--baseline", type=Path, default=None, help="another checkout to run the same rows on"
    )
    parser.add_argument(
        "--tree", type=Path, default=None, help=argparse.SUPPRESS
    )  # (the baseline run)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    rows = [(name, run(scenario, args.stretch)) for name, scenario in scenarios(args)]
    if args.json:
        print(json.dumps(rows))
        return
    before = None
    if args.baseline is not None:
        command = [sys.executable, __file__, "--tree", str(args.baseline), "--json"] + [
            arg for arg in sys.argv[1:] if arg not in ("--baseline", str(args.baseline))
        ]
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        before = dict(json.loads(done.stdout))
    from benchmarks.machine import describe_machine

    print(describe_machine())
    print(f"decode stretches: up to {args.stretch} steps at once; CPU s = this process's CPU time")
    print(f"engine/core: {core_build()}" + (f"; before: {rows_build(before)}" if before else ""))
    header = f"{'run':<44}{'requests':>9}{'CPU s':>8}{'wall s':>8}{'req/CPU-s':>11}{'steps':>9}{'µs/step':>9}{'busy':>6}"
    print(header + (f"{'before CPU s':>14}{'speed-up':>10}{'same run':>10}" if before else ""))
    for name, r in rows:
        line = (
            f"{name:<44}{r['requests']:>9}{r['cpu_s']:>8.1f}{r['wall_s']:>8.1f}{r['req_per_cpu_s']:>11.0f}"
            f"{r['steps']:>9}{r['us_per_step']:>9.0f}{r['busy']:>6.0%}"
        )
        if before:
            b = before[name]
            same = "yes" if b["fingerprint"] == r["fingerprint"] else "NO"
            line += f"{b['cpu_s']:>14.1f}{b['cpu_s'] / r['cpu_s']:>9.2f}x{same:>10}"
        print(line)


def rows_build(rows: dict) -> str:
    return ", ".join(sorted({row.get("build", "pure Python") for row in rows.values()}))


if __name__ == "__main__":
    main()
