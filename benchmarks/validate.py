"""The simulator's error against the live engine, for docs/measured/simulator-vs-live.md: `cpu-small` on this CPU at 50%, 80%
and 110% of capacity, on the Azure conversation trace (lengths clipped to fit) and on the Azure code
trace, which no calibration here was fitted on; then (--http-levels) the conversation trace again
through `surgeplan serve` and the replay client, so the HTTP path's own cost (parsing, streaming,
thread hand-offs) shows as the difference from the in-process errors. Prints each table (`surgeplan
validate`'s) and writes benchmarks/results/validate.json (the conversation run, which the dashboard
shows), validate-code.json and validate-http.json. Targets: throughput within 3%, mean TTFT / TPOT /
E2E within 5%, P99 within 10%.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:1] = [str(ROOT)]

from benchmarks.machine import describe_machine  # noqa: E402
from simulator.calibration.from_steps import calibration_from_steps  # noqa: E402
from simulator.validation.cli import format_result  # noqa: E402
from simulator.validation.validate import validate  # noqa: E402

TRACES = ROOT.parent / "shared" / "traces"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--num-requests", type=int, default=96)
    parser.add_argument("--max-prompt-tokens", type=int, default=256)
    parser.add_argument("--max-output-tokens", type=int, default=64)
    parser.add_argument("--load-levels", default="0.5,0.8,1.1")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--profile",
        default="full",
        help="grid profiled for the conversation run: full (sized to the engine) or quick",
    )
    parser.add_argument("--http-levels", default="0.5,0.8", help="load levels over HTTP")
    parser.add_argument(
        "--sections",
        default="conv,code,http",
        help="which runs: conv (fits the calibration the others use), code, http",
    )
    parser.add_argument(
        "--table-only",
        action="store_true",
        help="print the docs/measured table from the saved results",
    )
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    out_dir = ROOT / "benchmarks" / "results"
    if args.table_only:
        print(readme_table(out_dir))
        return
    levels = tuple(float(x) for x in args.load_levels.split(","))
    print(describe_machine())
    out_dir.mkdir(parents=True, exist_ok=True)
    steps = Path(tempfile.mkdtemp(prefix="surgeplan-validate-")) / "conv-steps.json"
    fitted_on_conv = out_dir / "validate-conv-calibration.json"
    runs = {
        "conv": (
            "conversation",
            "AzureLLMInferenceTrace_conv.csv",
            "validate.json",
            levels,
            "engine",
        ),
        "code": (
            "code, with the calibration fitted on the conversation run",
            "AzureLLMInferenceTrace_code.csv",
            "validate-code.json",
            levels,
            "engine",
        ),
        "http": (
            "conversation over HTTP (surgeplan serve + replay client), calibration fitted on the in-process "
            "conversation run",
            "AzureLLMInferenceTrace_conv.csv",
            "validate-http.json",
            tuple(float(x) for x in args.http_levels.split(",")),
            "http",
        ),
    }
    if sections - set(runs):
        parser.error(f"--sections {args.sections}; expected some of {', '.join(runs)}")
    if "conv" not in sections and not fitted_on_conv.is_file():
        parser.error(f"{fitted_on_conv} is absent; run the conv section first")
    for name, file, out, run_levels, via in (runs[key] for key in runs if key in sections):
        given = None if out == "validate.json" else fitted_on_conv
        result = validate(
            "cpu-small",
            TRACES / file,
            args.num_requests,
            args.max_prompt_tokens,
            args.max_output_tokens,
            None,
            run_levels,
            given,
            args.profile if given is None else "none",
            args.repeats,
            via=via,
            save_steps=steps if given is None else None,
            progress=lambda message: print(f"  .. {message}", file=sys.stderr),
        )
        if given is None and steps.exists():
            calibration_from_steps(steps).save(fitted_on_conv)
        (out_dir / out).write_text(json.dumps(result, indent=1))
        print(f"\n=== Azure {name} ===")
        print(format_result(result))
    print("\n" + readme_table(out_dir))


TABLE_METRICS = (
    ("throughput", "throughput_rps"),
    ("mean TTFT", "ttft_mean_s"),
    ("mean TPOT", "tpot_mean_s"),
    ("mean E2E", "e2e_mean_s"),
    ("P99 TTFT", "ttft_p99_s"),
    ("P99 E2E", "e2e_p99_s"),
)
TABLE_FILES = (
    ("conversation", "validate.json"),
    ("code (calibration from conversation)", "validate-code.json"),
    ("conversation over HTTP", "validate-http.json"),
)


def readme_table(out_dir: Path) -> str:
    """Markdown: per trace and load, each metric's error as calibrated / at run speed, and its noise floor."""

    def cell(level: dict, key: str) -> str:
        plain = level["relative_error"].get(key)
        speed = ((level.get("at_run_speed") or {}).get("relative_error") or {}).get(key)
        floor = (level.get("noise_floor") or {}).get(key)
        text = "n/a" if plain is None else f"{plain:+.1%}"
        text += "" if speed is None else f" / {speed:+.1%}"
        return text + ("" if floor is None else f" (±{floor:.0%})")

    lines = [
        "| trace | load | "
        + " | ".join(name for name, _ in TABLE_METRICS)
        + " | host speed vs model |",
        "| --- | --- | " + " | ".join("---" for _ in TABLE_METRICS) + " | --- |",
    ]
    for trace, file in TABLE_FILES:
        path = out_dir / file
        if not path.is_file():
            continue
        for level in json.loads(path.read_text())["levels"]:
            speeds = ((level.get("error_sources") or {}).get("live_over_model_step_time")) or []
            lines.append(
                f"| {trace} | {level['load']:.0%} | "
                + " | ".join(cell(level, key) for _, key in TABLE_METRICS)
                + " | "
                + (" / ".join(f"{s:.2f}x" for s in speeds if s) or "n/a")
                + " |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
