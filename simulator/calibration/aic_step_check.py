"""The error that matters for a step model fitted on aiconfigurator's tables: whole steps whose
every kernel is a measured row (decode steps of one batch and context; prefills of one sequence),
their summed measured kernel time against the fitted terms, each step predicted by terms fitted
without the rows it uses (folds grouped by token count, so no GEMM row of a held-out step is seen).
Elementwise kernels and host time are in neither side: they are not in the tables."""

from dataclasses import dataclass, replace

import numpy as np

from simulator.calibration import aic_tables as tables
from simulator.calibration.aic_fit import (
    MAX_DECODE_BATCH,
    MAX_DECODE_CONTEXT,
    MAX_STEP_TOKENS,
    _attention_design,
    all_reduce_curve,
    fit_decode_attention,
    fit_linear_layers,
    fit_lm_head,
    fit_prefill_attention,
    linear_rows,
)
from simulator.calibration.fitting import affine_design, kfold_indices, linear_design
from simulator.calibration.roofline import ALL_REDUCES_PER_LAYER
from simulator.calibration.schema import FitError
from simulator.model_spec import ModelSpec


@dataclass(frozen=True)
class Steps:
    tokens: np.ndarray  # [steps] tokens through the linear layers
    sequences: np.ndarray  # [steps] sequences through the LM head
    decode_row: np.ndarray  # [steps] row of the decode table, -1 for a prefill step
    prefill_row: np.ndarray  # [steps] row of the prefill table, -1 for a decode step
    measured_s: np.ndarray  # [steps] summed measured kernel time


