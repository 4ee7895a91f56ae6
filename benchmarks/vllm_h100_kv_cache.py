"""Did InferenceMAX's vLLM servers hold an fp8 KV cache? Its H100 runs replayed both ways.

InferenceMAX's scripts (vLLM 0.10.2, Llama-3.3-70B fp8) ask for `kv-cache-dtype: fp8` on every GPU.
Two signals in aiconfigurator's silicon rows, which are InferenceMAX's runs, depend on the KV
cache's bytes per token: how many tokens the pool holds (at TP2 on H100 a pool short of a closed
loop's tokens queues new requests for seconds: TTFT) and how many bytes a decode step reads at long
contexts (TPOT). This replays every H100 and H200 run of the two vLLM sets with an fp8 and a bf16
cache (everything else as the set declares) and prints, per GPU, split and metric, the median
|error|, the bias (geometric-mean ratio) and the share within 10%, then the runs whose KV pool binds.
The sets declare what the H100 fit rows choose (docs/measured/real-gpus.md).

    python benchmarks/vllm_h100_kv_cache.py [--json out.json]
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

SETS = ("aic-silicon-vllm-v1-hopper", "aic-silicon-vllm-v1-70b-more-tp")
GPUS = ("H100-80GB", "H200-141GB")
CACHES = {"fp8": "fp8", "bf16": "auto"}  # shown name: kv_cache_dtype
METRICS = ("ttft_mean_s", "tpot_mean_s")
POOL_BOUND = (  # runs whose tokens in flight near or past the pool: TTFT is queueing there
    "h100-llama-3-70b-tp2-1024x8192-c64",
    "h100-llama-3-70b-tp2-8192x1024-c32",
    "h100-llama-3-70b-tp2-8192x1024-c64",
    "h200-llama-3-70b-tp1-1024x8192-c64",
    "h200-llama-3-70b-tp1-8192x1024-c32",
    "h200-llama-3-70b-tp1-8192x1024-c64",
)


def replay_both(data: dict, run: dict) -> dict[str, dict[str, float]]:
    """The run's simulated means with each cache dtype (the run's own other settings kept)."""
    out = {}
    for shown, dtype in CACHES.items():
        settings = run.get("engine_settings", {}) | {"kv_cache_dtype": dtype}
        out[shown] = replay_run(data, run | {"engine_settings": settings})
    return out


def compare(sets=SETS, gpus=GPUS) -> tuple[list[dict], list[dict]]:
    """(one row per GPU, set, split and metric with both caches' statistics; the pool-bound runs)."""
    cells: dict[tuple, dict[str, list[Row]]] = {}
    bound = []
    for name in sets:
        data = load_published(name)
        for run in data["runs"]:
            if run["gpu"] not in gpus:
                continue
            simulated = replay_both(data, run)
            for metric in METRICS:
                key = (run["gpu"], name, run["split"], metric)
                cell = cells.setdefault(key, {shown: [] for shown in CACHES})
                for shown in CACHES:
                    cell[shown].append(
                        Row(name, run["id"], run["gpu"], run["split"], metric, shown,
                            run["measured"][metric], simulated[shown][metric])
                    )  # fmt: skip
            if run["id"] in POOL_BOUND:
                row = {"run": run["id"]}
                for metric in METRICS:
                    row[f"{metric[:4]}_measured"] = run["measured"][metric]
                    for shown in CACHES:
                        row[f"{metric[:4]}_{shown}"] = simulated[shown][metric]
                bound.append(row)
    rows = []
    for (gpu, name, split, metric), cell in sorted(cells.items()):
        row = {"gpu": gpu, "set": name, "split": split, "metric": metric[:4], "n": len(cell["fp8"])}
        for shown, replayed in cell.items():
            entry = stats(replayed)
            row[f"{shown}_median"] = entry.median_abs_error
            row[f"{shown}_bias"] = entry.bias
            row[f"{shown}_within_10"] = entry.within_10pct
        rows.append(row)
    return rows, bound


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the tables here")
    args = parser.parse_args()
    header = machine_header(
        "vLLM 0.10.2 (InferenceMAX) on H100 / H200 replayed with an fp8 and a bf16 KV cache"
    )
    print_header(header)
    rows, bound = compare()
    columns = ["gpu", "set", "split", "metric", "n"] + [
        f"{shown}_{stat}" for shown in CACHES for stat in ("median", "bias", "within_10")
    ]
    print_table(rows, columns, "Error with each KV cache dtype (replayed as the set declares)")
    print_table(bound, list(bound[0]), "Runs whose KV pool binds: measured vs each cache (s)")
    save_json(args.json, header, {"by_split": rows, "pool_bound": bound})


if __name__ == "__main__":
    main()
