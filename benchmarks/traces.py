"""Trace speed targets: load the Azure conversation trace (≤ 0.5 s), generate 1M spike requests (≤ 2 s).

Run: .venv/bin/python benchmarks/traces.py [--repeats 5] [--json results.json]
Prints a table with the hardware and date; the figures go in docs/measured/traffic.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from traces import load_trace  # noqa: E402
from traces.arrivals import PoissonArrivals, SpikeArrivals  # noqa: E402
from traces.lengths import PresetLength  # noqa: E402
from traces.stats import compute_stats  # noqa: E402
from traces.synthetic import SyntheticTraceSpec, synthesize  # noqa: E402
from traces.tokens import PromptTokenSynthesizer  # noqa: E402

CONV = ROOT / ".." / "shared" / "traces" / "AzureLLMInferenceTrace_conv.csv"
SPIKE_REQUESTS = 1_000_000
# 1,000 req/s baseline with a 10x surge (30 s up, 60 s hold, 30 s down): ~1.05M arrivals in 240 s.
SPIKE_SPEC = SyntheticTraceSpec(
    arrivals=SpikeArrivals(
        base=PoissonArrivals(rate_per_s=1000.0),
        multiplier=10.0,
        start_s=60.0,
        ramp_up_s=30.0,
        hold_s=60.0,
        ramp_down_s=30.0,
    ),
    prompt=PresetLength(name="azure-conv-prompt"),
    output=PresetLength(name="azure-conv-output"),
    duration_s=240.0,
    seed=0,
    max_requests=SPIKE_REQUESTS,
)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def timed(action, repeats: int) -> tuple[float, float, object]:
    """Median wall time and median CPU time over `repeats` runs, and the last result.

    CPU time is shown beside wall time because the benchmark machine may be shared.
    """
    wall, cpu, result = [], [], None
    for _ in range(repeats):
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        result = action()
        wall.append(time.perf_counter() - start_wall)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu), result


def row(operation: str, size: str, timing: tuple, target_s: float | None = None) -> dict:
    return {
        "operation": operation,
        "size": size,
        "median_s": timing[0],
        "cpu_s": timing[1],
        "target_s": target_s,
    }


def measure(repeats: int) -> list[dict]:
    load = timed(lambda: load_trace(CONV), repeats)
    conv = load[2]
    spike_timing = timed(lambda: synthesize(SPIKE_SPEC), repeats)
    spike = spike_timing[2]
    assert len(spike) == SPIKE_REQUESTS, len(spike)
    size = f"{len(spike):,} requests"
    rows = [
        row("load Azure conv CSV", f"{len(conv):,} requests", load, 0.5),
        row("generate spike trace (Poisson 10x, Azure conv lengths)", size, spike_timing, 2.0),
        row("statistics of the spike trace", size, timed(lambda: compute_stats(spike), repeats)),
    ]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "spike.jsonl"
        rows.append(row("save canonical JSONL", size, timed(lambda: spike.save(path), 1)))
        rows.append(row("load canonical JSONL", size, timed(lambda: load_trace(path), 1)))
    synth = PromptTokenSynthesizer(vocab_size=32_000, seed=0)
    tokens = timed(lambda: [synth.prompt_token_ids(conv, i) for i in range(1000)], repeats)
    total = int(conv.prompt_tokens[:1000].sum())
    rows.append(row("prompt token ids, first 1,000 conv requests", f"{total:,} tokens", tokens))
    return rows


def print_table(rows: list[dict], repeats: int, header: str) -> None:
    table = Table(title=header)
    for column in ("operation", "size", "median wall", "median CPU", "target", "met"):
        table.add_column(column, justify="left" if column in ("operation", "size") else "right")
    for entry in rows:
        target = entry["target_s"]
        met = "" if target is None else ("yes" if entry["median_s"] <= target else "NO")
        table.add_row(
            entry["operation"],
            entry["size"],
            f"{entry['median_s'] * 1000:,.0f} ms",
            f"{entry['cpu_s'] * 1000:,.0f} ms",
            "" if target is None else f"≤ {target * 1000:,.0f} ms",
            met,
        )
    console = Console(width=140)  # wide enough for the table when piped to a file
    console.print(table)
    console.print(f"median of {repeats} runs (save/load JSONL: 1 run)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the rows and the header here")
    args = parser.parse_args()
    header = (
        f"surgeplan traces benchmark · {dt.datetime.now():%Y-%m-%d %H:%M} · {cpu_name()} · "
        f"{os.cpu_count()} logical CPUs · Python {platform.python_version()} · "
        f"numpy {np.__version__}"
    )
    rows = measure(args.repeats)
    print_table(rows, args.repeats, header)
    if args.json is not None:
        args.json.write_text(
            json.dumps({"header": header, "repeats": args.repeats, "rows": rows}, indent=2)
        )


if __name__ == "__main__":
    main()
