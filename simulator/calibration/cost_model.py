"""Step time from step shape, as physics: a sum of terms, each a time per unit of something a step
does (tokens through the linear layers, query-key pairs of prefill attention, context tokens read
by decode attention, sequences, the step itself).

Linear layers follow a roofline: below `knee_tokens` a step re-reads every weight whatever the
batch (memory-bound floor), above it time grows with tokens (compute-bound), counted in whole GEMM
tiles of `tile_tokens`. Two effects a CPU shows are terms too: below `gemm_switch_tokens` BLAS
runs one matrix-vector pass per token, from it on matrix-matrix kernels (a fixed extra cost), and
beyond `spill_tokens` a step's activations leave the last-level cache (a steeper per-token cost).
The model is fitted by non-negative least squares on relative error, so every term stays a
physical, non-negative time and the model extrapolates the way hardware does. Each attention path
has a per-step floor (`decode_step`, `prefill_step`: a fixed cost whenever the step decodes or
prefills; a mixed step pays both), fitted on profiles and on public kernel tables alike; the
kernel-table calibrations also use a cost per decoding sequence (`decode_sequence`), and whole-step
fits published by others (DistServe's artifact) a cost per prefill token (`prefill_token`), and a
kernel-table calibration's tensor-parallel all-reduce reads its measured table (`all_reduce_curve`).
The fit itself is `cost_fit.py`.
"""

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from engine.core.step_shape import DecodeCounts, StepShape
from simulator.calibration.schema import (
    Calibration,
    CostModelFit,
    Feature,
    FitError,
    ProfilePoint,
)

# what the per-step path reads: a step, or a decode stretch's counts
Shape = StepShape | DecodeCounts

# The measured-profile model: feature -> (term name, what bounds it).
PROFILE_TERMS: dict[Feature, tuple[str, str]] = {
    "step": ("per-step overhead (scheduling, launch, sync)", "host"),
    # Below `gemm_switch_tokens` BLAS runs one matrix-vector pass per token, re-reading the weights
    # each time; from it on, matrix-matrix kernels read them once but (on a CPU) first pack them:
    # a fixed extra cost. On a GPU the switch is at 2 tokens and the packing cost near zero.
    "gemm_step": ("matrix-matrix kernels (from the GEMM switch on)", "memory"),
    "gemv_extra_token": ("matrix-vector re-read per extra token below the GEMM switch", "memory"),
    "sequence": ("per-sequence overhead (inputs, LM head, sampling)", "host"),
    "token": ("per-token work below the knee (embedding, norms, activations)", "memory"),
    "token_above_knee": ("linear layers: max(tokens, knee) × compute time per token", "compute"),
    # A CPU's last-level cache holds a few hundred tokens of activations; beyond that every
    # further token also pays DRAM traffic. Fitted only when the data show it.
    "token_above_spill": ("per token beyond the cache-spill point", "memory"),
    "prefill_attention_pair": ("prefill attention per query-key pair", "compute"),
    "decode_context_token": ("decode attention per context token read", "memory"),
    # An engine runs one attention path for the step's decodes and another for its prefills, each with
    # a fixed cost per step however few sequences take it (per layer: kernel launches, metadata, the
    # kernel's floor): a mixed step pays both. Our engine on an H200 (2026-12-04 profile) pays ~10 ms
    # each, from Python; without these terms its mixed steps were fitted ~25% short.
    "decode_step": ("decode attention path, per step that decodes (launches, floor)", "host"),
    "prefill_step": ("prefill attention path, per step that prefills (launches, floor)", "host"),
}


def _gemm_step(shape: Shape, fit: CostModelFit, tokens: int) -> float:
    return float(tokens >= fit.gemm_switch_tokens)


def _gemv_extra_token(shape: Shape, fit: CostModelFit, tokens: int) -> float:
    return float(max(tokens - 1, 0)) if tokens < fit.gemm_switch_tokens else 0.0


