"""How fast the simulator runs: simulated requests per CPU-second, single process.

(a) the Azure conversation trace (19,366 requests) on 4 replicas of Llama-2-7B / A100-80GB, arrivals
    sped up so the fleet runs near 80% of its capacity (`--rate-scale`);
(b) the article's scale: 10,000 requests/s of Azure-conversation-like requests through ~100 replicas
    (`--fleet-duration-s` of traffic; the issue's figure is 60 s).

Prints a table; targets (not timed tests): (a) ≥ 10,000 simulated requests per CPU-second; (b) under
60 s wall for 60 s of traffic. `--stretch 1` turns decode stretches off, for the comparison.
"""
import argparse
import sys
import time
from pathlib import Path

sys.path[:1] = [str(Path(__file__).resolve().parents[1])]

from benchmarks.machine import describe_machine  # noqa: E402
from simulator import Scenario, simulate  # noqa: E402
from simulator.simulation import build_cluster, load_traffic  # noqa: E402

AZURE_CONV = Path(__file__).resolve().parents[2] / "shared" / "traces" / "AzureLLMInferenceTrace_conv.csv"


def run(scenario: Scenario, stretch: int) -> dict:
    trace = load_traffic(scenario)
    cpu, wall = time.process_time(), time.perf_counter()
    cluster, facts = build_cluster(scenario, trace)
    cluster.config.__dict__["max_stretch_steps"] = stretch      # frozen dataclass: benchmark-only override
    for replica in cluster.replicas:
        replica.max_stretch_steps = stretch
    end = cluster.run()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    steps = sum(r.num_steps for r in cluster.replicas)
    busy = sum(r.busy_s for r in cluster.replicas) / (len(cluster.replicas) * end)
    return {"requests": len(trace), "cpu_s": cpu, "wall_s": wall, "req_per_cpu_s": len(trace) / cpu,
            "steps": steps, "us_per_step": cpu / max(steps, 1) * 1e6, "busy": busy,
            "completed": sum(r.ok for r in cluster.records), "simulated_s": end}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate-scale", type=float, default=7.0, help="(a) arrival speed-up of the Azure trace")
    parser.add_argument("--fleet-duration-s", type=float, default=60.0, help="(b) seconds of 10,000 req/s traffic")
    parser.add_argument("--fleet-replicas", type=int, default=100)
    parser.add_argument("--stretch", type=int, default=256, help="max decode steps advanced at once (1: off)")
    parser.add_argument("--skip", choices=("a", "b"), action="append", default=[])
    args = parser.parse_args()
    print(describe_machine())
    rows = []
    if "a" not in args.skip:
        a = Scenario(name="azure-conv", traffic=dict(trace=str(AZURE_CONV), rate_scale=args.rate_scale, too_long="clip"),
                     cluster=dict(replicas=4), scheduler=dict(max_num_batched_tokens=4096))
        rows.append(("(a) Azure conv, 4 x Llama-2-7B/A100", run(a, args.stretch)))
    if "b" not in args.skip:
        b = Scenario(name="fleet", traffic=dict(arrivals=dict(kind="poisson", rate_per_s=10000.0),
                                                duration_s=args.fleet_duration_s, too_long="clip"),
                     cluster=dict(replicas=args.fleet_replicas), scheduler=dict(max_num_batched_tokens=4096))
        rows.append((f"(b) 10k req/s x {args.fleet_duration_s:g} s, {args.fleet_replicas} replicas", run(b, args.stretch)))
    print(f"decode stretches: up to {args.stretch} steps at once")
    print(f"{'run':<44}{'requests':>9}{'CPU s':>8}{'wall s':>8}{'req/CPU-s':>11}{'steps':>9}{'µs/step':>9}{'busy':>6}")
    for name, r in rows:
        print(f"{name:<44}{r['requests']:>9}{r['cpu_s']:>8.1f}{r['wall_s']:>8.1f}{r['req_per_cpu_s']:>11.0f}"
              f"{r['steps']:>9}{r['us_per_step']:>9.0f}{r['busy']:>6.0%}")


if __name__ == "__main__":
    main()
