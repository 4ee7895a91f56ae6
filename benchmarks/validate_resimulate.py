"""Saved `surgeplan validate` runs simulated again under today's cost model, against the same live
measurements: what a change of the step model does to the error as calibrated, without the live
engine (or the GPU it ran on).

For each saved run (`--run`, a `validate --out` JSON) and the profile it was validated against
(`--profile`, a `surgeplan profile --out` JSON, points included) or the step log its workload
calibration was fitted on (`--steps`, `validate --save-steps`, `live_gap.py --save-steps`): the
points or steps are fitted again with today's fit (its terms as they are now), the run's requests are read again
from its trace (the first N with output, as `validate` took them: `--trace`, default the run's own),
each load level's arrivals are rescaled exactly as the run did (its capacity and load), and the
simulator runs them on one replica with the run's engine settings and KV pool. Printed per level
and metric: measured (the mean of the live repeats, from the file), the error the run recorded,
and the error now. Nothing live runs here: the live side is the file's.

    python benchmarks/validate_resimulate.py \\
        --run benchmarks/results/validate-h200-conv.json \\
        --profile benchmarks/results/profile-h200-llama-3-8b.json \\
        --trace ../shared/traces/AzureLLMInferenceTrace_conv.csv [--json out.json]
"""

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

if not __package__:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from simulator.calibration.cost_fit import fit_calibration  # noqa: E402
from simulator.calibration.from_steps import calibration_from_steps  # noqa: E402
from simulator.calibration.live_run import LiveRequests  # noqa: E402
from simulator.calibration.schema import Calibration, EngineSettings  # noqa: E402
from simulator.validation.compare import relative_errors, summary_of  # noqa: E402
from simulator.validation.simulated_run import simulate_like  # noqa: E402
from simulator.validation.workload import at_load, prepare_requests  # noqa: E402

METRICS = (
    "throughput_rps",
    "ttft_mean_s",
    "tpot_mean_s",
    "e2e_mean_s",
    "ttft_p99_s",
    "tpot_p99_s",
    "e2e_p99_s",
)
SETTINGS = ("block_size", "max_num_seqs", "max_num_batched_tokens", "max_model_len")


def resimulate(
    run: dict,
    calibration: Calibration,
    trace: str | Path,
    max_prompt_tokens: int = 256,
    max_output_tokens: int = 64,
    recorded: str | None = None,
) -> list[dict]:
    """Per load level of `run`: {load, metric: (measured, error recorded, error now)}. The length
    limits are `validate`'s (its file does not record them): the requests' mean lengths must match
    the run's, or this raises. `recorded`: compare with the errors the run recorded under this
    calibration (`by_calibration`, e.g. `workload`) rather than under the one it used."""
    engine = run["engine"]
    missing = [key for key in SETTINGS + ("num_kv_blocks",) if key not in engine]
    if missing:
        raise ValueError(
            f"the run's engine block lacks {missing}; expected a `validate --out` JSON"
        )
    settings = EngineSettings(**{key: engine[key] for key in SETTINGS}, enable_prefix_caching=False)
    # what `simulate_like` reads of a live engine: its settings and KV pool (nothing runs live here)
    live = SimpleNamespace(settings=settings, num_kv_blocks=engine["num_kv_blocks"])
    arrival, prompt, output, _ = prepare_requests(
        trace,
        run["trace"]["requests"],
        max_prompt_tokens,
        max_output_tokens,
        None,
        settings.max_model_len,
    )
    got = (len(arrival), float(prompt.mean()), float(output.mean()))
    want = tuple(
        run["trace"][key] for key in ("requests", "mean_prompt_tokens", "mean_output_tokens")
    )
    if any(abs(a - b) > 1e-9 for a, b in zip(got, want)):
        raise ValueError(
            f"{trace}: requests, mean prompt and output tokens {got}; the run had {want}; expected "
            "the run's trace and its --max-prompt-tokens / --max-output-tokens"
        )
    rows = []
    for level in run["levels"]:
        offsets, _rate = at_load(arrival, run["capacity_rps"], level["load"])
        records, end, kv = simulate_like(live, calibration, LiveRequests(offsets, prompt, output))
        now = relative_errors(level["measured"], summary_of(records, end, kv))
        before = (
            level["relative_error"]
            if recorded is None
            else level["by_calibration"][recorded]["relative_error"]
        )
        rows.append(
            {"load": level["load"]}
            | {
                metric: (level["measured"][metric], before[metric], now[metric])
                for metric in METRICS
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", type=Path, required=True, help="a `surgeplan validate --out` JSON")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--profile", type=Path, help="the `surgeplan profile --out` JSON it used")
    source.add_argument("--steps", type=Path, help="the step log of its workload calibration")
    parser.add_argument(
        "--recorded",
        default=None,
        help="compare with the run's errors under this calibration (e.g. workload)",
    )
    parser.add_argument("--trace", type=Path, default=None, help="default: the run's own")
    parser.add_argument("--max-prompt-tokens", type=int, default=256, help="as the run had")
    parser.add_argument("--max-output-tokens", type=int, default=64, help="as the run had")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()
    run = json.loads(args.run.read_text())
    if args.steps is not None:
        refit, fitted_on = calibration_from_steps(args.steps), args.steps.name
    else:
        profile = Calibration.load(args.profile)
        if not profile.points:
            raise SystemExit(
                f"--profile {args.profile}: no points to fit; expected a profile's output"
            )
        refit, fitted_on = fit_calibration(profile), args.profile.name
    error = refit.cost_model.fit_errors[0]
    print(
        f"{args.run}: {run['trace']['requests']} requests of {run['trace']['name']}; "
        f"{fitted_on} refitted: MAPE {error.mape_train:.1%} ({error.mape_cross_validated:.1%} "
        f"held out), terms {[t.feature for t in refit.cost_model.terms if t.seconds_per_unit]}"
    )
    rows = resimulate(
        run,
        refit,
        args.trace or run["trace"]["path"],
        args.max_prompt_tokens,
        args.max_output_tokens,
        args.recorded,
    )
    for row in rows:
        print(f"\nload {row['load']:.0%}    measured   error as run   error now")
        for metric in METRICS:
            measured, before, now = row[metric]
            shown = f"{measured * 1e3:9.1f} ms" if metric.endswith("_s") else f"{measured:12.3g}"
            print(f"{metric:<16}{shown}{before:>+14.1%}{now:>+12.1%}")
    if args.json:
        args.json.write_text(json.dumps({"run": str(args.run), "levels": rows}, indent=1))


if __name__ == "__main__":
    main()
