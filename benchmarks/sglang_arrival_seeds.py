"""How much the rebuilt arrivals of DataCrunch's SGLang online runs matter: each run of
`datacrunch-sglang-online-h200` (the `sglang` profile's fit runs; Llama-3.3-70B TP4, 4x H200) replayed
with its arrivals as rebuilt from `bench_serving`'s numpy seed 1 (what the set stores), then with
Poisson arrivals at the run's rate from other seeds (lengths kept), and each row's error for both.
Were the rebuild wrong, the stored arrivals would fit the recorded durations no better than any
other draw. Diagnosis only: nothing is fitted. No GPU.

    .venv/bin/python benchmarks/sglang_arrival_seeds.py [--seeds 2 3 4 5] [--json FILE]
"""

import argparse
import copy
import datetime as dt
import json
import sys
from pathlib import Path

import numpy as np

# Run as a script, this folder comes first on sys.path, and benchmarks/kernels.py would shadow the
# `kernels` package: put the repository root first instead.
sys.path[:1] = [str(Path(__file__).resolve().parents[1])]

from simulator.validation.published_report import replay  # noqa: E402
from simulator.validation.published_sets import load_published  # noqa: E402

SET_NAME = "datacrunch-sglang-online-h200"


def poisson_arrivals_s(count: int, rate_per_s: float, seed: int) -> list[float]:
    """`count` arrivals at `rate_per_s`, the first at 0 (bench_serving sends before it sleeps)."""
    gaps_s = np.random.default_rng(seed).exponential(1.0 / rate_per_s, size=count)
    return [float(t) for t in np.r_[0.0, np.cumsum(gaps_s[:-1])]]


def errors_by_row(data: dict) -> dict[tuple[str, str], float]:
    return {(row.run, row.metric): row.error for row in replay(data)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[2, 3, 4, 5])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    data = load_published(SET_NAME)
    rebuilt = errors_by_row(data)
    drawn = []
    for seed in args.seeds:
        other = copy.deepcopy(data)
        for run in other["runs"]:
            rate_per_s = float(run["id"].split("-rate")[1].split("-")[0])
            run["arrival_s"] = poisson_arrivals_s(len(run["arrival_s"]), rate_per_s, seed)
        drawn.append(errors_by_row(other))
    rows = [
        {
            "run": run,
            "metric": metric,
            "error_rebuilt": error,
            "error_other_seeds": [each[(run, metric)] for each in drawn],
        }
        for (run, metric), error in rebuilt.items()
    ]
    print(f"{'run':<44} {'metric':<11} {'rebuilt':>8} {'other seeds (min .. max)':>26}")
    for row in rows:
        others = row["error_other_seeds"]
        print(
            f"{row['run']:<44} {row['metric']:<11} {row['error_rebuilt']:>+8.1%} "
            f"{min(others):>+12.1%} .. {max(others):>+8.1%}"
        )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        result = {
            "set": SET_NAME,
            "seeds": args.seeds,
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="minutes"),
            "rows": rows,
        }
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
