"""A calibration for a KV cache stored in another dtype: decode attention's time for that cache.

Where the calibration carries decode-attention terms fitted on kernels measured reading that cache
(`CostModelFit.kv_cache_dtype_terms`: aiconfigurator's fp8-KV decode sweeps), they replace the
model-dtype ones: an fp8 kernel's work per sequence differs from the bf16 one's, not only its bytes.
Otherwise the time is derived from the bytes: decode attention streams every context token's K and
V from memory once per step, so it is memory-bound and its KV read scales with the bytes per stored
value (an fp8 or int8 cache read by a kernel that dequantises on load, as `kernels/` and vLLM's fp8
KV do, reads half the bytes of a float16 one); that scaled term is labelled `derived` and named with
its factor. Nothing else changes: the linear layers' GEMMs stay in the weights' dtype (fp8 weights
are `weight_dtype`'s, timed from measured fp8 GEMMs: `weight_dtype.py`), and prefill attention stays
compute-bound.
"""

from engine.core.memory import kv_value_bytes
from simulator.calibration.schema import Calibration
from simulator.model_spec import dtype_bytes

DECODE_ATTENTION_FEATURE = "decode_context_token"
# the KV-cache dtypes a measured sweep stands for: fp8 is FP8 E4M3 (`aic_tables.KV_CACHE_DTYPES`)
MEASURED_AS = {"fp8": "fp8", "fp8_e4m3": "fp8"}


def kv_bytes_factor(calibration: Calibration, kv_cache_dtype: str) -> float:
    """Bytes per stored K/V value with `kv_cache_dtype` / those the calibration measured (its own
    dtype); 1 for auto, which keeps the cache the calibration was measured with."""
    measured = dtype_bytes(calibration.dtype)
    return kv_value_bytes(kv_cache_dtype, measured) / measured


def kv_cache_calibration(calibration: Calibration, kv_cache_dtype: str) -> Calibration:
    """The calibration with decode attention for a `kv_cache_dtype` cache: its measured terms for
    that dtype where it has them, else its KV-read term scaled by `kv_bytes_factor` (itself when the
    factor is 1)."""
    factor = kv_bytes_factor(calibration, kv_cache_dtype)
    fit = calibration.cost_model
    if factor == 1.0 or fit is None:
        return calibration
    measured = fit.kv_cache_dtype_terms.get(MEASURED_AS.get(kv_cache_dtype, ""))
    if measured is not None:
        owner = f"calibration {calibration.name!r}: its {kv_cache_dtype} KV decode terms"
        terms = measured.swapped_into(fit.terms, owner)
    else:
        terms = [
            term.model_copy(
                update={
                    "seconds_per_unit": term.seconds_per_unit * factor,
                    "label": "derived",
                    "name": f"{term.name} × {factor:g} (KV bytes, {kv_cache_dtype})",
                }
            )
            if term.feature == DECODE_ATTENTION_FEATURE
            else term
            for term in fit.terms
        ]
    return calibration.model_copy(
        update={
            "name": f"{calibration.name} kv={kv_cache_dtype}",
            "cost_model": fit.model_copy(update={"terms": terms}),
        }
    )
