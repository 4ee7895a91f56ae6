"""DataCrunch's SGLang sets replayed under vLLM's optimistic admission (what the sets store) and under
SGLang 0.4's own (`admission: new_token_ratio`, engine.core.new_token_ratio), row by row, with each
split's median |error|, bias (geometric-mean ratio) and share within 10%. Diagnosis only: nothing is
fitted or written (the kernel era is the one the `sglang` profile records). No GPU; ~2 minutes.

    .venv/bin/python benchmarks/sglang_admission.py [--json FILE]
"""

import argparse
import copy
import datetime as dt
import json
import sys
from pathlib import Path

# Run as a script, this folder comes first on sys.path, and benchmarks/kernels.py would shadow the
# `kernels` package: put the repository root first instead.
sys.path[:1] = [str(Path(__file__).resolve().parents[1])]

from simulator.validation.published_report import replay, stats  # noqa: E402
from simulator.validation.published_sets import load_published  # noqa: E402

SETS = ("datacrunch-sglang-h200", "datacrunch-sglang-online-h200")
ADMISSIONS = ("optimistic", "new_token_ratio")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="minutes"), "sets": {}}
    for name in SETS:
        data = load_published(name)
        by_admission = {}
        for admission in ADMISSIONS:
            variant = copy.deepcopy(data)
            variant["engine_settings"] = variant.get("engine_settings", {}) | {
                "admission": admission
            }
            by_admission[admission] = replay(variant)
        print(f"{name}: error by admission")
        print(f"{'run':<46} {'metric':<11} " + " ".join(f"{a:>16}" for a in ADMISSIONS))
        for rows in zip(*by_admission.values()):
            print(
                f"{rows[0].run:<46} {rows[0].metric:<11} "
                + " ".join(f"{row.error:>+16.1%}" for row in rows)
            )
        summary = {}
        for admission, rows in by_admission.items():
            each = stats(rows)
            summary[admission] = {
                "median_abs_error": each.median_abs_error,
                "bias": each.bias,
                "within_10pct": each.within_10pct,
            }
            print(
                f"  {admission:<16} median |err| {each.median_abs_error:.1%}  bias {each.bias:.3f}  "
                f"within 10% {each.within_10pct:.0%}"
            )
        result["sets"][name] = {
            "summary": summary,
            "rows": [
                {"run": rows[0].run, "metric": rows[0].metric}
                | {a: row.error for a, row in zip(ADMISSIONS, rows)}
                for rows in zip(*by_admission.values())
            ],
        }
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
