"""Calibration quality, as tables: the shipped GPU fits against the public tables they came from,
their predictions next to first-principles rooflines (and the H200 derived from the H100), and
(with --profile) a CPU profile of `cpu-small` through our own engine with its held-out fit error.

    .venv/bin/python benchmarks/calibration.py [--profile] [--full] [--json out.json]
"""

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path

# Run as a script, this folder comes first on sys.path, and benchmarks/kernels.py would shadow the
# `kernels` package: put the repository root first instead.
# (Only when run as a script: imported by a test, the path stays as pytest set it.)
if not __package__:
    sys.path[:1] = [str(Path(__file__).resolve().parents[1])]

from engine.core.step_shape import StepShape  # noqa: E402
from simulator.calibration.cost_fit import fit_calibration  # noqa: E402
from simulator.calibration.cost_model import CostModel  # noqa: E402
from simulator.calibration.roofline import roofline_calibration  # noqa: E402
from simulator.calibration.schema import Calibration, shipped_calibration_paths  # noqa: E402
from simulator.hardware.catalog import get_hardware  # noqa: E402

SHAPES = {
    "decode b1 c512": StepShape(decode_context_lens=(512,)),
    "decode b64 c1024": StepShape(decode_context_lens=(1024,) * 64),
    "prefill 512": StepShape(prefill_chunks=((512, 0),)),
    "prefill 2048": StepShape(prefill_chunks=((2048, 0),)),
    "mixed 32 dec + 512": StepShape(prefill_chunks=((512, 0),), decode_context_lens=(1024,) * 32),
}


def header() -> str:
    import torch

    cpu = platform.processor() or platform.machine()
    return (
        f"# {dt.date.today()} | host {cpu}, {os.cpu_count()} cores | torch {torch.__version__} | "
        f"python {platform.python_version()}"
    )


def public_fit_table() -> list[dict]:
    rows = []
    for path in shipped_calibration_paths():
        calibration = Calibration.load(path)
        if calibration.label != "fitted" or not calibration.provenance.method.startswith("vidur"):
            continue  # the aiconfigurator fits have their own table: benchmarks/calibration_sources.py
        linear, *rest = calibration.cost_model.fit_errors
        rows.append(
            {
                "calibration": calibration.name,
                "knee": calibration.cost_model.knee_tokens,
                "tile": calibration.cost_model.tile_tokens,
                "points": linear.num_points,
                "mape_train": linear.mape_train,
                "mape_cv": linear.mape_cross_validated,
                "max": linear.max_ape,
                "all_reduce_mape": rest[0].mape_train if rest else None,
            }
        )
    return rows


def prediction_table() -> list[dict]:
    rows = []
    for path in shipped_calibration_paths():
        calibration = Calibration.load(path)
        if calibration.provenance.method == "roofline" or calibration.provenance.database_mode:
            continue
        hardware = get_hardware(calibration.device.hardware)
        roofline = roofline_calibration(
            calibration.model, hardware, calibration.device.tensor_parallel
        )
        model, estimate = (
            CostModel.from_calibration(calibration),
            CostModel.from_calibration(roofline),
        )
        for name, shape in SHAPES.items():
            rows.append(
                {
                    "calibration": calibration.name,
                    "label": calibration.label,
                    "shape": name,
                    "predicted_ms": model.step_time(shape) * 1e3,
                    "roofline_ms": estimate.step_time(shape) * 1e3,
                }
            )
    return rows


def profile_table(full: bool, calibration_out: str | None) -> list[dict]:
    from simulator.calibration.profile import Profiler
    from simulator.calibration.profile_grid import ProfileGrid

    grid = ProfileGrid.full(16, 512, 1024) if full else ProfileGrid.quick()
    started = time.perf_counter()
    profiler = Profiler("cpu-small", grid, dtype="float32", device="cpu")
    calibration = profiler.calibration(profiler.run(progress=True, threads=1), fit=False)
    elapsed = time.perf_counter() - started
    if calibration_out:
        fit_calibration(calibration, statistic="min").save(calibration_out)
    rows = []
    for statistic in ("min", "median"):
        error = fit_calibration(calibration, statistic=statistic).cost_model.fit_errors[0]
        rows.append(
            {
                "grid": "full(16, 512, 1024)" if full else "quick",
                "threads": 1,
                "statistic": statistic,
                "points": error.num_points,
                "seconds": elapsed,
                "mape_train": error.mape_train,
                "mape_cv": error.mape_cross_validated,
                "max": error.max_ape,
            }
        )
    return rows


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n## {title}")
    if not rows:
        return
    columns = list(rows[0])
    print(" | ".join(columns))
    for row in rows:
        print(" | ".join(_cell(row[column]) for column in columns))


def _cell(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 10 else f"{value:.1f}"
    return str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="also profile cpu-small on this CPU")
    parser.add_argument(
        "--full", action="store_true", help="with --profile: the full grid (minutes)"
    )
    parser.add_argument("--json", help="save every table here")
    parser.add_argument(
        "--calibration-out", help="with --profile: save the measured calibration here"
    )
    args = parser.parse_args()
    print(header())
    tables = {
        "shipped fits on the public Vidur tables (per-layer time, ≥64 tokens; fractions)": public_fit_table(),
        "predicted step time vs datasheet roofline (ms)": prediction_table(),
    }
    if args.profile:
        title = "cpu-small profiled on this host, cost-model fit (fractions)"
        tables[title] = profile_table(args.full, args.calibration_out)
    for title, rows in tables.items():
        print_table(title, rows)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"header": header(), **tables}, handle, indent=1)


if __name__ == "__main__":
    main()
