"""A calibration for a KV cache stored in another dtype: decode attention time from the KV bytes it
reads.

Decode attention streams every context token's K and V from memory once per step, so it is
memory-bound
and its time scales with the bytes per stored value: an fp8 or int8 cache read by a kernel that
dequantises
on load (as `kernels/` and vLLM's fp8 KV do) reads half the bytes of a float16 one. Nothing else
changes:
the linear layers' GEMMs stay in the weights' dtype (fp8 weights are `weight_dtype`'s, timed from
measured fp8 GEMMs: `weight_dtype.py`), and prefill attention stays compute-bound. The scaled term is labelled `derived`
(not measured) and named with its factor.
"""

from engine.core.memory import kv_value_bytes
from simulator.calibration.schema import Calibration
from simulator.model_spec import dtype_bytes

DECODE_ATTENTION_FEATURE = "decode_context_token"


def kv_bytes_factor(calibration: Calibration, kv_cache_dtype: str) -> float:
    """Bytes per stored K/V value with `kv_cache_dtype` / those the calibration measured (its own
    dtype);
    1 for auto, which keeps the cache the calibration was measured with."""
    measured = dtype_bytes(calibration.dtype)
    return kv_value_bytes(kv_cache_dtype, measured) / measured


def kv_cache_calibration(calibration: Calibration, kv_cache_dtype: str) -> Calibration:
    """The calibration with its decode-attention term scaled by `kv_bytes_factor` (itself when the
    factor is 1)."""
    factor = kv_bytes_factor(calibration, kv_cache_dtype)
    fit = calibration.cost_model
    if factor == 1.0 or fit is None:
        return calibration
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
