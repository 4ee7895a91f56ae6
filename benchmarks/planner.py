"""How long the capacity planner takes, wall clock, on this machine.

(a) the default dashboard scenario (`examples/scenarios/plan-spike-llama-2-7b.yaml`: a 10x spike on
    Llama-2-7B, about 4,500 requests) over the candidates A100-80GB, H100-80GB, H200-141GB and L40S:
    - `answer`: per-GPU share passes, the cheapest confirmed on full fleets with one replica less
      (`confirm: recommendation`, no comparisons) — what the dashboard shows first; target ≤ 10 s;
    - `full`: every GPU type confirmed, plus ± calibration error, static baseline, autoscaled fleet and
      the dynamic batch controller;
    - `full, warm cache`: the same plan again with the first run's outcomes cached (by scenario hash);
(b) `--article`: the article's scale, a 10x spike peaking at 10,000 requests/s (`--article-duration-s`
    of traffic), A100-80GB only, `answer` profile, routed round robin: the simulator's least-outstanding
    router scans every replica for every request (O(replicas) each, which dominates a run of ~1,400
    replicas), and round robin is where the share pass (every N-th request) is exact but for retries.
    A fleet of more than 256 replicas is confirmed on a sample of 256 of its replicas with their share
    of the traffic (exact under round robin, retries apart; its P99 scatters around the whole fleet's:
    see simulator/planner/search.py), so each confirmation costs about 256 share passes, not ~1,500;
    a 32-replica sample is searched first, and the 256-replica sample's search starts where it crossed.

Prints a table (and writes benchmarks/results/planner.json); no timing is asserted in tests.
"""

import argparse
import ast
import importlib.util
import json
import resource
import sys
import time
from pathlib import Path

# Run as a script (not imported by a test), the repo root, not benchmarks/, goes first on the path.
if not __package__:
    if "--tree" in sys.argv:  # import the planner from another checkout (the code before a change)
        sys.path[:1] = [str(Path(sys.argv[sys.argv.index("--tree") + 1]).resolve())]
    else:
        sys.path[:1] = [str(Path(__file__).resolve().parents[1])]

from benchmarks.machine import describe_machine  # noqa: E402
from simulator.planner import spec  # noqa: E402
from simulator.planner.cache import OutcomeCache  # noqa: E402
from simulator.planner.recommend import plan  # noqa: E402
from simulator.planner.spec import PlanSettings, load_plan  # noqa: E402
from simulator.scenario import Scenario  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _this_checkouts(name: str):
    """A module of this checkout's benchmarks/ (a --tree from before may not have it)."""
    spec_ = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    return module


modelled = _this_checkouts("planner_schedule").modelled


def _answer_only() -> dict:
    """The `answer` profile (`simulator.planner.spec.ANSWER_ONLY`); read from this checkout's spec.py
    when `--tree` names one from before the profile had a name, so both run the same settings."""
    if hasattr(spec, "ANSWER_ONLY"):
        return spec.ANSWER_ONLY
    module = ast.parse((ROOT / "simulator" / "planner" / "spec.py").read_text())
    call = next(
        node.value
        for node in module.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "ANSWER_ONLY"
    )
    return {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords}


ANSWER_ONLY = _answer_only()
DASHBOARD = ROOT / "examples" / "scenarios" / "plan-spike-llama-2-7b.yaml"
CANDIDATES = [{"gpu": "A100-80GB"}, {"gpu": "H100-80GB"}, {"gpu": "H200-141GB"}, {"gpu": "L40S"}]


