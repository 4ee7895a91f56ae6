"""The shared scheduler's own CPU cost, as the cluster simulator pays it: no model, a constant step time.

A bare loop drives `engine.core.scheduler.Scheduler` the way a simulated replica does (schedule, advance
time by a constant step, update with the dummy token 0), over Azure-conversation requests: arrival times
and lengths from the Azure conversation trace (../shared/traces), or, with `--source fitted`, lengths
drawn from `traces.lengths.fitted_length("azure-conv-*")` with Poisson arrivals. Prompts longer than
max_model_len allows are clipped. Prefix caching is off by default, as the simulator runs a trace without
hash ids. Two loops are timed in CPU seconds (best of --repeats): step by step, and with `decode_stretch`
+ `advance_decodes` advancing decode-only stretches at once (a stretch ends before the next arrival).
`--baseline PACKAGE:PATH` adds the step-by-step loop over another copy of engine/core (the code before a
change, its `engine.core.` imports rewritten to `PACKAGE.`, found under PATH) as the "before" row. Every
loop must end with identical per-request timings, preemptions and allocation counters (checked here).
`--profile` prints cProfile's top functions of one run instead.

    .venv/bin/python benchmarks/scheduler.py [--requests 4000] [--baseline orig_core:/tmp/orig_pkg]
"""

import argparse
import cProfile
import importlib
import pstats
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# Run as a script (not imported by a test), the repo root, not benchmarks/, goes first on the path.
if not __package__:
    sys.path[0] = str(REPO)  # not benchmarks/: its traces.py would shadow the package

from benchmarks.machine import describe_machine  # noqa: E402
from traces import load_trace  # noqa: E402
from traces.lengths import fitted_length  # noqa: E402

TRACE = REPO.parent / "shared" / "traces" / "AzureLLMInferenceTrace_conv.csv"
SIM_TOKEN_ID = 0


def workload(args) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(arrival_s, prompt_tokens, output_tokens) of the first --requests requests."""
    rng = np.random.default_rng(args.seed)
    if args.source == "trace":
        trace = load_trace(TRACE)
        n = min(args.requests, len(trace))
        arrivals, prompts, outputs = (
            trace.arrival_s[:n],
            trace.prompt_tokens[:n],
            trace.output_tokens[:n],
        )
    else:
        n = args.requests
        arrivals = np.cumsum(rng.exponential(1 / args.rate, n))
        prompts = fitted_length("azure-conv-prompt").sample(rng, n)
        outputs = fitted_length("azure-conv-output").sample(rng, n)
    outputs = np.clip(outputs, 1, args.max_model_len - 1)
    prompts = np.clip(prompts, 1, args.max_model_len - outputs)
    return np.asarray(arrivals, float), prompts.astype(int), outputs.astype(int)


def make_requests(core, args, work) -> list:
    """Prompt tokens are slices of one random pool (distinct prompts, so few prefix hits)."""
    arrivals, prompts, outputs = work
    rng = np.random.default_rng(args.seed + 1)
    pool = rng.integers(1, 32000, 1 << 16).tolist()
    offsets = rng.integers(0, len(pool) - args.max_model_len, len(arrivals))
    return [
        core.Request(
            f"r{i}",
            pool[o : o + p],
            core.SamplingParams(max_tokens=int(m), ignore_eos=True, temperature=0),
            float(t),
        )
        for i, (t, p, m, o) in enumerate(zip(arrivals, prompts, outputs, offsets))
    ]


def make_scheduler(core, args):
    return core.Scheduler(
        core.SchedulerConfig(
            max_num_seqs=args.max_num_seqs,
            max_num_batched_tokens=args.max_num_batched_tokens,
            max_model_len=args.max_model_len,
        ),
        core.CacheConfig(
            block_size=args.block_size,
            num_kv_blocks=args.blocks,
            enable_prefix_caching=args.prefix_caching,
        ),
    )


def run(core, args, requests, stretch: bool) -> dict:
    """The replica's loop with a constant step time; returns counts (the requests are mutated)."""
    scheduler, dt = make_scheduler(core, args), args.step_ms / 1e3
    now, i, n, steps, seq_steps, stretches = 0.0, 0, len(requests), 0, 0, 0
    while i < n or scheduler.has_unfinished_requests():
        while i < n and requests[i].arrival_time <= now:
            scheduler.add_request(requests[i])
            i += 1
        if not scheduler.has_unfinished_requests():
            now = requests[i].arrival_time
            continue
        out = scheduler.schedule(now)
        num = len(out.scheduled)
        if stretch:
            next_arrival = requests[i].arrival_time if i < n else float("inf")
            limit = args.max_stretch
            if next_arrival != float("inf"):  # no arrival may fall before a step inside the stretch
                limit = max(1, min(limit, int((next_arrival - now) / dt) + 1))
            k = scheduler.decode_stretch(out, limit) if limit > 1 else 1
            if k > 1:
                ends, t = [], now
                for _ in range(k):
                    t += dt
                    ends.append(t)
                if ends[-2] >= next_arrival:  # float rounding: cut where the step loop would add it
                    k = next(j for j, e in enumerate(ends) if e >= next_arrival) + 1
                    ends = ends[:k]
                if k > 1:
                    scheduler.advance_decodes(out, k, ends, SIM_TOKEN_ID)
                    now, steps, seq_steps, stretches = (
                        ends[-1],
                        steps + k,
                        seq_steps + k * num,
                        stretches + 1,
                    )
                    continue
        now += dt
        scheduler.update(out, [SIM_TOKEN_ID] * num, now)
        steps, seq_steps = steps + 1, seq_steps + num
    bm = scheduler.block_manager
    return {
        "steps": steps,
        "seq_steps": seq_steps,
        "stretches": stretches,
        "end_s": now,
        "preemptions": scheduler.num_preemptions,
        "allocations": bm.num_allocations,
        "prefix_hits": bm.num_prefix_hits,
    }


