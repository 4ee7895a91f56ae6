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
(`hardware.fused_all_reduce_mb`, a map by degree as vLLM's) reads, up to it, aiconfigurator's TensorRT-LLM all-reduce table
of the same GPU, model and degree, and the calibration's own beyond. The two fused add + RMSNorm
kernels a layer no longer launches (one after each of its two all-reduces) come off those sizes at the
calibration's own derived figure for them (`aic_terms.elementwise_terms`: 2 of its 5 kernels a layer,
their launch latency; their bytes stay, the fused kernel still moves the residual); the fused fp8
quantisation is in no term, so nothing comes off for it."""

from __future__ import annotations

from collections.abc import Mapping

from simulator.calibration.aic_terms import ELEMENTWISE_KERNELS_PER_LAYER, ELEMENTWISE_TERM_NAME
from simulator.calibration.all_reduce_curve import AllReduceCurve
from simulator.calibration.schema import Calibration, CostModelFit

ACTIVATION_BYTES = 2  # the all-reduced activations are bf16 / fp16 (fp8 weights too)
NORMS_PER_LAYER = 2  # the fused add + RMSNorm after each of a layer's two all-reduces


def fused_all_reduce_calibration(
    calibration: Calibration, thresholds_mb: Mapping[int, float]
) -> Calibration:
    """`calibration` whose all-reduces of up to its degree's threshold in `thresholds_mb` (MiB of
    activations per GPU, by tensor-parallel degree, as vLLM's own map) take TensorRT-LLM's measured
    times (`with_fused_below`); itself where its degree has none or it has no all-reduce (one GPU).
    A calibration whose all-reduce is a fitted term rather than a measured curve (Vidur's, a
    roofline) is refused: its fused part cannot be swapped."""
    fit = calibration.cost_model
    gpu, tp = (
        calibration.device.hardware or calibration.device.name,
        calibration.device.tensor_parallel,
    )
    limit_mb = thresholds_mb.get(tp)
    if limit_mb is None or tp == 1:
        return calibration
    if fit is None or fit.all_reduce_curve is None:
        raise ValueError(
            f"hardware.fused_all_reduce_mb is {limit_mb:g} MiB at tensor_parallel={tp}, but "
            f"calibration {calibration.name} times "
            "its all-reduce by a fitted term, not a measured curve; expected an aiconfigurator "
            "calibration of this GPU, model and degree (`surgeplan calibrations list`), or no "
            "threshold at this degree"
        )
    from simulator.calibration.shipped import calibration_for

    fused = calibration_for(calibration.model.name, gpu, tp, backend="trtllm")
    if (
        fused.provenance.backend != "trtllm"
        or fused.cost_model is None
        or fused.cost_model.all_reduce_curve is None
    ):
        raise ValueError(
            f"hardware.fused_all_reduce_mb is {limit_mb:g} MiB at tensor_parallel={tp}, but no "
            "TensorRT-LLM kernel table times the "
            f"all-reduce of {calibration.model.name} on {gpu} at tensor_parallel={tp} (best found: "
            f"{fused.name}); expected a GPU, model and degree with an aiconfigurator TensorRT-LLM "
            "calibration (`surgeplan calibrations list`), or no threshold at this degree"
        )
    limit_tokens = limit_mb * 2**20 / (calibration.model.hidden_size * ACTIVATION_BYTES)
    curve = with_fused_below(
        fit.all_reduce_curve,
        fused.cost_model.all_reduce_curve,
        limit_tokens,
        absorbed_norms_s(fit),
    )
    return calibration.model_copy(
        update={"cost_model": fit.model_copy(update={"all_reduce_curve": curve})}
    )


def absorbed_norms_s(fit: CostModelFit) -> float:
    """A step's launch latency of the add + RMSNorm kernels the fused all-reduce absorbs: the
    derived elementwise latency term's share of them (2 of its kernels a layer); 0 for a fit
    without that term (its elementwise time is not apart from its fitted terms)."""
    latency = [
        term.seconds_per_unit
        for term in fit.terms
        if term.name == ELEMENTWISE_TERM_NAME and term.feature == "step" and term.label == "derived"
    ]
    return sum(latency) * NORMS_PER_LAYER / ELEMENTWISE_KERNELS_PER_LAYER


def with_fused_below(
    own: AllReduceCurve, fused: AllReduceCurve, limit_tokens: float, absorbed_s: float = 0.0
) -> AllReduceCurve:
    """One curve: `fused`'s time less `absorbed_s` (the kernels the fused one replaces beside the
    all-reduce) at every measured size up to `limit_tokens`, `own`'s beyond (a step's all-reduces
    are one kernel or the other by their size; between the two sizes either side of the limit the
    curve is read log-log as any other)."""
    if limit_tokens <= 0:
        raise ValueError(f"fused all-reduce limit is {limit_tokens} tokens; expected > 0")
    sizes = sorted(set(own.tokens) | set(fused.tokens))
    seconds = [
        fused.seconds_at(tokens) - absorbed_s if tokens <= limit_tokens else own.seconds_at(tokens)
        for tokens in sizes
    ]
    if min(seconds) <= 0:
        raise ValueError(
            f"the fused all-reduce's absorbed kernels ({absorbed_s * 1e3:.3f} ms a step) are not "
            f"below its own time ({min(fused.seconds) * 1e3:.3f} ms at its smallest size); expected "
            "an all-reduce table slower than the norms it absorbs"
        )
    return AllReduceCurve(tokens=sizes, seconds=seconds)


__all__ = ["absorbed_norms_s", "fused_all_reduce_calibration", "with_fused_below"]
