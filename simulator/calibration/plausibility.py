"""Physical bounds a GPU calibration's kernel model must respect: decode attention cannot read the
KV cache faster than the GPU's HBM peak, the linear layers cannot read their weights faster than it
at one decode sequence, nor run a 4,096-token prefill (or prefill attention) faster than the dense
peak.

Why: a measured kernel table can break them (a collector that timed less work than its rows name),
and a model fitted on it then predicts a stack faster than the hardware allows: the optimistic
planner the article warns about. aiconfigurator 0.12's A100 TensorRT-LLM decode-attention table
(`a100_sxm/attention/trtllm/1.0.0`) is one: fitted, it reads the KV cache at 2.7-3.3 TB/s on a GPU
whose HBM gives 2.04. The aiconfigurator importer refuses such a table (`check_plausible`), and
the shipped calibrations are held to the same bounds by a test.
"""

from __future__ import annotations

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import CostModel
from simulator.calibration.kernel_era import linear_s
from simulator.calibration.schema import Calibration, CostTerm
from simulator.hardware.catalog import get_hardware

# A fitted per-token slope may sit a little above the peak (the per-sequence term and the floor
# take part of the time; small contexts read from L2): up to 1.11x in the shipped tables (an fp8
# table on a GPU with a 128 MB L2; bf16 tables 1.04x).
KV_READ_LIMIT = 1.15
# The linear layers' whole time, at one sequence and at a 4,096-token prefill: no slack needed
# (the shipped tables reach 0.96 of either peak).
LINEAR_LIMIT = 1.0
PREFILL_TOKENS = 4096


def kv_read_rates(calibration: Calibration) -> list[tuple[CostTerm, float]]:
    """(term, bytes per second it reads the KV cache at) for each decode per-context-token term,
    those fitted for another KV-cache dtype (fp8: one byte a value) included."""
    model, tensor_parallel = calibration.model, calibration.device.tensor_parallel
    fit = calibration.cost_model
    terms = [(term, "auto") for term in fit.terms]
    for kv_cache_dtype, variant in fit.kv_cache_dtype_terms.items():
        terms += [(term, kv_cache_dtype) for term in variant.terms]
    return [
        (term, model.kv_bytes_per_token_per_gpu(tensor_parallel, dtype) / term.seconds_per_unit)
        for term, dtype in terms
        if term.feature == "decode_context_token" and term.seconds_per_unit > 0
    ]


def linear_peak_shares(calibration: Calibration) -> tuple[float, float]:
    """(share of the HBM peak the model-dtype linear layers read their weights at, one decode
    sequence; share of the dense peak they compute at, a 4,096-token prefill)."""
    model, tensor_parallel = calibration.model, calibration.device.tensor_parallel
    hardware = get_hardware(calibration.device.hardware)
    cost = CostModel.from_calibration(calibration)

    weight_bytes = model.linear_weight_bytes_per_gpu(tensor_parallel, model.dtype_bytes)
    decode_s = linear_s(cost, StepShape((), (512,)), fp8=False)
    prefill_s = linear_s(cost, StepShape(((PREFILL_TOKENS, 0),), ()), fp8=False)
    read = weight_bytes / hardware.memory_bandwidth_bytes_per_s / decode_s
    flops = model.linear_flops_per_token * PREFILL_TOKENS / tensor_parallel
    return read, flops / hardware.peak_flops(model.dtype) / prefill_s


def prefill_attention_shares(calibration: Calibration) -> list[tuple[CostTerm, float]]:
    """(term, share of the dense peak) for each per-(query, key)-pair prefill attention term."""
    model, tensor_parallel = calibration.model, calibration.device.tensor_parallel
    peak = get_hardware(calibration.device.hardware).peak_flops(model.dtype)
    flops = model.attention_flops_per_pair / tensor_parallel
    return [
        (term, flops / term.seconds_per_unit / peak)
        for term in calibration.cost_model.terms
        if term.feature == "prefill_attention_pair" and term.seconds_per_unit > 0
    ]