def article_scenario(base: Scenario, duration_s: float) -> Scenario:
    """(b)'s scenario: `base` with the article's 10x spike to 10,000 requests/s for `duration_s` seconds
    of traffic, routed round robin (the least-outstanding router scans every replica per request)."""
    data = base.model_dump(mode="json") | {"name": "article-10k-rps"}
    data["cluster"]["router"] = {"policy": "round_robin"}
    data["traffic"] |= {
        "arrivals": {
            "kind": "spike",
            "base": {"kind": "poisson", "rate_per_s": 1000.0},
            "multiplier": 10,
            "start_s": 10,
            "ramp_up_s": 10,
            "hold_s": 20,
            "ramp_down_s": 10,
        },
        "duration_s": duration_s,
    }
    return Scenario.model_validate(data)


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (the plan's worker processes)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(
    scenario,
    settings: PlanSettings,
    workers: int,
    cache: OutcomeCache | None = None,
    model_cores: int = 0,
    memo: Path | None = None,
) -> dict:
    cache = cache if cache is not None else OutcomeCache()
    known = dict(cache.memory)
    cpu_started, started = _cpu_s(), time.perf_counter()
    result = plan(scenario, settings, workers=workers, cache=cache, progress=False)
    wall = time.perf_counter() - started
    process_cpu_s = _cpu_s() - cpu_started
    new = {key: outcome for key, outcome in cache.memory.items() if key not in known}
    model = (
        modelled(lambda: plan(scenario, settings, progress=False), model_cores, memo, new)
        if model_cores
        else None
    )
    rows = [row for row in result.ledger.rows if row["phase"] != "fit check"]
    report = result.report
    rec = report.recommendation
    checked = next(row for row in report.per_gpu_type if row.gpu == rec.gpu).checked_by
    return {
        "wall_s": wall,
        "process_cpu_s": process_cpu_s,
        "model": model,
        "evaluations": len(rows),
        "simulated": report.simulations.simulated,
        "checked_by": checked,
        "binding_checked_by": rec.binding_checked_by,
        "phases": {
            phase: sum(row["phase"] == phase for row in rows)
            for phase in dict.fromkeys(row["phase"] for row in rows)
        },
        "simulated_requests": sum(row["requests"] or 0 for row in rows if not row["cached"]),
        "cpu_s": sum(row["cpu_s"] or 0.0 for row in rows if not row["cached"]),
        "answer": f"{rec.replicas} x {rec.gpu} (${rec.cost_per_hour_usd:.2f}/h, "
        f"${rec.cost_per_request_usd:.6f}/req)",
        "data": report.to_json(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="worker processes (default: CPU count)"
    )
    parser.add_argument(
        "--skip-full", action="store_true", help="time only the `answer` profile of (a)"
    )
    parser.add_argument(
        "--article", action="store_true", help="(b): the article's 10,000 requests/s scale"
    )
    parser.add_argument("--article-duration-s", type=float, default=60.0)
    parser.add_argument(
        "--cli-spike",
        action="store_true",
        help="(c): `surgeplan plan examples/scenarios/spike-llama-2-7b-a100.yaml`'s default plan",
    )
    parser.add_argument("--skip-dashboard", action="store_true", help="skip (a)")
    parser.add_argument(
        "--tree", type=Path, default=None, help="run the planner of another checkout (before)"
    )
    parser.add_argument(
        "--model-cores",
        type=int,
        default=0,
        help="(b), (c): also replay each plan on this many idle virtual cores (benchmarks/planner_schedule.py)",
    )
    parser.add_argument(
        "--schedule-memo",
        type=Path,
        default=None,
        help="job outcomes and CPU times for --model-cores, shared by before and after runs",
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "planner.json"
    )
    args = parser.parse_args()
    print(describe_machine())
    scenario, _ = load_plan(DASHBOARD)
    rows = []
    answer = PlanSettings(candidates=CANDIDATES, **ANSWER_ONLY)
    if not args.skip_dashboard:
        rows.append(("(a) answer", timed(scenario, answer, args.workers)))
    model = dict(model_cores=args.model_cores, memo=args.schedule_memo)
    if args.cli_spike:
        spike, spike_settings = load_plan(
            ROOT / "examples" / "scenarios" / "spike-llama-2-7b-a100.yaml"
        )
        rows.append(
            (
                "(c) spike-llama-2-7b-a100, default plan",
                timed(spike, spike_settings, args.workers, **model),
            )
        )
        spike_answer = spike_settings.model_copy(update=ANSWER_ONLY)
        rows.append(
            ("(c) spike-llama-2-7b-a100, answer", timed(spike, spike_answer, args.workers, **model))
        )
    if not args.skip_full and not args.skip_dashboard:
        cache = OutcomeCache()
        full = PlanSettings(candidates=CANDIDATES)
        rows.append(("(a) full", timed(scenario, full, args.workers, cache)))
        rows.append(("(a) full, warm cache", timed(scenario, full, args.workers, cache)))
    if args.article:
        article = article_scenario(scenario, args.article_duration_s)
        settings = PlanSettings(candidates=[{"gpu": "A100-80GB"}], max_replicas=4096, **ANSWER_ONLY)
        rows.append(
            (
                f"(b) 10k req/s peak, {args.article_duration_s:g} s, A100",
                timed(article, settings, args.workers, **model),
            )
        )
    print(f"planner from {args.tree or ROOT}")
    if not args.skip_dashboard:
        traffic = rows[0][1]["data"]["traffic"]
        print(
            f"(a) {scenario.name}: {traffic['requests']:,} requests, peak "
            f"{traffic['peak_rate_per_s']:.1f}/s; candidates {', '.join(c['gpu'] for c in CANDIDATES)}"
        )
    print(
        f"{'run':<40}{'wall s':>8}{'CPU s':>7}{'sim CPU s':>10}{'evals':>7}{'simulated':>10}"
        f"{'sim. requests':>14}  answer"
    )
    for name, row in rows:
        print(
            f"{name:<40}{row['wall_s']:>8.1f}{row['process_cpu_s']:>7.1f}{row['cpu_s']:>10.1f}"
            f"{row['evaluations']:>7}{row['simulated']:>10}{row['simulated_requests']:>14,}  {row['answer']}"
        )
    for name, row in rows:
        if row["model"]:
            print(
                f"{name}: on {args.model_cores} idle cores (modelled) {row['model']['wall_s']:.1f} s wall, "
                f"{row['model']['cpu_s']:.1f} CPU s in jobs started"
            )
    for name, row in rows:
        if name.startswith("(b)"):
            traffic = row["data"]["traffic"]
            print(
                f"(b) {traffic['requests']:,} requests, peak {traffic['peak_rate_per_s']:,.0f}/s; answer checked by "
                f"{row['checked_by']}; one fewer checked by {row['binding_checked_by']}; evaluations by phase "
                + ", ".join(f"{phase} {count}" for phase, count in row["phases"].items())
            )
    full = dict(rows).get("(a) full")
    if full:
        data = full["data"]
        print("recommendation:", data["recommendation"]["sentence"])
        if data.get("uncertainty"):
            print("error bars:", data["uncertainty"]["text"])
        scaled, dynamic = data.get("autoscaled"), data.get("dynamic_batch")
        if scaled:
            print(
                f"autoscaled: warm pool {scaled['warm_pool']}, cost ${scaled['cost_usd']:.2f} vs fixed "
                f"${scaled['fixed_cost_usd']:.2f} over the run"
            )
        if dynamic:
            print(
                f"dynamic batch: {dynamic['replicas']} replicas, P99 TTFT {dynamic['ttft_p99_s']:.3f} s, P99 TPOT "
                f"{dynamic['tpot_p99_s']:.3f} s, ${dynamic['cost_per_request_usd']:.6f}/req; best fixed "
                f"{dynamic['best_fixed']}"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"machine": describe_machine(), "runs": {name: row for name, row in rows}}, indent=1
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
