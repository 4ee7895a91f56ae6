"""TensorRT-LLM's first tokens on InferenceMAX's Llama-3.1-70B runs: how far off, and what its batch wait does.

InferenceMAX's TensorRT-LLM script (`benchmarks/70b_fp8_b200_trt_*.sh` at 9596d23) sets
`batch_wait_max_tokens_ratio 0.9` and `batch_wait_timeout_iters 20` for 1k / 1k below TP8 only: the
scheduler holds new prompts up to 20 steps while others decode. The two sets replay it
(`engine.core.batch_wait`; those runs carry `batch_wait_steps` 20 and `batch_wait_max_tokens_ratio` 0.9
in their engine settings). This replays every run of the two sets and prints the simulated against the
measured mean TTFT, grouped by prompt length and degree, held runs apart, and the held runs replayed
once more without the wait: what modelling it is worth (docs/measured/real-gpus.md, "TensorRT-LLM's
batch wait, modelled"). Nothing is fitted or stored.

    python benchmarks/trtllm_ttft.py [--json out.json]
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
WAIT_SETTINGS = ("batch_wait_steps", "batch_wait_max_tokens_ratio")


def held(run: dict) -> bool:
    """Whether the run's server held new prompts (its engine settings carry the batch wait)."""
    return run.get("engine_settings", {}).get("batch_wait_steps", 0) > 0


def without_wait(run: dict) -> dict:
    settings = run.get("engine_settings", {})
    return {**run, "engine_settings": {k: v for k, v in settings.items() if k not in WAIT_SETTINGS}}


def replayed_rows(sets=SETS) -> list[tuple[dict, Row, Row | None]]:
    """(the run, its TTFT row, for a held run its TTFT row replayed without the wait) for every run."""
    out = []
    for name in sets:
        data = load_published(name)
        for run in data["runs"]:
            measured = run["measured"][METRIC]

            def row(replayed: dict) -> Row:
                simulated = replay_run(data, replayed)[METRIC]
                return Row(name, run["id"], run["gpu"], run["split"], METRIC,
                           data["engine_profile"], measured, simulated, int(run["tensor_parallel"]))  # fmt: skip

            out.append((run, row(run), row(without_wait(run)) if held(run) else None))
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


def tables(triples: list[tuple[dict, Row, Row | None]]) -> tuple[list[dict], list[dict]]:
    """(the grouped statistics; the runs at TP8 with 1,024-token prompts at the lowest concurrency)."""
    free = [(run, row) for run, row, _ in triples if not held(run)]
    short = [(run, row) for run, row in free if run["nominal_lengths"][0] == 1024]
    groups = {
        "every run": [row for _, row, _ in triples],
        "held prompts (1k / 1k below TP8), the wait modelled": [
            row for run, row, _ in triples if held(run)
        ],
        "the same runs, the wait left out": [bare for _, _, bare in triples if bare is not None],
        "no hold, every one": [row for _, row in free],
        "8,192-token prompts": [row for run, row in free if run["nominal_lengths"][0] == 8192],
        "1,024-token prompts below TP8, no hold": [
            row for _, row in short if row.tensor_parallel < 8
        ],
        "1,024-token prompts at TP8": [row for _, row in short if row.tensor_parallel == 8],
    }
    for degree in sorted({row.tensor_parallel for _, row, _ in triples}):
        groups[f"TP{degree}"] = [row for _, row, _ in triples if row.tensor_parallel == degree]
    for gpu in sorted({row.gpu for _, row, _ in triples}):
        groups[gpu] = [row for _, row, _ in triples if row.gpu == gpu]
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
    header = machine_header("TensorRT-LLM (InferenceMAX) mean TTFT, simulated vs measured")
    print_header(header)
    grouped, floor = tables(replayed_rows())
    print_table(grouped, list(grouped[0]), "Mean TTFT: median |error|, bias, share within 10%")
    print_table(floor, list(floor[0]), "TP8, 1,024-token prompts, fewest in flight (ms)")
    save_json(args.json, header, {"grouped": grouped, "tp8_short_prompts": floor})


if __name__ == "__main__":
    main()