def _token_above_knee(shape: Shape, fit: CostModelFit, tokens: int) -> float:
    return float(max(-(-tokens // fit.tile_tokens) * fit.tile_tokens, fit.knee_tokens))


def _token_above_spill(shape: Shape, fit: CostModelFit, tokens: int) -> float:
    return 0.0 if fit.spill_tokens is None else float(max(tokens - fit.spill_tokens, 0.0))


def _step(shape: Shape, fit: CostModelFit, tokens: int) -> float:
    return 1.0


def _sequence(shape: Shape, fit: CostModelFit, tokens: int) -> float:
    return float(shape.num_seqs)


def _token(shape: Shape, fit: CostModelFit, tokens: int) -> float:
    return float(tokens)


def _prefill_attention_pair(shape: Shape, fit: CostModelFit, tokens: int) -> float:
    return float(shape.prefill_attention_pairs)


def _decode_context_token(shape: Shape, fit: CostModelFit, tokens: int) -> float:
    return float(shape.decode_context_tokens)


def _decode_step(shape: Shape, fit: CostModelFit, tokens: int) -> float:
    return 1.0 if shape.num_decode_seqs else 0.0


def _decode_sequence(shape: Shape, fit: CostModelFit, tokens: int) -> float:
    return float(shape.num_decode_seqs)


def _prefill_step(shape: Shape, fit: CostModelFit, tokens: int) -> float:
    return 1.0 if shape.num_prefill_seqs else 0.0


def _prefill_token(shape: Shape, fit: CostModelFit, tokens: int) -> float:
    return float(shape.num_prefill_tokens)


def _all_reduce_curve(shape: Shape, fit: CostModelFit, tokens: int) -> float:
    """Seconds of the step's all-reduces at `tokens`, as measured (`AllReduceCurve.seconds_at`)."""
    curve = fit.all_reduce_curve
    assert curve is not None, "a term of feature 'all_reduce_curve' needs the fit's curve"
    return curve.seconds_at(tokens)


# feature -> its units in a step, as f(shape, fit, the step's batched tokens): one small named function
# each (named, not lambdas: the compiled build's functions then pickle by reference, as Ray needs), so
# the per-step path calls exactly the features its terms use (`CostModel._groups`), no if-chain
FEATURE_UNITS = {
    "step": _step,
    "gemm_step": _gemm_step,
    "gemv_extra_token": _gemv_extra_token,
    "sequence": _sequence,
    "token": _token,
    "token_above_knee": _token_above_knee,
    "token_above_spill": _token_above_spill,
    "prefill_attention_pair": _prefill_attention_pair,
    "decode_context_token": _decode_context_token,
    # per-step floors of the attention kernels and a cost per decoding sequence (kernel-table fits)
    "decode_step": _decode_step,
    "decode_sequence": _decode_sequence,
    "prefill_step": _prefill_step,
    # a cost per prefill token only (whole-step fits that time prefill and decode steps apart)
    "prefill_token": _prefill_token,
    # measured seconds (its `seconds_per_unit` a plain scale, 1 as measured): a step's all-reduces
    "all_reduce_curve": _all_reduce_curve,
}


class StepTimer(Protocol):
    """What a simulated replica times its steps with: a `CostModel`, or one with an engine profile
    (`ProfiledCostModel`)."""

    def step_time(self, shape: Shape) -> float: ...

    def decode_stretch_times(self, shape: Shape, num_steps: int) -> list[float]: ...


def _units_of(feature: Feature):
    units = FEATURE_UNITS.get(feature)
    if units is None:
        raise ValueError(
            f"cost feature {feature!r} is unknown; expected one of {list(PROFILE_TERMS)}"
        )
    return units


def feature_value(feature: Feature, shape: Shape, fit: CostModelFit) -> float:
    """How many units of `feature` this step does, under the fit's shape parameters."""
    return _units_of(feature)(shape, fit, shape.num_batched_tokens)


class CostModel:
    """`step_time(shape)` in seconds from a fitted (or derived) set of terms."""

    def __init__(self, fit: CostModelFit):
        self.fit = fit
        # the terms grouped by name, in order of first appearance: what `explain` reports and `step_time`
        # adds up, read once here so the per-step path builds no dict (the fit is not changed after this)
        # (each feature's units function, not its name: no lookup per step)
        groups: dict[str, list[tuple[Callable, float]]] = {}
        for term in fit.terms:
            groups.setdefault(term.name, []).append(
                (_units_of(term.feature), term.seconds_per_unit)
            )
        self._names = tuple(groups)
        self._groups = tuple(tuple(group) for group in groups.values())

    def __reduce__(self):
        """Pickled as its fit (Ray ships it to actors): the compiled build's class has no other way."""
        return (CostModel, (self.fit,))

    @classmethod
    def from_calibration(cls, calibration: Calibration) -> "CostModel":
        if calibration.cost_model is None:
            raise ValueError(
                f"calibration {calibration.name!r} has no fitted cost model; "
                "run `surgeplan calibrations fit` on it first"
            )
        return cls(calibration.cost_model)

    @property
    def knee_tokens(self) -> float:
        return self.fit.knee_tokens

    def step_time(self, shape: Shape) -> float:
        """The simulator's hot path: once per step (twice per decode stretch)."""
        if shape.is_empty:
            return 0.0
        return sum(self._seconds_by_name(shape))

    def explain(self, shape: Shape) -> dict[str, float]:
        """Seconds each term contributes to this step (terms sharing a name are summed); for display,
        never per simulated step."""
        return dict(zip(self._names, self._seconds_by_name(shape)))

    def _seconds_by_name(self, shape: Shape) -> list[float]:
        """Seconds per term name, in `explain`'s order; they sum to `step_time`."""
        fit, parts, tokens = self.fit, [], shape.num_batched_tokens
        for group in self._groups:
            seconds = 0.0
            for units, seconds_per_unit in group:
                seconds += seconds_per_unit * units(shape, fit, tokens)
            parts.append(seconds)
        return parts

    def decode_stretch_times(self, shape: Shape, num_steps: int) -> list[float]:
        """Step times of `num_steps` decode steps of the same sequences, starting with `shape`, each
        context one token longer per step. Only the decode-attention term depends on context length,
        linearly, so step k costs step_time(shape) + k × (step_time(shape, contexts + 1) − step_time(shape))."""
        assert not shape.prefill_chunks, f"a decode stretch has no prefill; got {shape}"
        first = self.step_time(shape)
        if num_steps == 1:
            return [first]
        slope = sum(self._seconds_by_name(DecodeCounts(shape, 1))) - first
        return [first + k * slope for k in range(num_steps)]

    def step_times(self, shapes: Sequence[StepShape]) -> np.ndarray:
        return np.array([self.step_time(shape) for shape in shapes])

    def fit_error(self, target_prefix: str = "") -> FitError | None:
        matching = [
            error for error in self.fit.fit_errors if error.target.startswith(target_prefix)
        ]
        return matching[0] if matching else None


def step_regime(shape: StepShape) -> str:
    """Which kind of step this is, for stratified cross-validation."""
    if shape.num_batched_tokens == 1:
        return "single-token"
    if shape.num_batched_tokens <= 4:
        return "few-token"  # around the matrix-vector / matrix-matrix switch
    if not shape.prefill_chunks:
        return "decode"
    cached = any(cached_len for _, cached_len in shape.prefill_chunks)
    return ("mixed" if shape.decode_context_lens else "prefill") + ("+cached" if cached else "")


def predicted_vs_measured(calibration: Calibration) -> list[tuple[ProfilePoint, float]]:
    model = CostModel.from_calibration(calibration)
    return [(point, model.step_time(point.shape.to_shape())) for point in calibration.points]


def scaled_calibration(calibration: Calibration, factor: float) -> Calibration:
    """A copy whose every step takes `factor` times as long (factor > 0)."""
    if not factor > 0:
        raise ValueError(
            f"step-time factor {factor!r}; expected a positive number (1.04: 4% slower)"
        )
    fit = calibration.cost_model
    if fit is None:
        raise ValueError(
            f"calibration {calibration.name!r} has no fitted cost model; expected one to scale"
        )
    terms = [
        term.model_copy(update={"seconds_per_unit": term.seconds_per_unit * factor})
        for term in fit.terms
    ]
    return calibration.model_copy(
        update={
            "name": f"{calibration.name} x{factor:.4g}",
            "cost_model": fit.model_copy(update={"terms": terms}),
        }
    )
