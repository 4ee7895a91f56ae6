"""Our simulator against DistServe's own (its artifact's `simdistserve`) on the same requests: the chatbot
anchor's attainment at fixed rates per GPU, vLLM on one GPU and DistServe's placement (prefill TP2 +
decode TP1), each simulator timing steps with the step models DistServe's artifact fitted
(`benchmarks/distserve_steps.py` turns them into our calibrations).

Both get the same requests: the anchor's scenario at each rate (Poisson arrivals, the shipped ShareGPT
length tables, seed 0) is written out as `simdistserve`'s custom workload (arrival time, prompt and
output lengths). Attainment is each simulator's own: DistServe's TPOT is a request's decode time over
its output tokens, ours over its tokens after the first. Where the two agree, a gap between our anchor
and the paper lies in what both were given (the workload), not in how we simulate.

Needs a checkout of the artifact (github.com/LLMServe/DistServe, Apache-2.0; run, never copied here):

    git clone https://github.com/LLMServe/DistServe /tmp/DistServe
    .venv/bin/python benchmarks/distserve_crosscheck.py --artifact /tmp/DistServe

Prints a table and writes benchmarks/results/distserve_crosscheck.json.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

# Run as a script (not imported by a test), the repo root, not benchmarks/, goes first on the path.
if not __package__:
    sys.path[:1] = [str(Path(__file__).resolve().parents[1])]

from benchmarks.disaggregation import attainments  # noqa: E402
from benchmarks.disaggregation_workloads import WORKLOADS  # noqa: E402
from benchmarks.goodput_search import scenario_for  # noqa: E402
from benchmarks.machine import describe_machine  # noqa: E402
from simulator.simulation import load_traffic  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = WORKLOADS["DistServe chatbot 13B, each system's own steps (DistServe artifact)"]
SYSTEMS = {  # ours: the anchor's layout entry; theirs: (backend, GPUs, prefill TP, decode TP)
    "vLLM, 1 GPU": (WORKLOAD["layouts"][0], ("vllm", 1, 1, 1)),
    "DistServe, prefill TP2 + decode TP1": (WORKLOAD["layouts"][1], ("distserve", 3, 2, 1)),
}


def theirs(artifact: Path, system: tuple, rate: float, duration_s: float) -> dict[str, float]:
    """`simdistserve`'s attainment for the anchor's requests at `rate` (requests/s, whole layout)."""
    if str(artifact) not in sys.path:
        sys.path.insert(0, str(artifact))
    from simdistserve.benchmarks.simulate_dist import main, parse_args

    backend, _, prefill_tp, decode_tp = system
    trace = load_traffic(scenario_for(WORKLOAD, rate, duration_s, {}))
    requests = [
        {"start_time": float(arrival), "prompt_len": int(prompt), "output_len": int(output)}
        for arrival, prompt, output in zip(
            trace.arrival_s, trace.prompt_tokens, trace.output_tokens
        )
    ]
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(requests, f)
        f.flush()
        ttft_ms, tpot_ms = WORKLOAD["ttft_s"] * 1e3, WORKLOAD["tpot_s"] * 1e3
        args = [
            f"--backend={backend}",
            f"--workload={f.name}",
            "--arrival=custom",
            f"--N={len(requests)}",
            f"--tp-prefill={prefill_tp}",
            f"--tp-decode={decode_tp}",
        ]
        out: dict = {}
        main(parse_args(args), out)
    latency = out["per_request_latency_df"]
    ttft = latency["first_token_latency"] <= ttft_ms
    tpot = latency["tpot"] <= tpot_ms
    return {
        "both": float((ttft & tpot).mean()),
        "ttft": float(ttft.mean()),
        "tpot": float(tpot.mean()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", type=Path, required=True, help="a DistServe checkout")
    parser.add_argument("--duration-s", type=float, default=240.0)
    parser.add_argument(
        "--rates-per-gpu", type=float, nargs="+", default=[0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5]
    )
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/distserve_crosscheck.json"))
    args = parser.parse_args()
    if not (args.artifact / "simdistserve").is_dir():
        parser.error(
            f"--artifact {args.artifact}: no simdistserve/ there; expected a DistServe checkout"
        )
    rows = []
    print("system | req/s per GPU | attainment both / TTFT / TPOT: DistServe's simulator | ours")
    for name, ((layout, schedule, engine), system) in SYSTEMS.items():
        changes = schedule[1] if schedule else {}
        for per_gpu in args.rates_per_gpu:
            rate = per_gpu * system[1]
            them = theirs(args.artifact, system, rate, args.duration_s)
            us = attainments(WORKLOAD, layout, rate, args.duration_s, changes, engine)
            rows.append({"system": name, "rate_per_gpu": per_gpu, "theirs": them, "ours": us})
            shares = [
                " / ".join(f"{side[k]:.1%}" for k in ("both", "ttft", "tpot"))
                for side in (them, us)
            ]
            print(f"{name} | {per_gpu:g} | {shares[0]} | {shares[1]}", flush=True)
    Path(args.out).write_text(
        json.dumps(
            {"machine": describe_machine(), "duration_s": args.duration_s, "rows": rows}, indent=1
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