def implausible_terms(calibration: Calibration) -> list[str]:
    """What in a GPU calibration's kernel model is faster than its hardware allows (none: [])."""
    if calibration.cost_model is None or calibration.device.kind != "gpu":
        return []
    hardware = get_hardware(calibration.device.hardware)
    peak = hardware.memory_bandwidth_bytes_per_s
    found = [
        f"{term.name} reads the KV cache at {rate / 1e9:.0f} GB/s, {rate / peak:.0%} of the "
        f"{hardware.name}'s {peak / 1e9:.0f} GB/s HBM peak (expected at most "
        f"{KV_READ_LIMIT:.0%}; {term.note})"
        for term, rate in kv_read_rates(calibration)
        if rate > KV_READ_LIMIT * peak
    ]
    read, compute = linear_peak_shares(calibration)
    if read > LINEAR_LIMIT:
        found.append(
            f"the linear layers read their weights at {read:.0%} of the HBM peak at one decode "
            f"sequence (expected at most {LINEAR_LIMIT:.0%})"
        )
    for term, share in prefill_attention_shares(calibration):
        if share > LINEAR_LIMIT:
            found.append(
                f"{term.name} computes at {share:.0%} of the dense {calibration.model.dtype} peak "
                f"(expected at most {LINEAR_LIMIT:.0%}; {term.note})"
            )
    if compute > LINEAR_LIMIT:
        found.append(
            f"the linear layers compute a {PREFILL_TOKENS}-token prefill at {compute:.0%} of the "
            f"dense {calibration.model.dtype} peak (expected at most {LINEAR_LIMIT:.0%})"
        )
    return found


def without_implausible_kv_variants(calibration: Calibration) -> Calibration:
    """`calibration` without the decode terms fitted for another KV-cache dtype that read faster
    than the GPU allows (a large L2 holding the small contexts of an fp8 sweep does this); that
    dtype's decode is then derived from the model-dtype terms by its bytes, and a note says why."""
    fit = calibration.cost_model
    peak = get_hardware(calibration.device.hardware).memory_bandwidth_bytes_per_s
    fast = {
        term.name: rate for term, rate in kv_read_rates(calibration) if rate > KV_READ_LIMIT * peak
    }
    dropped = {
        dtype: max(fast[term.name] for term in variant.terms if term.name in fast)
        for dtype, variant in fit.kv_cache_dtype_terms.items()
        if any(term.name in fast for term in variant.terms)
    }
    if not dropped:
        return calibration
    kept = {k: v for k, v in fit.kv_cache_dtype_terms.items() if k not in dropped}
    notes = [
        f"{dtype} KV decode table not used: it reads the KV cache at {rate / peak:.0%} of the HBM "
        f"peak (at most {KV_READ_LIMIT:.0%} expected); that dtype's decode is derived by its bytes"
        for dtype, rate in dropped.items()
    ]
    return calibration.model_copy(
        update={
            "cost_model": fit.model_copy(update={"kv_cache_dtype_terms": kept}),
            "provenance": calibration.provenance.model_copy(
                update={"notes": [*calibration.provenance.notes, *notes]}
            ),
        }
    )


def check_plausible(calibration: Calibration) -> Calibration:
    """`calibration`, or a ValueError naming each term faster than its GPU allows."""
    found = implausible_terms(calibration)
    if found:
        raise ValueError(
            f"calibration {calibration.name!r} is faster than the {calibration.device.hardware} "
            "can be, so the kernel table it was fitted on timed less work than its rows name: "
            + "; ".join(found)
        )
    return calibration


__all__ = [
    "KV_READ_LIMIT",
    "LINEAR_LIMIT",
    "check_plausible",
    "implausible_terms",
    "kv_read_rates",
    "linear_peak_shares",
    "prefill_attention_shares",
    "without_implausible_kv_variants",
]
