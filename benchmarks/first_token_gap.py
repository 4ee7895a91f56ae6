"""The first-token gap by tensor-parallel degree: measured minus simulated mean TTFT on InferenceMAX's
Llama-3.1-70B runs, per serving stack and GPU, at the fewest requests in flight.

At 4 in flight a first token is mostly one prefill step, so what the simulator leaves out of it shows
plainly in milliseconds. This reads the stored replay (`surgeplan validate --published all --out
benchmarks/results/published_validation.json`), not the simulator, and joins each row to its run's
lengths and concurrency in the published set; runs whose server held new prompts (TensorRT-LLM's batch
wait) are left out, their first tokens being the wait's. It backs docs/measured/real-gpus.md ("The
planner's band by degree": something of ~10-35 ms a first token appears at TP8 in vLLM V1 and
TensorRT-LLM alike). Nothing is fitted or stored in the profiles.

    python benchmarks/first_token_gap.py [--json benchmarks/results/first_token_gap.json]
"""

import argparse
import json
import sys
from pathlib import Path

if not __package__:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.bench_utils import machine_header, print_header, print_table, save_json  # noqa: E402
from benchmarks.trtllm_ttft import held  # noqa: E402
from simulator.validation.published_sets import load_published  # noqa: E402

STORED = Path(__file__).parent / "results" / "published_validation.json"
SETS = (
    "aic-silicon-vllm-v1-hopper",
    "aic-silicon-vllm-v1-b200",
    "aic-silicon-vllm-v1-70b-more-tp",
    "aic-silicon-trtllm-70b",
    "aic-silicon-trtllm-70b-more-tp",
)
METRIC = "ttft_mean_s"


def gap_rows(stored: list[dict], sets=SETS) -> list[dict]:
    """One row per (stack, GPU, prompt / output lengths) at the fewest in flight: each degree's measured
    and simulated mean TTFT (ms) and their difference."""
    runs = {(name, run["id"]): run for name in sets for run in load_published(name)["runs"]}
    cells: dict[tuple, dict[int, tuple[float, float]]] = {}
    fewest = min(run["max_concurrency"] for run in runs.values())
    for result in stored:
        for row in result["rows"]:
            run = runs.get((row["source"], row["run"]))
            if run is None or row["metric"] != METRIC or run["max_concurrency"] != fewest:
                continue
            if held(run):
                continue  # a held prompt's first token is the wait's
            prompt, output = run["nominal_lengths"]
            key = (row["profile"], row["gpu"], f"{prompt} / {output}")
            measured_ms, simulated_ms = 1e3 * row["measured"], 1e3 * row["simulated"]
            cells.setdefault(key, {})[row["tensor_parallel"]] = (measured_ms, simulated_ms)
    table = []
    for (profile, gpu, lengths), by_degree in sorted(cells.items()):
        line = {"profile": profile, "GPU": gpu, "prompt / output": lengths, "in flight": fewest}
        for degree in (1, 2, 4, 8):
            if degree in by_degree:
                measured_ms, simulated_ms = by_degree[degree]
                line[f"TP{degree} measured / simulated / gap (ms)"] = (
                    f"{measured_ms:.0f} / {simulated_ms:.0f} / {measured_ms - simulated_ms:+.0f}"
                )
        table.append(line)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stored", default=str(STORED), help="the saved replay of every set")
    parser.add_argument("--json", help="also write the table here")
    args = parser.parse_args()
    header = machine_header("First-token gap by degree (stored replay, InferenceMAX 70B runs)")
    header["stored"] = Path(args.stored).name
    print_header(header)
    table = gap_rows(json.loads(Path(args.stored).read_text()))
    columns = sorted({column for line in table for column in line}, key=_column_order)
    print_table(table, columns, "Mean TTFT at the fewest in flight, per degree")
    save_json(args.json, header, {"first_token_gap": table})


def _column_order(column: str) -> tuple[int, str]:
    leading = ("profile", "GPU", "prompt / output", "in flight")
    return (leading.index(column), "") if column in leading else (len(leading), column)


if __name__ == "__main__":
    main()
