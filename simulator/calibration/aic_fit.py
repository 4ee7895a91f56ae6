"""The per-table fits behind the aiconfigurator calibrations (see `aic_import`): one layer's GEMMs
by the roofline model, decode and prefill attention with their per-layer floors, the LM head and
the all-reduce, each with its own held-out error. Plain arrays in, coefficients out."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.calibration import aic_tables as tables
from simulator.calibration.all_reduce_curve import AllReduceCurve
from simulator.calibration.fitting import (
    GEMM_TILES,
    affine_design,
    cross_validated_errors,
    fit_relative,
    kfold_indices,
    linear_design,
    nnls,
    roofline_candidates,
)
from simulator.calibration.schema import FitError
from simulator.model_spec import ModelSpec

MAX_STEP_TOKENS = 16384  # the largest step fitted: GEMM rows beyond this are not used
MAX_DECODE_BATCH = 512
MAX_DECODE_CONTEXT = 32768
_SHORT = {"bfloat16": "bf16"}  # how fit targets name a GEMM dtype


def layer_gemms(model: ModelSpec, tensor_parallel: int) -> list[tuple[str, int, int]]:
    """(name, n, k) of one layer's GEMMs on one GPU: column-parallel QKV and gate/up, row-parallel
    output and down projections (Megatron layout, as vLLM shards them)."""
    t, hd = tensor_parallel, model.head_dim
    return [
        ("qkv", (model.num_attention_heads + 2 * model.num_kv_heads) * hd // t, model.hidden_size),
        ("o", model.hidden_size, model.num_attention_heads * hd // t),
        ("gate_up", 2 * model.intermediate_size // t, model.hidden_size),
        ("down", model.hidden_size, model.intermediate_size // t),
    ]


@dataclass(frozen=True)
class TermFit:
    """Per-layer (or per-step) coefficients of one table's fit, with its error."""

    coefficients: np.ndarray
    params: tuple
    error: FitError


def _fit(
    design: Callable,
    rows: np.ndarray,
    seconds: np.ndarray,
    candidates: list,
    target: str,
    note: str,
    folds: int = 5,
) -> TermFit:
    """Relative-error fit; `folds` 0 skips the held-out error (refits inside another k-fold)."""
    fit = fit_relative(design, rows, seconds, candidates)
    held_out = (
        cross_validated_errors(design, rows, seconds, candidates, folds=min(folds, len(seconds)))
        if folds
        else None
    )
    error = FitError(
        target=target,
        num_points=len(seconds),
        mape_train=fit.mape,
        max_ape=fit.max_ape,
        mape_cross_validated=None if held_out is None else float(held_out.mean()),
        folds=min(folds, len(seconds)),
        note=note,
    )
    return TermFit(fit.coefficients, fit.params, error)


def _fit_sqrt_weighted(
    design: Callable,
    rows: np.ndarray,
    seconds: np.ndarray,
    target: str,
    note: str,
    folds: int = 5,
    seed: int = 0,
) -> TermFit:
    """Least squares weighted by 1/√time: between relative error (which lets the many small rows
    set the slope, and small decode contexts sit in L2 and read faster than HBM) and absolute
    error (which ignores the floor). Held-out error by k-fold like the others."""

    def solve(index: np.ndarray) -> np.ndarray:
        weights = seconds[index] ** -0.5
        return nnls(design((), rows[index]) * weights[:, None], seconds[index] * weights)

    coefficients = solve(np.arange(len(seconds)))
    relative = np.abs(design((), rows) @ coefficients - seconds) / seconds
    held_out = np.empty(len(seconds))
    for test in kfold_indices(len(seconds), min(folds, len(seconds)), seed) if folds else ():
        train = np.setdiff1d(np.arange(len(seconds)), test)
        held_out[test] = (
            np.abs(design((), rows[test]) @ solve(train) - seconds[test]) / seconds[test]
        )
    error = FitError(
        target=target,
        num_points=len(seconds),
        mape_train=float(relative.mean()),
        max_ape=float(relative.max()),
        mape_cross_validated=float(held_out.mean()) if folds else None,
        folds=min(folds, len(seconds)),
        note=note + "; least squares weighted by 1/√time",
    )
    return TermFit(coefficients, (), error)


def linear_rows(
    gemm: tables.GemmTable, model: ModelSpec, tensor_parallel: int
) -> tuple[np.ndarray, np.ndarray]:
    """(token counts, seconds of one layer's four GEMMs) at each measured token count ≤ a step's."""
    tokens = gemm.ms()
    tokens = tokens[tokens <= MAX_STEP_TOKENS]
    return tokens, np.array(
        [
            sum(gemm.time_s(m, n, k) for _, n, k in layer_gemms(model, tensor_parallel))
            for m in tokens
        ]
    )


