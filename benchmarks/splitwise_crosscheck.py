"""Splitwise's own simulator (splitwise-sim) end to end: its designs' throughput under Splitwise's SLO,
judged as Splitwise's notebooks judge it, on requests made as its trace generator makes them or on the
very requests our anchor gives ours (`benchmarks/splitwise_anchor.py`), with our simulator beside it.

Why: our anchor reproduces Splitwise's coding result and not its conversation one, even on Splitwise's
measured steps (docs/measured/disaggregation.md, Splitwise anchor). If Splitwise's own simulator, run here on the same fleets,
finds what ours finds, the published figure is not what its simulator gives for that workload; where the
two differ, the difference is in how we simulate, and the table says by how much.

- Their side: `run.py` of a splitwise-sim checkout (github.com/Mutinifni/splitwise-sim, MIT; run, never
  copied here), Llama-2-70B TP8 on DGX-A100 / DGX-H100 (`performance_model=db`, its characterization),
  Baseline-H100 co-located (`token_jsq`, `start_state=baseline`), Splitwise-HA (H100 prompt + A100 token
  machines) and Splitwise-HH (H100 both) with its mixed pool scheduler (`mixed_pool`), as its
  `scripts/run_*.sh` run them. Its `configs/config.yaml` names Ray as the launcher; the checkout must
  have that line and the `launcher:` block removed to run one process (nothing else changes).
- Requests (`--requests`): `splitwise`, Poisson arrivals with lengths drawn with replacement from the
  Azure 2023 trace's `ContextTokens` / `GeneratedTokens` (../shared/traces), as its `generate_trace.py`
  draws them (no clipping; prompts to 14,050 tokens); or `ours`, the anchor's scenario at that rate
  (`load_traffic`: the shipped length tables, Llama-2's 4,096-token context clipped), which is also what
  `--ours STEP_MODEL` replays through our simulator (`splitwise_anchor.run`).
- Judge, Splitwise's notebooks' (`benchmarks/splitwise_notebook_slo.py`): slowdowns against the
  characterization's DGX-A100 TP8 times at each request's prompt size; a run that did not complete
  every request misses.
- Throughput: as the notebooks read it, the highest rate on a grid (`--fine`, 10 req/s) at which all
  nine limits hold: the grid is walked in `--coarse` steps to the first miss, then in fine steps above
  the last hold. `--rates`: no search, each limit's margin (slowdown over limit) at those rates.

    git clone https://github.com/Mutinifni/splitwise-sim /tmp/sws  # 8f99e7d was run
    # drop Ray: the `- override hydra/launcher: ray` line and the `launcher:` block at the end
    sed -i -e '/override hydra\\/launcher: ray/d' -e '/^  launcher:/,$d' /tmp/sws/configs/config.yaml
    python -m venv /tmp/sws/.venv && /tmp/sws/.venv/bin/pip install hydra-core==1.3.2 pandas scipy networkx
    .venv/bin/python benchmarks/splitwise_crosscheck.py --splitwise-sim /tmp/sws \\
        --workload conv --design base:40 --design ha:25:15

Prints a table and writes benchmarks/results/splitwise_crosscheck.json (`--out`).
"""

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

# Run as a script (not imported by a test), the repo root, not benchmarks/, goes first on the path.
if not __package__:
    sys.path[:1] = [str(Path(__file__).resolve().parents[1])]

from benchmarks import splitwise_anchor as anchor  # noqa: E402
from benchmarks.machine import describe_machine  # noqa: E402
from benchmarks.splitwise_notebook_slo import (  # noqa: E402
    NotebookReference,
    Served,
    highest_grid_rate,
    slo_margins,
)
from benchmarks.splitwise_requests import (  # noqa: E402
    AZURE,
    WORKLOAD_NAMES,
    Requests,
    anchor_requests,
    splitwise_requests,
    write_trace,
)

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("base", "basev0", "ha", "hh")
# our co-located baseline's steps: vLLM V1's order (running decodes first, prompt chunks beside them)
# or, `basev0`, vLLM V0's (whole prompts first, prefill-only steps); splitwise-sim runs its one baseline
BASELINE_STEPS = {"base": anchor.MIXED, "basev0": anchor.V0}


