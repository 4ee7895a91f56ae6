"""The simulator's error against the live engine, for the README: `cpu-small` on this CPU at 50%, 80%
and 110% of capacity, on the Azure conversation trace (lengths clipped to fit) and on the Azure code
trace, which no calibration here was fitted on. Prints each table (`surgeplan validate`'s) and writes
benchmarks/results/validate.json (the conversation run, which the dashboard shows) and
validate-code.json. Targets: throughput within 3%, mean TTFT / TPOT / E2E within 5%, P99 within 10%.
"""
import argparse
import json
import tempfile
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:1] = [str(ROOT)]

from benchmarks.machine import describe_machine  # noqa: E402
from simulator.calibration.from_steps import calibration_from_steps  # noqa: E402
from simulator.validation.cli import format_result  # noqa: E402
from simulator.validation.validate import validate  # noqa: E402

TRACES = ROOT.parent / "shared" / "traces"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-requests", type=int, default=96)
    parser.add_argument("--max-prompt-tokens", type=int, default=256)
    parser.add_argument("--max-output-tokens", type=int, default=64)
    parser.add_argument("--load-levels", default="0.5,0.8,1.1")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--via", default="engine")
    args = parser.parse_args()
    levels = tuple(float(x) for x in args.load_levels.split(","))
    print(describe_machine())
    out_dir = ROOT / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    steps = Path(tempfile.mkdtemp(prefix="surgeplan-validate-")) / "conv-steps.json"
    fitted_on_conv = out_dir / "validate-conv-calibration.json"
    for name, file, out in (("conversation", "AzureLLMInferenceTrace_conv.csv", "validate.json"),
                            ("code, with the calibration fitted on the conversation run",
                             "AzureLLMInferenceTrace_code.csv", "validate-code.json")):
        given = fitted_on_conv if out == "validate-code.json" else None
        result = validate("cpu-small", TRACES / file, args.num_requests, args.max_prompt_tokens, args.max_output_tokens,
                          None, levels, given, args.profile if given is None else "none", args.repeats, via=args.via,
                          save_steps=steps if given is None else None,
                          progress=lambda message: print(f"  .. {message}", file=sys.stderr))
        if given is None and steps.exists():
            calibration_from_steps(steps).save(fitted_on_conv)
        (out_dir / out).write_text(json.dumps(result, indent=1))
        print(f"\n=== Azure {name} ===")
        print(format_result(result))


if __name__ == "__main__":
    main()
