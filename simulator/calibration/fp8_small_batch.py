"""A serving stack's fp8 linear layers at small batches: `SmallBatchFp8` times a GPU cost model's
steps with the fp8 linear-layer time up to the knee `scale` times the calibration's, and each token
beyond the knee at the calibration's own cost. Why: aiconfigurator's TensorRT-LLM fp8 GEMM tables
put a 4-sequence decode step of Llama-3-70B at TP4 on the H200 at 8.4 ms of linear layers (the
weight read at 44% of the HBM's bandwidth) against 8.0 ms measured for the whole served step, while
their large-batch fp8 GEMMs already run at ~64% of the dense fp8 peak: scaling every token would
make an 8,192-token prefill faster than the chip. So the scale covers f(min(tokens, knee)), the time
a step pays whatever its batch below the knee, and nothing beyond it:

    f'(tokens) = f(tokens) - (1 - scale) * f(min(tokens, knee))
                 + (large - 1) * (f(tokens) - f(min(tokens, knee)))

where `large` (1 unless fitted: `EngineProfile.fp8_large_batch_scales`) is the served stack's time
per token beyond the knee over the tables'. Fitted per GPU on published first-token times (vLLM V1
on H200: the tables' fp8 prefill GEMMs are faster than its served 1,024-8,192-token prefills), never
carried to another GPU: on H100 and H200, the same sm_90 kernels, the served runs fit it on opposite
sides of 1, so it holds what differs between those two deployments, not the GEMMs alone.

Built once per replica by `ProfiledCostModel` (`EngineProfile.fp8_linear_scales`); the same
interface as `CostModel`, the wrapped model's per-step path unchanged. A scale fitted on one GPU and
carried to another of the same kernel build target (`EngineProfile.fp8_linear_scale`) keeps the
served weight read at the same share of each GPU's HBM peak (`with_carried_fp8`), not the same ratio
of times: the two GPUs' tables read at different shares (TensorRT-LLM's H100 fp8 tables at 49%, the
H200's at 42%), and the time ratio would put the H100's served read at 99% of its peak.

A scale fitted at one model and TP degree (`EngineProfile.fp8_linear_reference`) and applied at
another takes off the same seconds per layer (`carried_fp8_shape`), not the same ratio. Why: over TP
1 / 2 / 4 / 8 of Llama-3-70B, TensorRT-LLM's B200 fp8 tables time a small decode step's linear
layers as ~5.0 ms plus the weight read at ~75% of the HBM peak, so their share of the peak falls
from 55% at TP1 to 18% at TP8: a fixed cost per GEMM (the H200's: ~4.3 ms) that the served steps,
replayed in graphs, do not pay. The TP4 ratio (x0.46) carried as a ratio put TP1's served read at
119% of the B200's peak, and its held-out TPOT 20-30% fast; the same seconds per layer put it at
74%, and give Llama-3-8B at TP1 x0.47 where a ratio gives x0.46."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.core.step_shape import StepShape
from engine.model.presets import preset_names
from simulator.calibration.cost_model import FEATURE_UNITS, CostModel
from simulator.calibration.host_terms import eager_units
from simulator.calibration.kernel_era import FP8_LINEAR_PREFIX, linear_s
from simulator.calibration.schema import Calibration
from simulator.calibration.weight_dtype import supports_weight_dtype, weight_dtype_calibration
from simulator.hardware.catalog import get_hardware

if TYPE_CHECKING:
    from simulator.calibration.engine_profile import EngineProfile

# the decode step a carried scale compares two GPUs' fp8 tables at: below every knee, so the weights
# are read once and the step pays what the scale covers
CARRY_SHAPE = StepShape((), (512,) * 8)


class Fp8Reference(BaseModel):
    """The model and TP degree an fp8 linear-layer scale was fitted at
    (`EngineProfile.fp8_linear_reference`)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    tensor_parallel: int = Field(ge=1)

    @field_validator("model")
    @classmethod
    def _a_known_model(cls, model: str) -> str:
        if model not in preset_names():
            raise ValueError(
                f"fp8_linear_reference model {model!r} is unknown; expected one of {preset_names()}"
            )
        return model


def has_fp8_linear(fit) -> bool:
    """Whether a cost model's fit times its linear layers with fp8 weights (`weight_dtype` fp8)."""
    return any(term.name.startswith(FP8_LINEAR_PREFIX) for term in fit.terms)


