"""Small, dependency-free fitting tools for the cost model: non-negative least squares
(Lawson–Hanson), a relative-error fit with a grid search over the few non-linear shape
parameters (roofline knee, GEMM tile, cache-spill point), k-fold cross-validation, and the design
matrices the importers share (`linear_design`, `affine_design`, the tile grid `GEMM_TILES`).
Coefficients are physical times, so they must never go negative."""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

# design(params, rows) -> matrix [len(rows), num_features] of feature values for one choice of the
# non-linear shape parameters, e.g. (knee tokens, tile tokens, spill tokens).
Params = tuple[float, ...]
DesignFn = Callable[[Params, np.ndarray], np.ndarray]
Candidates = Sequence[Params]


def nnls(matrix: np.ndarray, target: np.ndarray, max_iterations: int | None = None) -> np.ndarray:
    """argmin ‖A x − b‖ subject to x ≥ 0, by Lawson and Hanson's active-set method.
    Columns are scaled to unit norm first so features of very different sizes converge alike."""
    matrix = np.asarray(matrix, dtype=float)  # [rows, cols]
    target = np.asarray(target, dtype=float)  # [rows]
    if matrix.ndim != 2 or target.shape != (matrix.shape[0],):
        raise ValueError(
            f"nnls: matrix {matrix.shape} and target {target.shape} do not match; expected [m, n] and [m]"
        )
    norms = np.linalg.norm(matrix, axis=0)
    norms[norms == 0] = 1.0
    scaled = matrix / norms
    solution = _lawson_hanson(scaled, target, max_iterations or 3 * matrix.shape[1] + 10)
    return solution / norms


def _lawson_hanson(matrix: np.ndarray, target: np.ndarray, max_iterations: int) -> np.ndarray:
    num_cols = matrix.shape[1]
    passive = np.zeros(num_cols, dtype=bool)
    x = np.zeros(num_cols)
    tolerance = (
        10 * np.finfo(float).eps * max(matrix.shape) * max(1.0, np.abs(matrix).sum(axis=0).max())
    )
    for _ in range(max_iterations):
        gradient = matrix.T @ (target - matrix @ x)
        gradient[passive] = -np.inf
        if passive.all() or gradient.max() <= tolerance:
            break
        passive[int(np.argmax(gradient))] = True
        x = _solve_passive_set(matrix, target, passive, x)
        passive &= x > 0
    return x


def _solve_passive_set(matrix, target, passive, x):
    """Least squares on the passive columns, stepping back towards x while any goes negative."""
    while True:
        candidate = np.zeros_like(x)
        candidate[passive] = np.linalg.lstsq(matrix[:, passive], target, rcond=None)[0]
        if (candidate[passive] > 0).all():
            return candidate
        blocking = passive & (candidate <= 0)
        step = np.min(x[blocking] / np.maximum(x[blocking] - candidate[blocking], 1e-300))
        x = x + step * (candidate - x)
        passive &= x > 1e-15 * max(1.0, np.abs(x).max())
        x[~passive] = 0.0
        if not passive.any():
            return x


@dataclass(frozen=True)
class RelativeFit:
    params: Params
    coefficients: np.ndarray  # [num_features]
    relative_errors: np.ndarray  # [rows]: |predicted - measured| / measured

    @property
    def mape(self) -> float:
        return float(np.mean(self.relative_errors))

    @property
    def max_ape(self) -> float:
        return float(np.max(self.relative_errors))


def fit_relative(
    design: DesignFn,
    rows: np.ndarray,
    measured: np.ndarray,
    candidates: Candidates,
    objective: str = "relative",
    row_weights: np.ndarray | None = None,
) -> RelativeFit:
    """Minimise the squared error over non-negative coefficients, for each candidate parameter tuple,
    and keep the one with the lowest mean error. `objective` "relative" (every point counts alike: for
    profile grids whose points are medians of repeats) weights each residual by 1 / measured; "absolute"
    (seconds: for single noisy samples of a workload, where relative least squares under-predicts the
    mean, since it favours the fast draws of each shape; and what a simulation sums is time) does not.
    `row_weights` [rows] (default all 1) scale each row's share of the objective, e.g. `octave_weights`
    so that a few small-batch rows are not outvoted by hundreds of large ones."""
    measured = np.asarray(measured, dtype=float)
    if (measured <= 0).any():
        raise ValueError("fit_relative: every measured time must be > 0 seconds")
    if objective not in ("relative", "absolute"):
        raise ValueError(f"fit_relative: objective {objective!r}; expected relative or absolute")
    relative = 1.0 / measured  # [rows]: turns absolute residuals into relative ones
    weights = relative if objective == "relative" else np.full_like(measured, 1.0 / measured.mean())
    shares = np.ones_like(measured) if row_weights is None else np.asarray(row_weights, dtype=float)
    if shares.shape != measured.shape or (shares <= 0).any():
        raise ValueError(
            f"fit_relative: row_weights {shares.shape}; expected {measured.shape}, every one > 0"
        )
    weights = weights * np.sqrt(
        shares
    )  # squared in the least squares: each row counts `shares` times
    best: RelativeFit | None = None
    best_score = np.inf
    for params in candidates:
        matrix = design(params, rows)  # [rows, features]
        coefficients = nnls(matrix * weights[:, None], measured * weights)
        residuals = np.abs(matrix @ coefficients - measured)
        score = (residuals * weights * np.sqrt(shares)).sum() / shares.sum()
        if score < best_score:
            best, best_score = RelativeFit(tuple(params), coefficients, residuals * relative), score
    return best


