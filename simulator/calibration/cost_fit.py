"""Fitting the step-cost model: the eleven profile terms by non-negative least squares on relative
(or absolute) error, the (knee, tile, spill, GEMM switch) choice searched over a grid, and k-fold
held-out error stratified by kind of step. Apart from `cost_model.py` (evaluating a fitted model on
a step shape, the simulator's per-step path) because fitting runs once per calibration, offline."""

import math
from collections.abc import Sequence

import numpy as np

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import PROFILE_TERMS, step_regime
from simulator.calibration.fitting import (
    cross_validated_errors,
    fit_relative,
    knee_candidates,
    roofline_candidates,
    spilled,
    tile_rounded,
)
from simulator.calibration.schema import Calibration, CostModelFit, CostTerm, FitError, ProfilePoint

MIN_SPILL_TOKENS = 32  # fewer tokens than this never fill a last-level cache with activations
# Columns of the shape-statistics matrix used by the design function.


_STAT_COLUMNS = (
    "num_seqs",
    "num_batched_tokens",
    "prefill_attention_pairs",
    "decode_context_tokens",
    "num_decode_seqs",
    "num_prefill_seqs",
)


def shape_statistics(shapes: Sequence[StepShape]) -> np.ndarray:
    """[num_shapes, 6]: sequences, batched tokens, prefill pairs, decode context tokens, decoding
    and prefilling sequences."""
    return np.array(
        [[getattr(shape, column) for column in _STAT_COLUMNS] for shape in shapes], dtype=float
    )


def profile_design(params: tuple, stats: np.ndarray) -> np.ndarray:
    """[rows, 11] feature matrix in PROFILE_TERMS order for shape statistics `stats` [rows, 6] and
    params = (knee, tile, spill, GEMM switch) tokens."""
    knee, tile, spill, switch = params
    seqs, tokens, pairs, context, decodes, prefills = stats.T
    gemm = (tokens >= switch).astype(float)
    gemv_extra = np.where(tokens < switch, np.maximum(tokens - 1, 0), 0.0)
    above_knee = np.maximum(tile_rounded(tokens, tile), knee)
    columns = [
        np.ones_like(tokens),
        gemm,
        gemv_extra,
        seqs,
        tokens,
        above_knee,
        spilled(tokens, spill),
        pairs,
        context,
        (decodes > 0).astype(float),
        (prefills > 0).astype(float),
    ]
    assert len(columns) == len(PROFILE_TERMS), "one design column per profile term, in its order"
    return np.stack(columns, axis=1)


# Token counts at which BLAS may move from matrix-vector to matrix-matrix kernels. The fit can tell
# them apart only if steps of every count up to the largest were measured (`FEW_TOKEN_COUNTS`: the
# profile grid's and the validation ladder's smallest batches): on this 2-core CPU, cpu-small's layers
# at 2 and 3 tokens run as matrix-vector passes, 20 and 26 ms against 18 ms at 4 (2026-12-05), and a
# workload fit that had seen no 3-token step put the switch at 3 and timed live 3-4 sequence decode
# steps 31-49% short.
GEMM_SWITCH_CANDIDATES = (2, 3, 4, 5)
FEW_TOKEN_COUNTS = tuple(range(1, max(GEMM_SWITCH_CANDIDATES) + 1))


def fit_cost_model(
    shapes: Sequence[StepShape],
    measured_s: Sequence[float],
    folds: int = 5,
    seed: int = 0,
    target: str = "engine step time (median of repeats)",
    tiles: Sequence[int] = (1,),
    switches: Sequence[int] = GEMM_SWITCH_CANDIDATES,
    objective: str = "relative",
) -> CostModelFit:
    """Fit the eleven profile terms to measured step times and report train and k-fold held-out error.
    `objective`: relative (grid points, medians of repeats) or absolute (single samples of a workload;
    see `fitting.fit_relative`).
    `tiles`: GEMM tile sizes to try (GPUs quantise tokens into tiles; a CPU does not: keep (1,));
    `switches`: token counts at which BLAS may move from matrix-vector to matrix-matrix kernels."""
    if len(shapes) != len(measured_s) or len(shapes) < 8:
        raise ValueError(
            f"fit_cost_model: {len(shapes)} shapes and {len(measured_s)} times; "
            "expected equal counts of at least 8 points"
        )
    empty = [index for index, shape in enumerate(shapes) if shape.is_empty]
    if empty:
        raise ValueError(
            f"fit_cost_model: points {empty} have an empty step shape; expected steps that did work"
        )
    stats = shape_statistics(shapes)
    measured = np.asarray(measured_s, dtype=float)
    spills = [
        tokens
        for tokens in knee_candidates(stats[:, 1].max(), 12)[:-1]
        if tokens >= MIN_SPILL_TOKENS
    ]
    candidates = [
        params + (float(switch),)
        for params in roofline_candidates(stats[:, 1].max(), tiles, spills=spills)
        for switch in switches
    ]
    fit = fit_relative(profile_design, stats, measured, candidates, objective)
    held_out = cross_validated_errors(
        profile_design,
        stats,
        measured,
        candidates,
        folds=min(folds, len(shapes)),
        seed=seed,
        strata=[step_regime(shape) for shape in shapes],
        objective=objective,
    )
    terms = [
        CostTerm(
            name=name, feature=feature, seconds_per_unit=float(value), bound=bound, label="fitted"
        )
        for (feature, (name, bound)), value in zip(PROFILE_TERMS.items(), fit.coefficients)
    ]
    error = FitError(
        target=target,
        num_points=len(measured),
        mape_train=fit.mape,
        max_ape=fit.max_ape,
        mape_cross_validated=float(held_out.mean()),
        folds=min(folds, len(shapes)),
        note=f"non-negative least squares on {objective} error; (knee, tile, spill, GEMM switch) searched over "
        f"{len(candidates)} choices; folds stratified by kind of step",
    )
    knee, tile, spill, switch = fit.params
    return CostModelFit(
        knee_tokens=knee,
        knee_label="fitted",
        tile_tokens=int(tile),
        terms=terms,
        fit_errors=[error],
        spill_tokens=None if math.isinf(spill) else spill,
        gemm_switch_tokens=int(switch),
    )


def points_for_fit(
    points: Sequence[ProfilePoint], statistic: str = "median"
) -> tuple[list[StepShape], list[float]]:
    return [point.shape.to_shape() for point in points], [
        point.statistic_s(statistic) for point in points
    ]


GPU_TILES = (1, 64, 128, 256)  # token tiles a GPU GEMM may quantise into; a CPU does not


def fit_calibration(
    calibration: Calibration, folds: int = 5, seed: int = 0, statistic: str = "median"
) -> Calibration:
    """A copy of a measured calibration with its cost model fitted on its own points."""
    shapes, times = points_for_fit(calibration.points, statistic)
    tiles = (1,) if calibration.device.kind == "cpu" else GPU_TILES
    fit = fit_cost_model(
        shapes,
        times,
        folds=folds,
        seed=seed,
        target=f"engine step time ({statistic} of repeats)",
        tiles=tiles,
    )
    return calibration.model_copy(update={"cost_model": fit})