class SmallBatchFp8:
    """`gpu` (a `CostModel` with fp8 linear-layer terms) with those terms' time up to the knee
    `scale` times as long, and beyond it `large` times as long; the first only on the steps the
    stack replays as CUDA graphs: not, with `decode_only`, a step with a prefill chunk, nor one of
    more than `graph_max_tokens` tokens (`EngineProfile.graph_steps`, `graph_max_tokens`)."""

    def __init__(
        self,
        gpu,
        scale: float,
        large: float = 1.0,
        decode_only: bool = False,
        graph_max_tokens: int | None = None,
    ):
        for name, value in (("small-batch", scale), ("large-batch", large)):
            if not value > 0:
                raise ValueError(f"fp8 {name} scale {value!r}; expected a positive number")
        self.gpu, self.scale, self.large, self.fit = gpu, scale, large, gpu.fit
        self.decode_only, self.graph_max_tokens = decode_only, graph_max_tokens
        # which steps run eagerly: the eager-launch term's rule (one "layer": 1 where eager)
        self._eager = eager_units("decode_only" if decode_only else "every", graph_max_tokens, 1)
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
        return (
            SmallBatchFp8,
            (self.gpu, self.scale, self.large, self.decode_only, self.graph_max_tokens),
        )

    @property
    def knee_tokens(self) -> float:
        return self.gpu.knee_tokens

    def saved_s(self, shape: StepShape) -> float:
        """Seconds the scales take off this step: (1 - scale) x its fp8 linear layers' time at
        min(tokens, knee) (not on a step the stack runs eagerly: with a prefill chunk when
        `decode_only`, or of more than `graph_max_tokens` tokens), less (large - 1) x their time
        for the tokens beyond the knee."""
        tokens = shape.num_batched_tokens
        below = min(tokens, self._knee)
        if below <= 0:
            return 0.0
        eager = self._eager(shape) > 0
        beyond_knee = tokens > below and self.large != 1.0
        if eager and not beyond_knee:
            return 0.0
        up_to_knee = 0.0
        for units, seconds_per_unit in self._terms:
            up_to_knee += seconds_per_unit * units(shape, self.fit, below)
        saved = 0.0 if eager else (1.0 - self.scale) * up_to_knee
        if beyond_knee:
            beyond = -up_to_knee
            for units, seconds_per_unit in self._terms:
                beyond += seconds_per_unit * units(shape, self.fit, tokens)
            saved -= (self.large - 1.0) * beyond
        return saved

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
        parts["fp8 linear layers, served stack over tables"] = -self.saved_s(shape)
        return parts

    def fit_error(self, target_prefix: str = ""):
        return self.gpu.fit_error(target_prefix)


def fp8_read_s(calibration: Calibration) -> float:
    """Seconds of `calibration`'s fp8 linear layers at `CARRY_SHAPE` (its fp8 weights' terms)."""
    if not has_fp8_linear(calibration.cost_model):
        calibration = weight_dtype_calibration(calibration, "fp8")
    return linear_s(CostModel.from_calibration(calibration), CARRY_SHAPE, fp8=True)


def carried_fp8_scale(scale: float, source: Calibration, target: Calibration) -> float:
    """`scale`, fitted on `source`'s GPU, for `target`'s (the same model, TP degree and backend): the
    served fp8 weight read at the same share of each GPU's HBM peak as on the source."""
    peak_source = get_hardware(source.device.hardware).memory_bandwidth_bytes_per_s
    peak_target = get_hardware(target.device.hardware).memory_bandwidth_bytes_per_s
    return scale * fp8_read_s(source) * peak_source / (fp8_read_s(target) * peak_target)


def carried_fp8_shape(scale: float, reference: Calibration, target: Calibration) -> float:
    """`scale`, fitted at `reference`'s model and TP degree, for `target`'s on the same GPU: the
    same seconds taken off per layer at `CARRY_SHAPE`, never a served weight read above the HBM
    peak (the floor: the tables' own share of it)."""
    saved_per_layer_s = (1.0 - scale) * fp8_read_s(reference) / reference.model.num_layers
    target_s = fp8_read_s(target)
    carried = 1.0 - saved_per_layer_s * target.model.num_layers / target_s
    weights_bytes = target.model.linear_weight_bytes_per_gpu(target.device.tensor_parallel, 1)
    peak = get_hardware(target.device.hardware).memory_bandwidth_bytes_per_s
    return max(carried, weights_bytes / (peak * target_s))


def with_carried_fp8(profile: EngineProfile, calibration: Calibration) -> EngineProfile:
    """`profile` with the fp8 scale it carries to `calibration` made its GPU's own entry: from the
    GPU it was fitted on to another of the same kernel build target by `carried_fp8_scale` (at the
    reference model and degree), then from the reference model and degree to `calibration`'s by
    `carried_fp8_shape`. `profile` itself where it carries none or `calibration` has no fp8 linear
    layers; a step is skipped (the ratio carries as fitted) where a GPU has no shipped fp8 tables
    of the same backend at the reference shape."""
    from simulator.calibration.shipped import calibration_for  # the catalog of shipped fits

    gpu = calibration.device.hardware or calibration.device.name
    scale, source_gpu = profile.fp8_linear_scale(gpu)
    if (
        source_gpu is None
        or calibration.cost_model is None
        or not has_fp8_linear(calibration.cost_model)
    ):
        return profile
    backend = calibration.provenance.backend
    reference = profile.fp8_linear_reference.get(source_gpu)
    model, degree = (
        (reference.model, reference.tensor_parallel)
        if reference is not None
        else (calibration.model.name, calibration.device.tensor_parallel)
    )

    def tables(on_gpu: str) -> Calibration | None:
        """The backend's fp8 calibration of the reference model and degree on `on_gpu`."""
        if on_gpu == gpu and (model, degree) == (
            calibration.model.name,
            calibration.device.tensor_parallel,
        ):
            return calibration
        found = calibration_for(
            model, on_gpu, degree, backend=backend or "vllm", weight_dtype="fp8"
        )
        same = (found.provenance.backend, found.model.name, found.device.tensor_parallel) == (
            backend,
            model,
            degree,
        )
        return found if same and supports_weight_dtype(found, "fp8") else None

    carried, here = scale, tables(gpu)
    if source_gpu != gpu:
        source = tables(source_gpu)
        if source is None or here is None:
            return profile
        carried = carried_fp8_scale(scale, source, here)
    if here is not None and here is not calibration:
        carried = carried_fp8_shape(carried, here, calibration)
    if carried == scale:
        return profile
    return profile.model_copy(
        update={"fp8_linear_scales": {**profile.fp8_linear_scales, gpu: round(carried, 4)}}
    )


__all__ = [
    "CARRY_SHAPE",
    "Fp8Reference",
    "SmallBatchFp8",
    "carried_fp8_scale",
    "carried_fp8_shape",
    "fp8_read_s",
    "has_fp8_linear",
    "with_carried_fp8",
]
