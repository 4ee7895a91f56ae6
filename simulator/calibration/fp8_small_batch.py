"""A serving stack's fp8 linear layers at small batches: `SmallBatchFp8` times a GPU cost model's
steps with the fp8 linear-layer time up to the knee `scale` times the calibration's, and each token
beyond the knee at the calibration's own cost. Why: aiconfigurator's TensorRT-LLM fp8 GEMM tables
put a 4-sequence decode step of Llama-3-70B at TP4 on the H200 at 8.4 ms of linear layers (the
weight read at 44% of the HBM's bandwidth) against 8.0 ms measured for the whole served step, while
their large-batch fp8 GEMMs already run at ~64% of the dense fp8 peak: scaling every token would
make an 8,192-token prefill faster than the chip. So the scale covers f(min(tokens, knee)), the time
a step pays whatever its batch below the knee, and nothing beyond it:

    f'(tokens) = f(tokens) - (1 - scale) * f(min(tokens, knee))

Built once per replica by `ProfiledCostModel` (`EngineProfile.fp8_linear_scales`); the same
interface as `CostModel`, the wrapped model's per-step path unchanged."""

from __future__ import annotations

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import FEATURE_UNITS
from simulator.calibration.kernel_era import FP8_LINEAR_PREFIX


def has_fp8_linear(fit) -> bool:
    """Whether a cost model's fit times its linear layers with fp8 weights (`weight_dtype` fp8)."""
    return any(term.name.startswith(FP8_LINEAR_PREFIX) for term in fit.terms)


class SmallBatchFp8:
    """`gpu` (a `CostModel` with fp8 linear-layer terms) with those terms' time up to the knee
    `scale` times as long."""

    def __init__(self, gpu, scale: float):
        if not scale > 0:
            raise ValueError(f"fp8 small-batch scale {scale!r}; expected a positive number")
        self.gpu, self.scale, self.fit = gpu, scale, gpu.fit
        # (units, seconds per unit) of each fp8 linear-layer term, the knee they share
        self._terms = tuple(
            (FEATURE_UNITS[term.feature], term.seconds_per_unit)
            for term in gpu.fit.terms
            if term.name.startswith(FP8_LINEAR_PREFIX)
        )
        if not self._terms:
            raise ValueError(
                f"fp8 small-batch scale {scale} for a cost model without '{FP8_LINEAR_PREFIX}' "
                "terms; expected a calibration with fp8 weights (`weight_dtype` fp8)"
            )
        self._knee = int(gpu.fit.knee_tokens)

    def __reduce__(self):
        return (SmallBatchFp8, (self.gpu, self.scale))

    @property
    def knee_tokens(self) -> float:
        return self.gpu.knee_tokens

    def saved_s(self, shape: StepShape) -> float:
        """Seconds the scale takes off this step: (1 - scale) x its fp8 linear layers' time at
        min(tokens, knee)."""
        tokens = min(shape.num_batched_tokens, self._knee)
        if tokens <= 0:
            return 0.0
        seconds = 0.0
        for units, seconds_per_unit in self._terms:
            seconds += seconds_per_unit * units(shape, self.fit, tokens)
        return (1.0 - self.scale) * seconds

    def step_time(self, shape: StepShape) -> float:
        if shape.is_empty:
            return 0.0
        return self.gpu.step_time(shape) - self.saved_s(shape)

    def decode_stretch_times(self, shape: StepShape, num_steps: int) -> list[float]:
        # a stretch keeps its sequences: the same tokens, so the same saving, every step
        saved = self.saved_s(shape)
        return [seconds - saved for seconds in self.gpu.decode_stretch_times(shape, num_steps)]

    def explain(self, shape: StepShape) -> dict[str, float]:
        parts = dict(self.gpu.explain(shape))
        parts["fp8 linear layers below the knee (stack over tables)"] = -self.saved_s(shape)
        return parts

    def fit_error(self, target_prefix: str = ""):
        return self.gpu.fit_error(target_prefix)


__all__ = ["SmallBatchFp8", "has_fp8_linear"]