def measured_steps(
    gemm: tables.GemmTable,
    decode: tables.AttentionTable,
    prefill: tables.AttentionTable,
    model: ModelSpec,
    tensor_parallel: int,
    reduce: tables.AllReduceTable | None,
) -> Steps:
    tokens_grid, per_layer = linear_rows(gemm, model, tensor_parallel)
    linear = dict(zip(tokens_grid.tolist(), per_layer.tolist()))
    grid = set(linear)
    decode_rows = [
        i
        for i in range(len(decode.batch))
        if decode.batch[i] in grid
        and decode.batch[i] <= MAX_DECODE_BATCH
        and decode.length[i] <= MAX_DECODE_CONTEXT
    ]
    prefill_rows = [
        i
        for i in range(len(prefill.batch))
        if prefill.batch[i] == 1
        and prefill.length[i] in grid
        and prefill.length[i] <= MAX_STEP_TOKENS
    ]
    tokens = np.array(
        [decode.batch[i] for i in decode_rows] + [prefill.length[i] for i in prefill_rows]
    )
    sequences = np.array([decode.batch[i] for i in decode_rows] + [1.0] * len(prefill_rows))
    attention = np.array(
        [decode.seconds[i] for i in decode_rows] + [prefill.seconds[i] for i in prefill_rows]
    )
    head = np.array(
        [gemm.time_s(s, model.vocab_size // tensor_parallel, model.hidden_size) for s in sequences]
    )
    layers = model.num_layers
    measured = layers * (np.array([linear[t] for t in tokens]) + attention) + head
    measured += _all_reduce_s(reduce, tokens, model)
    kinds = [len(decode_rows), len(prefill_rows)]
    return Steps(
        tokens,
        sequences,
        np.array(decode_rows + [-1] * kinds[1]),
        np.array([-1] * kinds[0] + prefill_rows),
        measured,
    )


def _all_reduce_s(
    reduce: tables.AllReduceTable | None, tokens: np.ndarray, model: ModelSpec
) -> np.ndarray | float:
    """A step's all-reduces at `tokens` as the calibration's term reads the table
    (`AllReduceCurve.seconds_at`; 0 without tensor parallelism)."""
    if reduce is None:
        return 0.0
    curve, _ = all_reduce_curve(reduce, model, ALL_REDUCES_PER_LAYER * model.num_layers)
    return np.array([curve.seconds_at(float(t)) for t in tokens])


def _subset(table: tables.AttentionTable, drop: np.ndarray) -> tables.AttentionTable:
    keep = np.ones(len(table.batch), dtype=bool)
    keep[drop[drop >= 0]] = False
    return replace(
        table, batch=table.batch[keep], length=table.length[keep], seconds=table.seconds[keep]
    )


def predict(
    steps: Steps,
    index: np.ndarray,
    gemm,
    decode,
    prefill,
    model: ModelSpec,
    tensor_parallel: int,
    reduce: tables.AllReduceTable | None,
    skip: frozenset | None,
) -> np.ndarray:
    """Kernel time of steps[index] from terms fitted without `skip` token counts and those steps'
    attention rows (`skip` None: fitted on everything)."""
    drop = np.array([], dtype=int) if skip is None else index
    linear, _ = fit_linear_layers(gemm, model, tensor_parallel, skip or frozenset(), folds=0)
    head = fit_lm_head(gemm, model, tensor_parallel, skip or frozenset(), folds=0)
    dec = fit_decode_attention(_subset(decode, steps.decode_row[drop]), folds=0)
    pre = fit_prefill_attention(_subset(prefill, steps.prefill_row[drop]), folds=0)
    tokens, sequences = steps.tokens[index], steps.sequences[index]
    attention = np.zeros(len(index))
    is_decode = steps.decode_row[index] >= 0
    rows = steps.decode_row[index][is_decode]
    attention[is_decode] = (
        _attention_design(
            (), np.stack([decode.batch[rows], decode.batch[rows] * decode.length[rows]], axis=1)
        )
        @ dec.coefficients
    )
    rows = steps.prefill_row[index][~is_decode]
    length = prefill.length[rows]
    attention[~is_decode] = (
        _attention_design((), np.stack([length, length * (length + 1) / 2], axis=1))
        @ pre.coefficients
    )
    layers = model.num_layers
    seconds = layers * (linear_design(linear.params, tokens) @ linear.coefficients + attention)
    seconds += affine_design((), sequences) @ head.coefficients
    return seconds + _all_reduce_s(reduce, tokens, model)


def step_error(
    gemm,
    decode,
    prefill,
    model: ModelSpec,
    tensor_parallel: int,
    reduce: tables.AllReduceTable | None,
    folds: int = 5,
    seed: int = 0,
) -> FitError:
    steps = measured_steps(gemm, decode, prefill, model, tensor_parallel, reduce)
    everything = np.arange(len(steps.tokens))
    train = (
        np.abs(
            predict(
                steps,
                everything,
                gemm,
                decode,
                prefill,
                model,
                tensor_parallel,
                reduce,
                None,
            )
            - steps.measured_s
        )
        / steps.measured_s
    )
    counts = np.unique(steps.tokens)
    held_out = np.empty(len(steps.tokens))
    for fold in kfold_indices(len(counts), min(folds, len(counts)), seed):
        skip = frozenset(counts[fold].tolist())
        index = np.flatnonzero(np.isin(steps.tokens, list(skip)))
        held_out[index] = (
            np.abs(
                predict(
                    steps,
                    index,
                    gemm,
                    decode,
                    prefill,
                    model,
                    tensor_parallel,
                    reduce,
                    skip,
                )
                - steps.measured_s[index]
            )
            / steps.measured_s[index]
        )
    return FitError(
        target="step kernel time (sum of measured kernels)",
        num_points=len(steps.tokens),
        mape_train=float(train.mean()),
        max_ape=float(train.max()),
        mape_cross_validated=float(held_out.mean()),
        folds=min(folds, len(counts)),
        note=f"{int((steps.decode_row >= 0).sum())} decode steps (one batch, one context) and "
        f"{int((steps.prefill_row >= 0).sum())} single-sequence prefills whose every kernel is a "
        "measured row; folds grouped by token count; all-reduce as measured (log-log "
        "between sizes, as the term reads it); elementwise and host time excluded",
    )