def parse_design(text: str) -> tuple[str, int, int]:
    """`base:N` / `basev0:N` (N co-located DGX-H100s; ours with V1- / V0-order steps), `ha:X:Y` /
    `hh:X:Y` (X H100 prompt machines, Y A100 / H100 token machines)."""
    parts = text.split(":")
    colocated = parts[0] in BASELINE_STEPS
    if parts[0] not in FAMILIES or len(parts) != (2 if colocated else 3):
        raise ValueError(
            f"--design {text!r}: expected base:N, basev0:N, ha:X:Y or hh:X:Y (machine counts)"
        )
    counts = [int(p) for p in parts[1:]] + [0]
    if min(counts[:-1] if colocated else counts[:2]) < 1:
        raise ValueError(f"--design {text!r}: machine counts must be >= 1")
    return parts[0], counts[0], counts[1]


def sim_overrides(design: tuple[str, int, int]) -> list[str]:
    """splitwise-sim's Hydra overrides for a design, as its scripts/run_*.sh set them."""
    family, x, y = design
    common = [
        "applications.0.model_architecture=llama2-70b",
        "applications.0.model_size=llama2-70b-fp16",
        "cluster=half_half",
        "performance_model=db",
        "seed=0",
    ]
    if family in BASELINE_STEPS:
        return common + [
            "applications.0.scheduler=token_jsq",
            "cluster.servers.0.count=0",
            f"cluster.servers.1.count={x}",
            "start_state=baseline",
        ]
    split = ["applications.0.scheduler=mixed_pool", "start_state=splitwise"]
    if family == "ha":
        return (
            common
            + split
            + [
                f"cluster.servers.0.count={y}",
                f"cluster.servers.1.count={x}",
                "start_state.split_type=heterogeneous",
            ]
        )
    return (
        common
        + split
        + [
            "cluster.servers.0.count=0",
            f"cluster.servers.1.count={x + y}",
            f"start_state.prompt.num_instances={x}",
            f"start_state.token.num_instances={y}",
        ]
    )


def theirs(checkout: Path, python: str, design, requests: Requests) -> Served:
    """One splitwise-sim run of `design` on `requests`."""
    with tempfile.TemporaryDirectory() as folder:
        name = f"surgeplan_crosscheck_{Path(folder).name}"
        trace = checkout / "traces" / f"{name}.csv"
        write_trace(trace, requests)
        try:
            subprocess.run(
                [
                    python,
                    "run.py",
                    *sim_overrides(design),
                    f"trace.filename={name}",
                    f"hydra.run.dir={folder}/out",
                ],
                cwd=checkout,
                check=True,
                capture_output=True,
                text=True,
            )
        except subprocess.CalledProcessError as error:
            raise RuntimeError(
                f"splitwise-sim in {checkout} failed on {design}: {error.stderr[-2000:]}"
            ) from error
        finally:
            trace.unlink(missing_ok=True)
        with open(f"{folder}/out/detailed/0.csv") as f:
            rows = list(csv.DictReader(f))
    column = lambda key: np.array([float(row[key]) for row in rows])  # noqa: E731
    return Served(
        column("prompt_sizes"),
        column("token_sizes"),
        column("ttft_times"),
        column("response_times"),
        len(requests.arrival_s),
    )