def fit_linear_layers(
    gemm: tables.GemmTable,
    model: ModelSpec,
    tensor_parallel: int,
    skip_tokens: frozenset = frozenset(),
    folds: int = 5,
) -> tuple[TermFit, np.ndarray]:
    """One layer's four GEMMs summed at each measured token count (but `skip_tokens`), fitted by the
    roofline model (weight-read floor, per token, whole tiles above the knee); returns the fit and
    the per-layer rows."""
    tokens, per_layer = linear_rows(gemm, model, tensor_parallel)
    kept = ~np.isin(tokens, list(skip_tokens))
    tokens, per_layer = tokens[kept], per_layer[kept]
    candidates = roofline_candidates(tokens.max(), GEMM_TILES, count=60)
    scaled = [name for name, n, k in layer_gemms(model, tensor_parallel) if gemm.beyond_grid(n, k)]
    fit = _fit(
        linear_design,
        tokens,
        per_layer,
        candidates,
        f"per-layer GEMM time (qkv+o+gate_up+down, {_SHORT.get(gemm.dtype, gemm.dtype)})",
        f"{_rel(gemm.path)} @ {gemm.version}"
        + ("" if gemm.dtype == "bfloat16" else f" ({gemm.dtype} rows)")
        + "; (n, k) bilinear between grid lines"
        + (f", {scaled} scaled past the sweep's largest n/k" if scaled else "")
        + f"; {len(tokens)} token counts",
        folds,
    )
    return fit, per_layer


def _attention_design(_params: tuple, rows: np.ndarray) -> np.ndarray:
    """[rows, 3]: a floor, per sequence, per unit of work (decode: context tokens; prefill:
    causal pairs)."""
    rows = np.atleast_2d(rows)
    return np.stack([np.ones(len(rows)), rows[:, 0], rows[:, 1]], axis=1)


def fit_decode_attention(table: tables.AttentionTable, folds: int = 5) -> TermFit:
    keep = (table.batch <= MAX_DECODE_BATCH) & (table.length <= MAX_DECODE_CONTEXT)
    rows = np.stack([table.batch[keep], table.batch[keep] * table.length[keep]], axis=1)
    return _fit_sqrt_weighted(
        _attention_design,
        rows,
        table.seconds[keep],
        "per-layer decode attention (floor + per sequence + per context token)",
        f"{_rel(table.path)} @ {table.version}{_kernel_note(table)}; batch ≤ {MAX_DECODE_BATCH}, "
        f"context ≤ {MAX_DECODE_CONTEXT}",
        folds,
    )


def fit_prefill_attention(table: tables.AttentionTable, folds: int = 5) -> TermFit:
    keep = table.batch * table.length <= MAX_STEP_TOKENS
    batch, length = table.batch[keep], table.length[keep]
    rows = np.stack(
        [batch * length, batch * length * (length + 1) / 2], axis=1
    )  # tokens, causal pairs
    return _fit(
        _attention_design,
        rows,
        table.seconds[keep],
        [(0.0,)],
        "per-layer prefill attention (floor + per token + per causal query-key pair)",
        f"{_rel(table.path)} @ {table.version}{_kernel_note(table)}; "
        f"batch × length ≤ {MAX_STEP_TOKENS}",
        folds,
    )


def fit_lm_head(
    gemm: tables.GemmTable,
    model: ModelSpec,
    tensor_parallel: int,
    skip_tokens: frozenset = frozenset(),
    folds: int = 5,
) -> TermFit:
    sequences = gemm.ms()
    sequences = sequences[(sequences <= MAX_DECODE_BATCH) & ~np.isin(sequences, list(skip_tokens))]
    n = model.vocab_size // tensor_parallel
    seconds = np.array([gemm.time_s(m, n, model.hidden_size) for m in sequences])
    return _fit(
        affine_design,
        sequences,
        seconds,
        [(0.0,)],
        "LM-head GEMM (fixed + per sampled sequence)",
        f"{_rel(gemm.path)} @ {gemm.version}; n={n} "
        "(wider than the sweep: scaled from its widest n)",
        folds,
    )


def all_reduce_curve(
    table: tables.AllReduceTable, model: ModelSpec, count: int
) -> tuple[AllReduceCurve, FitError]:
    """A step's `count` all-reduces as the table measures them, from the largest size at or below
    one token on (`AllReduceCurve`: log-log between sizes), and its error: each size within a step's
    range left out and read from its neighbours (what a size between two measured ones risks)."""
    tokens = table.elements / model.hidden_size
    order = np.argsort(tokens, kind="stable")
    tokens, seconds = tokens[order], table.seconds[order]
    first = max(int(np.searchsorted(tokens, 1.0, side="right")) - 1, 0)
    tokens, seconds = tokens[first:], seconds[first:]
    inner = [i for i in range(1, len(tokens) - 1) if tokens[i] <= MAX_STEP_TOKENS]
    missed = [
        abs(
            np.exp(
                np.interp(
                    np.log(tokens[i]),
                    np.log(tokens[[i - 1, i + 1]]),
                    np.log(seconds[[i - 1, i + 1]]),
                )
            )
            / seconds[i]
            - 1.0
        )
        for i in inner
    ]
    error = FitError(
        target=f"all-reduce time ({table.kernel}, bf16)",
        num_points=len(tokens),
        mape_train=0.0,
        max_ape=float(max(missed, default=0.0)),
        mape_cross_validated=float(np.mean(missed)) if missed else None,
        folds=len(missed),
        note=f"{_rel(table.path)} @ {table.version}; measured, log-log between sizes; held out: "
        "each size up to a 16,384-token step read from its two neighbours",
    )
    curve = AllReduceCurve(tokens=tokens.tolist(), seconds=(seconds * count).tolist())
    return curve, error


def _kernel_note(table: tables.AttentionTable) -> str:
    """Which kernel's rows were fitted, where the table times the same shapes with several."""
    return (
        f" ({table.kernel} rows, the stack's default of the kernels it times)"
        if table.kernel
        else ""
    )


def _rel(path: Path) -> str:
    parts = Path(path).parts
    return "/".join(parts[parts.index("data") + 1 :]) if "data" in parts else str(path)
