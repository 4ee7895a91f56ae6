"""Published replays on worker processes: wall time of the same sets replayed in this process and on N
workers (`surgeplan validate --published --workers`), and whether every row came out the same.

A `--refit` replays a profile's fit runs once per trial of its coordinate search, and `validate
--published all` every stored run, so this loop is most of their time (`all`: 3.5 minutes in one
process on the 2-core VM, 2026-12-07; a refit replays its fit runs once per trial). Each set is
replayed once per worker count and repeat in one process, the counts alternating, and the wall times
are medians over `--repeats`; compare ratios measured in one run (the VM is shared).

    python benchmarks/replay_workers.py [--sets a,b] [--workers 1,2] [--repeats 3]
        [--json benchmarks/results/replay_workers.json]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

if not __package__:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.bench_utils import (  # noqa: E402
    int_list,
    machine_header,
    print_header,
    print_table,
    save_json,
)
from simulator.validation.published_report import replay  # noqa: E402
from simulator.validation.published_sets import load_published  # noqa: E402
from simulator.validation.replay_workers import replay_workers  # noqa: E402

SETS = ("aic-silicon-trtllm-70b", "aic-silicon-vllm-v1-hopper", "argonne-vllm")
WARM_UP = "lambdalabs-vllm"  # 8 short runs: the first set a block replays also starts its workers


def time_sets(sets: list[str], counts: list[int], repeats: int) -> list[dict]:
    """One row per set, and a first row for starting the workers (a replay of `WARM_UP`, as the
    first set of a `validate --published all` pays it): each worker count's median wall seconds and
    speed-up over the first count, and whether every count gave the first count's rows exactly. One
    block of workers per count and repeat serves every set, as one command's does."""
    names = [WARM_UP, *sets]
    data = {name: load_published(name) for name in names}
    seconds = {(name, count): [] for name in names for count in counts}
    rows: dict[tuple[str, int], list] = {}
    for _ in range(repeats):
        for count in counts:
            with replay_workers(count):
                for name in names:
                    start = time.perf_counter()
                    rows[name, count] = replay(data[name])
                    seconds[name, count].append(time.perf_counter() - start)
    table = []
    for name in names:
        base = statistics.median(seconds[name, counts[0]])
        label = f"{name} (starts the workers)" if name == WARM_UP else name
        line: dict = {"set": label, "runs": len(data[name]["runs"])}
        for count in counts:
            median = statistics.median(seconds[name, count])
            line[f"{count} worker(s), s"] = median
            line[f"x{count}"] = base / median
        line["same rows"] = all(rows[name, count] == rows[name, counts[0]] for count in counts)
        table.append(line)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join(SETS), help="published sets, comma-separated")
    parser.add_argument(
        "--workers", type=int_list, default=[1, 2], help="worker counts, first = base"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="also write the table here")
    args = parser.parse_args()
    header = machine_header("Published replays on worker processes")
    print_header(header)
    table = time_sets(args.sets.split(","), args.workers, args.repeats)
    columns = list(table[0])
    print_table(table, columns, "Wall seconds per set (median), speed-up over the first count")
    save_json(args.json, header, {"replay_workers": table})
    if not all(line["same rows"] for line in table):
        sys.exit("a worker count gave rows different from the first count's")


if __name__ == "__main__":
    main()