def ours(kind: str, design, rate: float, duration_s: float, step_model: str) -> Served:
    """Our simulator on the anchor's requests at `rate`, the design as the anchor builds it."""
    from benchmarks.goodput_search import scenario_for
    from benchmarks.splitwise_rows import measured_step_model

    family, x, y = design
    if family in BASELINE_STEPS:
        steps = BASELINE_STEPS[family]
        chosen = anchor.colocated_design("Baseline-H100", x, anchor.H100, steps, "splitwise")
    else:
        token_gpu = anchor.A100 if family == "ha" else anchor.H100
        chosen = anchor.split_design(family, x, anchor.H100, y, token_gpu, "splitwise")
        chosen = replace(chosen, mixed_pool=anchor.SPLITWISE_QUEUE_TOKENS)
    with tempfile.TemporaryDirectory() as folder:
        files = {
            "shipped": lambda: None,
            "splitwise-measured": lambda: measured_step_model(Path(folder)),
            "splitwise-sim": lambda: measured_step_model(Path(folder), as_simulated=True),
        }[step_model]()
        workload = anchor.WORKLOADS[WORKLOAD_NAMES[kind]]
        result = anchor.run(workload, chosen, rate, duration_s, scenario_for, files)
    done = [r for r in result.records if r.ok]
    return Served(
        np.array([r.prompt_tokens for r in done], dtype=float),
        np.array([r.expected_output_tokens for r in done], dtype=float),
        np.array([r.ttft_s for r in done]),
        np.array([r.e2e_s for r in done]),
        len(result.records),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--splitwise-sim", type=Path, required=True, help="a splitwise-sim checkout"
    )
    parser.add_argument(
        "--python", default=None, help="its interpreter (default: <checkout>/.venv/bin/python)"
    )
    parser.add_argument("--workload", choices=sorted(AZURE), required=True)
    parser.add_argument(
        "--design", action="append", required=True, help="base:N, basev0:N, ha:X:Y, hh:X:Y"
    )
    parser.add_argument("--requests", choices=["splitwise", "ours"], default="splitwise")
    parser.add_argument(
        "--ours",
        choices=["shipped", "splitwise-measured", "splitwise-sim"],
        default=None,
        help="also our simulator on the same requests with this step model (needs --requests ours)",
    )
    parser.add_argument(
        "--rates",
        type=float,
        nargs="+",
        default=None,
        help="only these rates (req/s): every limit's margin printed per simulator, no search",
    )
    parser.add_argument("--duration-s", type=float, default=120.0)
    parser.add_argument("--coarse", type=int, default=40)
    parser.add_argument("--fine", type=int, default=10)
    parser.add_argument("--top", type=int, default=400)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/splitwise_crosscheck.json"))
    args = parser.parse_args()
    checkout = args.splitwise_sim
    perf = checkout / "data" / "perf_model.csv"
    if not (checkout / "run.py").is_file() or not perf.is_file():
        parser.error(f"--splitwise-sim {checkout}: no run.py or data/perf_model.csv there")
    if args.ours and args.requests != "ours":
        parser.error("--ours replays the anchor's requests: add --requests ours")
    python = args.python or str(checkout / ".venv" / "bin" / "python")
    designs = [parse_design(text) for text in args.design]
    reference = NotebookReference(perf)
    make = {
        # seeded with the rate's whole part, as its generator's sweeps draw one stream a rate
        "splitwise": lambda rate: splitwise_requests(
            args.workload, rate, args.duration_s, seed=int(rate)
        ),
        "ours": lambda rate: anchor_requests(args.workload, rate, args.duration_s),
    }[args.requests]
    runs: dict = {}  # splitwise-sim runs by (its overrides, rate): base and basev0 are one run there

    def sim(design, rate):
        key = (tuple(sim_overrides(design)), rate)
        if key not in runs:
            runs[key] = theirs(checkout, python, design, make(rate))
        return runs[key]

    sides = {"splitwise-sim": sim}
    if args.ours:
        sides[f"surgeplan ({args.ours} steps)"] = lambda design, rate: ours(
            args.workload, design, rate, args.duration_s, args.ours
        )
    rows = []
    for design in designs:
        for side, serve in sides.items():
            started = time.perf_counter()
            if args.rates:
                for rate in args.rates:
                    margins = slo_margins(serve(design, rate), reference)
                    rows.append(
                        {
                            "design": list(design),
                            "simulator": side,
                            "rate": rate,
                            "seconds": round(time.perf_counter() - started),
                            "margins": margins,
                        }
                    )
                    shown = " ".join(f"{k} {v:.2f}" for k, v in margins.items())
                    print(
                        f"{args.workload} | {design[0]} {design[1]}P{design[2]}D | {side} | "
                        f"{rate:g} req/s | {shown}",
                        flush=True,
                    )
                continue

            def holds(rate: int, design=design, serve=serve, side=side) -> dict:
                margins = slo_margins(serve(design, rate), reference)
                worst = max(margins, key=margins.get)
                print(
                    f"  {side} {design} {rate} req/s: worst {worst} {margins[worst]:.2f}",
                    file=sys.stderr,
                    flush=True,
                )
                return margins

            rate, tried = highest_grid_rate(holds, args.coarse, args.fine, args.top)
            rows.append(
                {
                    "design": list(design),
                    "simulator": side,
                    "max_rate": rate,
                    "seconds": round(time.perf_counter() - started),
                    "tried": tried,
                }
            )
            print(
                f"{args.workload} | {design[0]} {design[1]}P{design[2]}D | {side} | {rate} req/s",
                flush=True,
            )
    out = {
        "machine": describe_machine(),
        "workload": args.workload,
        "requests": args.requests,
        "duration_s": args.duration_s,
        "grid": None if args.rates else {"coarse": args.coarse, "fine": args.fine, "top": args.top},
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
