"""Where the vLLM V1 set's first tokens go missing: each run of `llmk8s-vllm-v1-a100` (held out; vLLM
0.8.3, Llama-3.3-70B TP8, 8x A100-40GB) with its recorded per-request TTFTs (`ttft_s`) and the
simulator's, each fitted as intercept + slope x prompt tokens (least squares over the 200 requests).
A gap in the intercept is latency per request (HTTP, the API-server <-> EngineCore hops, streaming);
a gap in the slope is work per prompt token (tokenising, hashing, the prefill's kernels). Diagnosis
only: nothing is fitted on these held-out rows. No GPU.

    .venv/bin/python benchmarks/v1_ttft_split.py [--profile vllm-v1] [--json FILE]
"""

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

import numpy as np

# Run as a script, this folder comes first on sys.path, and benchmarks/kernels.py would shadow the
# `kernels` package: put the repository root first instead.
sys.path[:1] = [str(Path(__file__).resolve().parents[1])]

from simulator.validation.published_replay import replay_records, source_profile  # noqa: E402
from simulator.validation.published_sets import load_published  # noqa: E402

SET_NAME = "llmk8s-vllm-v1-a100"


def line_fit(prompt_tokens: np.ndarray, ttft_s: np.ndarray) -> tuple[float, float]:
    """(intercept seconds, seconds per prompt token) of TTFT by least squares."""
    design = np.c_[np.ones(len(prompt_tokens)), prompt_tokens]
    intercept_s, per_token_s = np.linalg.lstsq(design, ttft_s, rcond=None)[0]
    return float(intercept_s), float(per_token_s)


def split_run(data: dict, run: dict, profile) -> dict:
    if "ttft_s" not in run:
        raise ValueError(f"{run['id']}: no per-request ttft_s recorded; expected one per request")
    prompts = np.asarray(run["prompt_tokens"], dtype=float)
    measured = np.asarray(run["ttft_s"], dtype=float)
    records, _ = replay_records(data, run, profile)
    simulated = np.array([record.ttft_s for record in records])
    m_intercept, m_slope = line_fit(prompts, measured)
    s_intercept, s_slope = line_fit(prompts, simulated)
    gap_s = float(np.mean(measured - simulated))
    slope_part_s = (m_slope - s_slope) * float(prompts.mean())
    return {
        "run": run["id"],
        "prefix_cached": bool(run.get("prefix_cached")),
        "mean_prompt_tokens": float(prompts.mean()),
        "measured_ms": 1e3 * float(measured.mean()),
        "simulated_ms": 1e3 * float(simulated.mean()),
        "gap_ms": 1e3 * gap_s,
        "measured_intercept_ms": 1e3 * m_intercept,
        "simulated_intercept_ms": 1e3 * s_intercept,
        "measured_us_per_token": 1e6 * m_slope,
        "simulated_us_per_token": 1e6 * s_slope,
        "gap_from_slope_ms": 1e3 * slope_part_s,
        "gap_from_intercept_ms": 1e3 * (m_intercept - s_intercept),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default=None, help="engine profile (default: the set's own)")
    parser.add_argument("--json", type=Path, default=None, help="also write the table here")
    args = parser.parse_args()
    data = load_published(SET_NAME)
    profile = source_profile(data, args.profile)
    rows = [split_run(data, run, profile) for run in data["runs"]]
    print(f"{SET_NAME}, profile {profile.name}: TTFT = intercept + slope x prompt tokens")
    header = (
        f"{'run':<46} {'meas ms':>8} {'sim ms':>7} {'gap ms':>7} | {'icpt m/s ms':>13} "
        f"{'us/token m/s':>14} | {'gap: icpt':>9} {'slope':>6}"
    )
    print(header)
    for row in rows:
        print(
            f"{row['run']:<46} {row['measured_ms']:8.1f} {row['simulated_ms']:7.1f} "
            f"{row['gap_ms']:7.1f} | {row['measured_intercept_ms']:6.1f}/"
            f"{row['simulated_intercept_ms']:<6.1f} {row['measured_us_per_token']:7.1f}/"
            f"{row['simulated_us_per_token']:<6.1f} | {row['gap_from_intercept_ms']:9.1f} "
            f"{row['gap_from_slope_ms']:6.1f}"
        )
    if args.json:
        args.json.write_text(
            json.dumps({"date": dt.date.today().isoformat(), "rows": rows}, indent=1) + "\n"
        )


if __name__ == "__main__":
    main()