def kfold_indices(
    num_rows: int, folds: int, seed: int, strata: Sequence[str] | None = None
) -> list[np.ndarray]:
    """Shuffled, near-equal folds; every row is held out exactly once. With `strata` (one label per
    row) each stratum is dealt round-robin across folds, so every training split still sees every
    kind of step and a rare regime is never held out whole."""
    if folds < 2 or folds > num_rows:
        raise ValueError(
            f"kfold: {folds} folds over {num_rows} points; expected 2 ≤ folds ≤ points"
        )
    rng = np.random.default_rng(seed)
    labels = np.asarray(strata if strata is not None else [""] * num_rows)
    assignment = np.empty(num_rows, dtype=int)
    start = 0
    for label in sorted(set(labels.tolist())):
        members = rng.permutation(np.flatnonzero(labels == label))
        assignment[members] = (start + np.arange(len(members))) % folds
        start += len(members)  # continue the deal where the last stratum stopped: folds stay even
    return [np.flatnonzero(assignment == fold) for fold in range(folds)]


def cross_validated_errors(
    design: DesignFn,
    rows: np.ndarray,
    measured: np.ndarray,
    candidates: Candidates,
    folds: int = 5,
    seed: int = 0,
    strata: Sequence[str] | None = None,
    objective: str = "relative",
    row_weights: np.ndarray | None = None,
) -> np.ndarray:
    """Relative error of each row when predicted by a fit (with `objective`, `row_weights`) that
    never saw it."""
    measured = np.asarray(measured, dtype=float)
    errors = np.empty(len(measured))
    for held_out in kfold_indices(len(measured), folds, seed, strata):
        train = np.setdiff1d(np.arange(len(measured)), held_out)
        shares = None if row_weights is None else np.asarray(row_weights)[train]
        fit = fit_relative(design, rows[train], measured[train], candidates, objective, shares)
        predicted = design(fit.params, rows[held_out]) @ fit.coefficients
        errors[held_out] = np.abs(predicted - measured[held_out]) / measured[held_out]
    return errors


def octave_weights(tokens: np.ndarray) -> np.ndarray:
    """[rows] weights under which every octave of token count (1, 2–3, 4–7, …) counts alike: a table
    with rows every 8 tokens up to thousands has ~250 rows above 64 tokens and ~10 below, yet decode
    steps of 1–128 tokens are most of what a simulated replica runs."""
    octave = np.floor(np.log2(np.asarray(tokens, dtype=float))).astype(int)  # [rows]
    _, inverse, counts = np.unique(octave, return_inverse=True, return_counts=True)
    return 1.0 / counts[inverse]


def knee_candidates(max_tokens: float, count: int = 40) -> np.ndarray:
    """Geometric grid of knee positions from 1 token to the largest token count seen."""
    return np.unique(np.round(np.geomspace(1, max(2.0, max_tokens), count)))


def roofline_candidates(
    max_tokens: float, tiles: Sequence[int] = (1,), count: int = 40, spills: Sequence[float] = ()
) -> list[Params]:
    """(knee, tile, spill) triples: the knee at or above the tile, so that the weight-read floor,
    not a partial tile, explains the flat region at small batches; spill `inf` means no spill."""
    return [
        (float(knee), float(tile), float(spill))
        for tile in tiles
        for knee in knee_candidates(max_tokens, count)
        if knee >= tile
        for spill in (math.inf, *spills)
    ]


def tile_rounded(tokens: np.ndarray, tile: float) -> np.ndarray:
    return np.ceil(np.asarray(tokens, dtype=float) / tile) * tile


def spilled(tokens: np.ndarray, spill: float) -> np.ndarray:
    """Tokens beyond the point where a step's activations no longer fit in cache (0 below it)."""
    return np.maximum(np.asarray(tokens, dtype=float) - spill, 0.0)


# Token-dimension tile sizes a linear-layer fit tries (the Vidur and aiconfigurator importers):
# cuBLAS tiles and SM waves make GEMM time a staircase in tokens.
GEMM_TILES = (
    1,
    32,
    64,
    128,
    256,
    512,
)  # below this, wave quantisation and launch jitter dominate the table


def linear_design(params: tuple, tokens: np.ndarray) -> np.ndarray:
    """[rows, 3]: fixed, per token, max(tokens rounded up to whole tiles, knee) — the same three
    linear-layer features as the profile model (simulator.calibration.cost_model.PROFILE_TERMS)."""
    knee, tile = params[0], params[1]
    tokens = np.asarray(tokens, dtype=float).reshape(-1)
    return np.stack(
        [np.ones_like(tokens), tokens, np.maximum(tile_rounded(tokens, tile), knee)], axis=1
    )


def affine_design(_params: tuple, sizes: np.ndarray) -> np.ndarray:
    """[rows, 2]: fixed, per unit of size (an all-reduce's elements, an LM head's sequences)."""
    sizes = np.asarray(sizes, dtype=float).reshape(-1)
    return np.stack([np.ones_like(sizes), sizes], axis=1)
