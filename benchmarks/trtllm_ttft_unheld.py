"""TensorRT-LLM's first tokens on the runs where its server held no prompts: how far off they are.

The TensorRT-LLM rows of aiconfigurator's silicon table (InferenceMAX's Llama-3.1-70B runs) replay
TPOT only; each run keeps its measured mean TTFT under `not_replayed`. InferenceMAX's TensorRT-LLM
script (`benchmarks/70b_fp8_b200_trt_*.sh` at 9596d23) holds new prompts, `batch_wait_max_tokens_ratio
0.9` and `batch_wait_timeout_iters 20`, for 1k / 1k below TP8 only: the one thing the replay does not
model. This replays every run of the two sets and prints the simulated against the measured mean TTFT,
grouped by prompt length and degree, held runs apart (docs/measured/real-gpus.md, "TensorRT-LLM's first
tokens where its server held no prompts"). Nothing is fitted or stored.

    python benchmarks/trtllm_ttft_unheld.py [--json out.json]
"""

import argparse
import sys
from pathlib import Path

if not __package__:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.bench_utils import machine_header, print_header, print_table, save_json  # noqa: E402
from simulator.validation.published_replay import replay_run  # noqa: E402
from simulator.validation.published_report import Row, stats  # noqa: E402
from simulator.validation.published_sets import load_published  # noqa: E402

SETS = ("aic-silicon-trtllm-70b", "aic-silicon-trtllm-70b-more-tp")
METRIC = "ttft_mean_s"
HELD_LENGTHS, HELD_BELOW_TP = (1024, 1024), 8  # InferenceMAX's script: the prompt hold applies here


def held(run: dict) -> bool:
    """Whether InferenceMAX's server held this run's new prompts (1k / 1k below TP8); a run's
    ISL / OSL are its `nominal_lengths` (its requests' own lengths are drawn below them)."""
    lengths = tuple(run["nominal_lengths"])
    return lengths == HELD_LENGTHS and int(run["tensor_parallel"]) < HELD_BELOW_TP


def replayed_rows(sets=SETS) -> list[tuple[dict, Row]]:
    """(the run, its TTFT row: measured from `not_replayed`, simulated by a replay) for every run."""
    out = []
    for name in sets:
        data = load_published(name)
        for run in data["runs"]:
            measured = run.get("not_replayed", {}).get(METRIC)
            if measured is None:
                continue
            simulated = replay_run(data, run)[METRIC]
            row = Row(name, run["id"], run["gpu"], run["split"], METRIC, data["engine_profile"],
                      measured, simulated, int(run["tensor_parallel"]))  # fmt: skip
            out.append((run, row))
    return out


def group(name: str, rows: list[Row]) -> dict:
    entry = stats(rows)
    return {
        "runs": name,
        "n": entry.rows,
        "median": entry.median_abs_error,
        "bias": entry.bias,
        "within_10": entry.within_10pct,
    }


def tables(pairs: list[tuple[dict, Row]]) -> tuple[list[dict], list[dict]]:
    """(the grouped statistics; the runs at TP8 with 1,024-token prompts at the lowest concurrency)."""
    free = [(run, row) for run, row in pairs if not held(run)]
    short = [(run, row) for run, row in free if run["nominal_lengths"][0] == 1024]
    groups = {
        "no hold, every one": [row for _, row in free],
        "8,192-token prompts": [row for run, row in free if run["nominal_lengths"][0] == 8192],
        "1,024-token prompts below TP8": [row for _, row in short if row.tensor_parallel < 8],
        "1,024-token prompts at TP8": [row for _, row in short if row.tensor_parallel == 8],
    }
    for gpu in sorted({row.gpu for _, row in free}):
        groups[f"{gpu}, no hold"] = [row for _, row in free if row.gpu == gpu]
    groups["held prompts (1k / 1k below TP8)"] = [row for run, row in pairs if held(run)]
    grouped = [group(name, rows) for name, rows in groups.items() if rows]
    lowest = min(run["max_concurrency"] for run, _ in free)
    floor = [
        {"run": row.run, "measured_ms": 1e3 * row.measured, "simulated_ms": 1e3 * row.simulated}
        for run, row in short
        if row.tensor_parallel == 8 and run["max_concurrency"] == lowest
    ]
    return grouped, floor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the tables here")
    args = parser.parse_args()
    header = machine_header(
        "TensorRT-LLM (InferenceMAX) mean TTFT, simulated vs measured, by prompt hold"
    )
    print_header(header)
    grouped, floor = tables(replayed_rows())
    print_table(grouped, list(grouped[0]), "Mean TTFT: median |error|, bias, share within 10%")
    print_table(floor, list(floor[0]), "TP8, 1,024-token prompts, fewest in flight (ms)")
    save_json(args.json, header, {"grouped": grouped, "tp8_short_prompts": floor})


if __name__ == "__main__":
    main()
