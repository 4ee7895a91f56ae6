"""Vidur's measured NCCL all-reduce table (`network/<gpu>_dgx/all_reduce.csv` under
`../shared/calibration/vidur/`, see its SOURCES.md) and the two tensor-parallel all-reduce terms a
Vidur-fitted calibration takes from it: a latency per call and a cost per element, fitted on the sizes
a step produces. Kept apart from the linear-layer import (`vidur_import`), which calls it."""

import csv
from pathlib import Path

import numpy as np

from simulator.calibration.fitting import affine_design, fit_relative
from simulator.calibration.roofline import ALL_REDUCES_PER_LAYER, all_reduce_cost_terms
from simulator.calibration.schema import CostTerm, FitError
from simulator.model_spec import ModelSpec

NETWORK_DIRS = {"A100-80GB": "a100_dgx", "H100-80GB": "h100_dgx"}


def read_all_reduce(gpu: str, num_workers: int, vidur_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """(sizes in elements, median seconds) of single-node all-reduces over `num_workers` GPUs."""
    if gpu not in NETWORK_DIRS:
        raise ValueError(
            f"GPU {gpu!r} has no public all-reduce table; expected one of {sorted(NETWORK_DIRS)}"
        )
    path = Path(vidur_dir) / "network" / NETWORK_DIRS[gpu] / "all_reduce.csv"
    with path.open() as handle:
        rows = [
            row
            for row in csv.DictReader(handle)
            if int(row["num_workers"]) == num_workers
            and int(row["devices_per_node"]) == num_workers
        ]
    if not rows:
        raise ValueError(
            f"{path}: no single-node rows for {num_workers} workers; expected 2, 4 or 8"
        )
    return (
        np.array([float(row["size"]) for row in rows]),
        np.array([float(row["time_stats.all_reduce.median"]) / 1e3 for row in rows]),
    )


def all_reduce_terms(
    model: ModelSpec, gpu: str, tensor_parallel: int, max_tokens: int, vidur_dir: Path
) -> tuple[list[CostTerm], FitError]:
    """Fit time = latency + size × per-element on the sizes a step of ≤ `max_tokens` produces."""
    sizes, times = read_all_reduce(gpu, tensor_parallel, vidur_dir)
    relevant = sizes <= max_tokens * model.hidden_size
    fit = fit_relative(affine_design, sizes[relevant], times[relevant], [(0.0,)])
    latency_s, per_element_s = fit.coefficients
    count = ALL_REDUCES_PER_LAYER * model.num_layers
    note = f"fitted on {NETWORK_DIRS[gpu]}/all_reduce.csv ({tensor_parallel} GPUs, NCCL); {count} per step"
    terms = all_reduce_cost_terms(
        count * latency_s, count * per_element_s * model.hidden_size, "fitted", note, note
    )
    error = FitError(
        target="all-reduce time (public table)",
        num_points=int(relevant.sum()),
        mape_train=fit.mape,
        max_ape=fit.max_ape,
        note="latency + per-element fit; small sizes are latency-noisy",
    )
    return terms, error
