"""A deployment's fused tensor-parallel all-reduce: the all-reduces up to a size run TensorRT-LLM's
one-shot kernel instead of the stack's own.

vLLM's `compilation_config.pass_config.enable_fi_allreduce_fusion` replaces each all-reduce (and
the residual add, RMSNorm and fp8 quantisation after it) by FlashInfer's `trtllm_allreduce_fusion`,
a port of TensorRT-LLM's fused all-reduce kernel, for activations up to a size per TP degree
(vLLM's `FI_ALLREDUCE_FUSION_MAX_SIZE_MB`, overridden by `VLLM_FLASHINFER_ALLREDUCE_FUSION_THRESHOLDS_MB`;
InferenceMAX's B200 vLLM runs set 32 / 32 / 8 MB at TP 2 / 4 / 8); larger ones keep vLLM's
all-reduce. aiconfigurator's vLLM tables time vLLM's own custom all-reduce, whose B200 table is
slower at decode sizes (TP8: 1.38 ms a step of 80 layers at 4 tokens against TensorRT-LLM's 0.96)
and not monotone (16-32 tokens 4.1 ms, 64 tokens 2.7 ms). So a scenario that names the threshold
(`hardware.fused_all_reduce_mb`) reads, up to it, aiconfigurator's TensorRT-LLM all-reduce table
of the same GPU, model and degree, and the calibration's own beyond. The fused norm and quantisation
are not taken out of the elementwise term (no table times them apart): the step errs long there."""

from __future__ import annotations

from simulator.calibration.all_reduce_curve import AllReduceCurve
from simulator.calibration.schema import Calibration

ACTIVATION_BYTES = 2  # the all-reduced activations are bf16 / fp16 (fp8 weights too)


def fused_all_reduce_calibration(calibration: Calibration, limit_mb: float | None) -> Calibration:
    """`calibration` whose all-reduces of up to `limit_mb` MiB of activations (per GPU) take
    TensorRT-LLM's measured times (`with_fused_below`); itself where `limit_mb` is None or it has
    no all-reduce (one GPU)."""
    fit = calibration.cost_model
    if limit_mb is None or fit is None or fit.all_reduce_curve is None:
        return calibration
    from simulator.calibration.shipped import _any_model_spec, calibration_for

    gpu, tp = (
        calibration.device.hardware or calibration.device.name,
        calibration.device.tensor_parallel,
    )
    fused = calibration_for(calibration.model.name, gpu, tp, backend="trtllm")
    if (
        fused.provenance.backend != "trtllm"
        or fused.cost_model is None
        or fused.cost_model.all_reduce_curve is None
    ):
        raise ValueError(
            f"hardware.fused_all_reduce_mb is {limit_mb}, but no TensorRT-LLM kernel table times the "
            f"all-reduce of {calibration.model.name} on {gpu} at tensor_parallel={tp} (best found: "
            f"{fused.name}); expected a GPU, model and degree with an aiconfigurator TensorRT-LLM "
            "calibration (`surgeplan calibrations list`), or fused_all_reduce_mb unset"
        )
    hidden = _any_model_spec(calibration.model.name).hidden_size
    limit_tokens = limit_mb * 2**20 / (hidden * ACTIVATION_BYTES)
    curve = with_fused_below(fit.all_reduce_curve, fused.cost_model.all_reduce_curve, limit_tokens)
    return calibration.model_copy(
        update={"cost_model": fit.model_copy(update={"all_reduce_curve": curve})}
    )


def with_fused_below(
    own: AllReduceCurve, fused: AllReduceCurve, limit_tokens: float
) -> AllReduceCurve:
    """One curve: `fused`'s time at every measured size up to `limit_tokens`, `own`'s beyond (a
    step's all-reduces are one kernel or the other by their size; between the two sizes either
    side of the limit the curve is read log-log as any other)."""
    if limit_tokens <= 0:
        raise ValueError(f"fused all-reduce limit is {limit_tokens} tokens; expected > 0")
    sizes = sorted(set(own.tokens) | set(fused.tokens))
    seconds = [
        fused.seconds_at(tokens) if tokens <= limit_tokens else own.seconds_at(tokens)
        for tokens in sizes
    ]
    return AllReduceCurve(tokens=sizes, seconds=seconds)


__all__ = ["fused_all_reduce_calibration", "with_fused_below"]
