"""Our own engine as calibrated: the live-vs-calibrated gap measured on a probe run, and `surgeplan
validate` with and without the `surgeplan` engine profile that models it.

For each Azure trace (conversation, code): capacity run, batch ladder (the workload calibration), then a
probe run at 65% load over requests disjoint from the validated ones (the gap: between-step time,
wake-up after idleness, in-step slowdown), then the validated levels (default 50% and 80%) with
repeats. Prints, per trace, level and metric, the error as calibrated without the profile, with it,
and the live noise floor; the measured gap terms; and (`--write-profile`) writes the mean measured
gap into `simulator/calibration/profiles/surgeplan.json` for `surgeplan validate --own-profile shipped`
to use. Run it on a quiet machine: on a shared one the in-step slowdown is mostly other jobs' load.

    .venv/bin/python benchmarks/live_gap.py                       # 96 requests, 3 repeats, 50% and 80%
    .venv/bin/python benchmarks/live_gap.py --num-requests 32 --repeats 2 --write-profile
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:1] = [str(ROOT)]  # the package `simulator`, not benchmarks/simulator.py

from benchmarks.machine import describe_machine  # noqa: E402
from simulator.calibration.engine_profile import PROFILES_DIR  # noqa: E402
from simulator.validation.live_gap import LiveGap, own_profile  # noqa: E402
from simulator.validation.validate import validate  # noqa: E402

TRACES = {
    "conversation": str(ROOT.parent / "shared/traces/AzureLLMInferenceTrace_conv.csv"),
    "code": str(ROOT.parent / "shared/traces/AzureLLMInferenceTrace_code.csv"),
}
METRICS = ("throughput_rps", "ttft_mean_s", "tpot_mean_s", "e2e_mean_s", "ttft_p99_s", "e2e_p99_s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-requests", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--loads", default="0.5,0.8")
    parser.add_argument("--traces", default="conversation,code")
    parser.add_argument("--write-profile", action="store_true")
    parser.add_argument(
        "--save-steps",
        type=Path,
        default=None,
        help="keep each trace's workload step log here (steps-<trace>.json), for "
        "benchmarks/validate_resimulate.py --steps",
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/live_gap.json"))
    args = parser.parse_args()
    loads = tuple(float(x) for x in args.loads.split(","))
    results, gaps = {}, []
    if args.save_steps is not None:
        args.save_steps.mkdir(parents=True, exist_ok=True)
    print(f"machine: {describe_machine()}")
    for name in args.traces.split(","):
        result = validate(
            "cpu-small",
            TRACES[name],
            args.num_requests,
            256,
            64,
            None,
            loads,
            None,
            "none",
            args.repeats,
            0,
            save_steps=None if args.save_steps is None else args.save_steps / f"steps-{name}.json",
            own="probe",
        )
        results[name] = result
        gap = result["own_profile"]["gap"]
        gaps.append(gap)
        print(
            f"\n{name}: capacity {result['capacity_rps']:.2f} req/s; gap: between steps "
            f"{gap['between_steps_s'] * 1e3:.2f} ms/step, wake-up {gap['wake_s'] * 1e3:.2f} ms "
            f"({gap['wake_ups']} wake-ups), in-step slowdown {gap['kernel_scale']:.3f}x"
        )
        print(f"{'load':>5} {'metric':<16} {'no profile':>11} {'surgeplan':>10} {'noise':>7}")
        for level in result["levels"]:
            plain = level["by_calibration"]["workload"]["relative_error"]
            profiled = level["by_calibration"]["workload+surgeplan"]["relative_error"]
            floor = level["noise_floor"] or {}
            for key in METRICS:
                print(
                    f"{level['load']:>5.0%} {key:<16} {_pct(plain.get(key)):>11} {_pct(profiled.get(key)):>10} "
                    f"{_pct(floor.get(key), sign=False):>7}"
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    if args.write_profile:
        mean = LiveGap(
            **{
                key: (
                    float(np.mean([g[key] for g in gaps]))
                    if key not in ("steps", "wake_ups")
                    else int(sum(g[key] for g in gaps))
                )
                for key in gaps[0]
            }
        )
        profile = own_profile(
            mean,
            f"benchmarks/live_gap.py probe runs ({', '.join(results)}), "
            f"{platform.processor() or platform.machine()}",
        )
        print(f"wrote {profile.save(PROFILES_DIR / 'surgeplan.json')}")


def _pct(value, sign: bool = True) -> str:
    if value is None:
        return "n/a"
    return f"{value:+.1%}" if sign else f"{value:.1%}"


if __name__ == "__main__":
    main()