def fingerprint(requests) -> list:
    return [
        (
            r.first_scheduled_time,
            r.first_token_time,
            r.finish_time,
            r.num_preemptions,
            len(r.output_token_ids),
        )
        for r in requests
    ]


def measure(core, args, work, stretch: bool) -> tuple[float, dict, list]:
    best, counts, prints = float("inf"), None, None
    for _ in range(args.repeats):
        requests = make_requests(core, args, work)
        start = time.process_time()
        counts = run(core, args, requests, stretch)
        best = min(best, time.process_time() - start)
        prints = fingerprint(requests)
    return best, counts, prints


def load_core(package: str, path: str | None):
    if path:
        sys.path.insert(0, path)
    names = ("scheduler", "request", "sampling_params", "config")
    mods = {name: importlib.import_module(f"{package}.{name}") for name in names}

    class Core:
        Scheduler = mods["scheduler"].Scheduler
        Request = mods["request"].Request
        SamplingParams = mods["sampling_params"].SamplingParams
        SchedulerConfig, CacheConfig = mods["config"].SchedulerConfig, mods["config"].CacheConfig

    return Core


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--source", choices=("trace", "fitted"), default="trace")
    parser.add_argument("--rate", type=float, default=5.5, help="requests/s of --source fitted")
    parser.add_argument(
        "--rate-scale", type=float, default=1.0, help="compress the arrival times by this factor"
    )
    parser.add_argument(
        "--step-ms", type=float, default=30.0, help="the constant simulated step time"
    )
    parser.add_argument(
        "--blocks",
        type=int,
        default=2560,
        help="KV blocks (2560 x 16 tokens: Llama-2-7B on a 40 GB A100 at 90%% memory)",
    )
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--max-num-seqs", type=int, default=256)
    parser.add_argument("--max-num-batched-tokens", type=int, default=4096)
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument(
        "--prefix-caching",
        action="store_true",
        help="turn the prefix cache on (prompts are "
        "distinct random tokens, so it mostly hashes and misses)",
    )
    parser.add_argument(
        "--max-stretch", type=int, default=256, help="cap on steps per stretch (the replica's)"
    )
    parser.add_argument("--modes", default="step,stretch")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--baseline", default=None, help="PACKAGE:PATH of an engine/core copy to time as 'before'"
    )
    parser.add_argument("--profile", action="store_true", help="cProfile one run of the first mode")
    args = parser.parse_args()
    work = workload(args)
    work = (work[0] / args.rate_scale, work[1], work[2])
    runs = [("after", load_core("engine.core", None), mode) for mode in args.modes.split(",")]
    if args.baseline:
        package, _, path = args.baseline.partition(":")
        runs.insert(0, ("before", load_core(package, path or None), "step"))
    if args.profile:
        _, core, mode = runs[-len(args.modes.split(","))]
        requests = make_requests(core, args, work)
        profiler = cProfile.Profile()
        profiler.runcall(run, core, args, requests, mode == "stretch")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        return
    print(f"# scheduler CPU cost, {describe_machine()}")
    print(
        f"# {len(work[0])} requests from {args.source} (mean prompt {work[1].mean():.0f}, output "
        f"{work[2].mean():.0f} tokens, arrivals x{args.rate_scale}), step {args.step_ms} ms, {args.blocks} blocks "
        f"x {args.block_size}, max_num_seqs {args.max_num_seqs}, max_num_batched_tokens "
        f"{args.max_num_batched_tokens}, prefix caching {'on' if args.prefix_caching else 'off'}; "
        f"CPU seconds, best of {args.repeats}"
    )
    print(
        f"{'code':<7} {'loop':<8} {'steps':>8} {'seq-steps':>10} {'stretches':>9} {'preempt':>7} {'CPU s':>7} "
        f"{'µs/seq-step':>11} {'requests/s':>10}"
    )
    reference = None
    for label, core, mode in runs:
        seconds, counts, prints = measure(core, args, work, mode == "stretch")
        print(
            f"{label:<7} {mode:<8} {counts['steps']:>8} {counts['seq_steps']:>10} {counts['stretches']:>9} "
            f"{counts['preemptions']:>7} {seconds:>7.2f} {seconds / counts['seq_steps'] * 1e6:>11.3f} "
            f"{len(prints) / seconds:>10.0f}",
            flush=True,
        )
        result = (counts | {"stretches": 0}, prints)
        if reference is None:
            reference = result
        elif result != reference:
            raise SystemExit(
                f"{label} {mode}: results differ from the first loop's; the loops are not equivalent"
            )
    if len(runs) > 1:
        print(
            "# every loop gave identical per-request timings, preemptions and allocation counters"
        )


if __name__ == "__main__":
    main()
