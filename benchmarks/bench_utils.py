"""What the GPU benchmark scripts share: timing, measured ceilings (copy bandwidth, matmul peak), the
hardware header, table printing and JSON output.

On CUDA, times are `triton.testing.do_bench` medians; elsewhere (the `--smoke` runs that check the scripts on
a CPU) a median of a few wall-clock runs, labelled as such in the header.
"""

import datetime
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.machine import describe_machine


def median_seconds(fn: Callable[[], object], device: torch.device, rep_ms: int = 100) -> float:
    if device.type == "cuda":
        import triton.testing

        return triton.testing.do_bench(fn, warmup=25, rep=rep_ms, return_mode="median") / 1e3
    fn()  # warm-up (and, under the interpreter, the first trace)
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def copy_bandwidth_bytes_per_s(device: torch.device, size_bytes: int) -> float:
    """Device-to-device copy: bytes read plus bytes written per second (the achievable memory roofline)."""
    src = torch.empty(size_bytes // 2, dtype=torch.bfloat16, device=device).normal_()
    dst = torch.empty_like(src)
    seconds = median_seconds(lambda: dst.copy_(src), device)
    return 2 * size_bytes / seconds


def matmul_flops_per_s(device: torch.device, size: int, dtype: torch.dtype) -> float:
    """Square matmul throughput: the compute roofline prefill is measured against."""
    a = torch.randn(size, size, dtype=dtype, device=device)
    b = torch.randn(size, size, dtype=dtype, device=device)
    out = torch.empty(size, size, dtype=dtype, device=device)
    seconds = median_seconds(lambda: torch.matmul(a, b, out=out), device)
    return 2 * size**3 / seconds


def machine_header(title: str) -> dict:
    """A table's first line for a run on this machine: the title, the machine and the local time."""
    return {
        "title": title,
        "machine": describe_machine(),  # device, torch version, date
        "time": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


def hardware_header(device: torch.device, title: str) -> dict:
    import triton

    header = machine_header(title) | {
        "triton": triton.__version__,
        "timer": "triton.testing.do_bench median"
        if device.type == "cuda"
        else "wall-clock median of 3 (CPU smoke)",
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        header.update(
            multiprocessors=props.multi_processor_count,
            memory_gib=round(props.total_memory / 2**30, 1),
            cuda=torch.version.cuda,
        )
    return header


def print_header(header: dict) -> None:
    print(f"# {header['title']}")
    print(" · ".join(f"{key}: {value}" for key, value in header.items() if key != "title"))
    print()


def print_table(rows: list[dict], columns: list[str], title: str) -> None:
    """A Markdown table, so it can be pasted into benchmarks/RESULTS.md as printed."""
    print(f"## {title}")
    if not rows:
        print("(no rows)\n")
        return
    cells = [[_format(row.get(column)) for column in columns] for row in rows]
    widths = [
        max(len(column), *(len(line[i]) for line in cells)) for i, column in enumerate(columns)
    ]
    print("| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for line in cells:
        print("| " + " | ".join(c.rjust(w) for c, w in zip(line, widths)) + " |")
    print()


def _format(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def save_json(path: str | None, header: dict, tables: dict[str, list[dict]]) -> None:
    if path:
        Path(path).write_text(json.dumps({"meta": header, **tables}, indent=2))
        print(f"saved {path}")


def int_list(text: str) -> list[int]:
    """'1,4,16' -> [1, 4, 16] for argparse options."""
    try:
        return [int(part) for part in text.split(",") if part]
    except ValueError:
        raise ValueError(
            f"{text!r} is not a comma-separated list of integers, e.g. 1,4,16"
        ) from None
