"""A calibration for the scenario's precisions: weights stored in another dtype (fp8) and the KV
cache's dtype.

fp8 weights: the linear layers' terms are replaced by those the calibration carries for fp8
(`CostModelFit.weight_dtype_terms`), fitted on measured fp8 GEMMs the same way as the model-dtype
ones (aiconfigurator's sweeps on the GPUs that have fp8: H100, H200, B200, ...), with their own knee
and tile. A calibration without them refuses: an fp8 speed-up is never derived from a datasheet.
The LM head, attention, all-reduce and elementwise terms stay as they are (fp8 checkpoints keep the
LM head and activations between the GEMMs in the model's dtype); the KV cache's dtype then scales
decode attention (`kv_cache.kv_cache_calibration`).
"""

from simulator.calibration.kv_cache import kv_cache_calibration
from simulator.calibration.schema import Calibration


def supports_weight_dtype(calibration: Calibration, weight_dtype: str) -> bool:
    """Whether the calibration can time linear layers with `weight_dtype` weights (auto: always)."""
    fit = calibration.cost_model
    return weight_dtype == "auto" or (fit is not None and weight_dtype in fit.weight_dtype_terms)


def weight_dtype_calibration(calibration: Calibration, weight_dtype: str) -> Calibration:
    """The calibration with its linear-layer terms (and knee, tile) for `weight_dtype` weights;
    itself for auto; a clear error naming the calibration and its GPU when it has no such terms."""
    if weight_dtype == "auto":
        return calibration
    fit = calibration.cost_model
    if not supports_weight_dtype(calibration, weight_dtype):
        measured = sorted(fit.weight_dtype_terms) if fit is not None else []
        raise ValueError(
            f"model.weight_dtype={weight_dtype!r}: calibration {calibration.name!r} "
            f"({calibration.device.hardware or calibration.device.name}, tensor_parallel="
            f"{calibration.device.tensor_parallel}, {calibration.provenance.method}) has no "
            f"{weight_dtype} GEMM terms fitted on measurements (it has "
            f"{measured or 'none'}); {weight_dtype} linear layers are modelled only from measured "
            f"{weight_dtype} GEMMs (the aiconfigurator calibrations of GPUs with {weight_dtype} "
            "tables: H100, H200, B200 and others, not the A100); expected weight_dtype 'auto', or "
            "such a GPU and calibration (`surgeplan calibrations show NAME` lists its terms)"
        )
    variant = fit.weight_dtype_terms[weight_dtype]
    owner = f"calibration {calibration.name!r}: its {weight_dtype} linear-layer terms"
    return calibration.model_copy(
        update={
            "name": f"{calibration.name} weights={weight_dtype}",
            "cost_model": fit.model_copy(
                update={
                    "terms": variant.swapped_into(fit.terms, owner),
                    "knee_tokens": variant.knee_tokens,
                    "knee_label": variant.knee_label,
                    "tile_tokens": variant.tile_tokens,
                }
            ),
        }
    )


def precision_calibration(
    calibration: Calibration, weight_dtype: str, kv_cache_dtype: str
) -> Calibration:
    """What a scenario's steps are timed with: `weight_dtype` linear layers, then decode attention
    for a `kv_cache_dtype` cache."""
    return kv_cache_calibration(weight_dtype_calibration(calibration, weight_dtype), kv_cache_dtype)
