"""The aiconfigurator fits (`aic_fit`) as a step's cost terms: the linear layers' three roofline
terms (and, for each weight dtype other than the model's that the GEMM sweep measured, the terms
that replace them), decode attention's three (and, for each KV-cache dtype the attention sweep
measured beside the model's, the terms that replace them), and the elementwise kernels the tables
leave out (derived). Each term keeps the note of the table and version it came from."""

from pathlib import Path

from simulator.calibration import aic_tables as tables
from simulator.calibration.aic_fit import TermFit, fit_decode_attention, fit_linear_layers
from simulator.calibration.aic_repeats import AmbiguousTable
from simulator.calibration.schema import CostTerm, DtypeTerms, WeightDtypeTerms
from simulator.hardware.catalog import get_hardware
from simulator.model_spec import ModelSpec

# Elementwise kernels per layer the GEMM and attention tables leave out (fused add+RMSNorm twice,
# RoPE, SiLU-and-mul, KV-cache store), each costing aiconfigurator's own memory-op latency constant.
ELEMENTWISE_KERNELS_PER_LAYER = 5
ELEMENTWISE_KERNEL_S = 3e-6
ELEMENTWISE_BANDWIDTH = 0.8
ELEMENTWISE_TERM_NAME = "elementwise kernels (norms, RoPE, activation, KV store)"


def cost_term(
    name: str, feature: str, bound: str, seconds: float, note: str, label: str = "fitted"
) -> CostTerm:
    return CostTerm(
        name=name,
        feature=feature,
        bound=bound,
        label=label,
        seconds_per_unit=max(float(seconds), 0.0),
        note=note,
    )


def linear_terms(fit: TermFit, layers: int, prefix: str = "linear layers") -> list[CostTerm]:
    """One layer's GEMMs fitted by the roofline model, as a step's terms: the weight-read floor,
    per token, and whole tiles above the knee."""
    floor, per_token, above_knee = fit.coefficients
    note = fit.error.note
    return [
        cost_term(f"{prefix}: weight-read floor", "step", "memory", floor * layers, note),
        cost_term(f"{prefix}: per token", "token", "compute", per_token * layers, note),
        cost_term(
            f"{prefix}: max(tokens, knee) × compute",
            "token_above_knee",
            "compute",
            above_knee * layers,
            note,
        ),
    ]


def weight_dtype_terms(
    root: Path,
    system: str,
    backend: str,
    version: str,
    model: ModelSpec,
    tensor_parallel: int,
    replaces: list[CostTerm],
) -> dict[str, WeightDtypeTerms]:
    """Linear-layer terms for each weight_dtype whose GEMMs the backend's sweep (the same version
    folder) measured on this GPU, fitted the same way as the bf16 ones; none where it has no rows
    (an A100 has no fp8). The LM head stays in the model's dtype, as fp8 checkpoints leave it."""
    found = {}
    for weight_dtype, gemm_dtype in tables.GEMM_DTYPES.items():
        if weight_dtype == "auto":
            continue
        try:
            gemm = tables.read_gemm(root, system, backend, version, gemm_dtype)
        except ValueError:
            continue
        fit, _ = fit_linear_layers(gemm, model, tensor_parallel)
        found[weight_dtype] = WeightDtypeTerms(
            knee_tokens=fit.params[0],
            knee_label="fitted",
            tile_tokens=int(fit.params[1]),
            replaces=[term.name for term in replaces],
            terms=linear_terms(fit, model.num_layers, f"linear layers ({weight_dtype})"),
            fit_errors=[fit.error],
        )
    return found


def decode_attention_terms(
    fit: TermFit,
    layers: int,
    kv_scale: float,
    table_kv_heads: int,
    prefix: str = "decode attention",
) -> list[CostTerm]:
    """One layer's decode attention fitted per step, sequence and context token, as a step's terms.
    Without rows for the model's KV heads per GPU (Llama-2's 32: multi-head attention), the nearest
    grouped layout (`table_kv_heads`) is timed and its KV read scaled by the KV bytes (`kv_scale`,
    derived)."""
    floor, per_sequence, per_token = fit.coefficients
    note = fit.error.note
    kv_note = note + (
        ""
        if kv_scale == 1
        else f"; {table_kv_heads} KV-head rows × {kv_scale:g} "
        f"(this model reads {round(kv_scale * table_kv_heads)} KV heads per GPU)"
    )
    return [
        cost_term(f"{prefix}: per-layer floor", "decode_step", "latency", floor * layers, note),
        cost_term(
            f"{prefix}: per sequence", "decode_sequence", "memory", per_sequence * layers, note
        ),
        cost_term(
            f"{prefix} (KV read)",
            "decode_context_token",
            "memory",
            per_token * layers * kv_scale,
            kv_note,
            "fitted" if kv_scale == 1 else "derived",
        ),
    ]


def kv_cache_dtype_terms(
    root: Path,
    system: str,
    backend: str,
    version: str,
    heads: int,
    table_kv_heads: int,
    model: ModelSpec,
    kv_scale: float,
    replaces: list[CostTerm],
) -> dict[str, DtypeTerms]:
    """Decode-attention terms for each KV-cache dtype whose decode kernels the backend's attention
    sweep (the same version folder) measured for these heads, fitted the same way as the bf16
    ones; none where it has no rows."""
    found = {}
    for kv_cache_dtype, table_dtype in tables.KV_CACHE_DTYPES.items():
        try:
            table = tables.read_attention(
                root,
                system,
                backend,
                "generation",
                heads,
                table_kv_heads,
                model.head_dim,
                version,
                table_dtype,
            )
        except AmbiguousTable:
            raise
        except ValueError:
            continue
        fit = fit_decode_attention(table)
        found[kv_cache_dtype] = DtypeTerms(
            replaces=[term.name for term in replaces],
            terms=decode_attention_terms(
                fit,
                model.num_layers,
                kv_scale,
                table_kv_heads,
                f"decode attention ({kv_cache_dtype} KV)",
            ),
            fit_errors=[
                fit.error.model_copy(update={"target": f"{fit.error.target}, {kv_cache_dtype} KV"})
            ],
        )
    return found


def elementwise_terms(model: ModelSpec, gpu_name: str, tensor_parallel: int) -> list[CostTerm]:
    """What the tables do not time: the per-layer elementwise kernels (derived)."""
    hardware = get_hardware(gpu_name)
    layers = model.num_layers
    per_token_bytes = (
        10 * model.hidden_size + 3 * model.intermediate_size / tensor_parallel
    ) * model.dtype_bytes
    note = (
        f"{ELEMENTWISE_KERNELS_PER_LAYER} kernels per layer × {ELEMENTWISE_KERNEL_S * 1e6:.0f} µs "
        "(aiconfigurator's memory-op latency constant); bytes at "
        f"{ELEMENTWISE_BANDWIDTH:.0%} of {hardware.memory_bandwidth_bytes_per_s / 1e12:.3g} TB/s"
    )
    return [
        cost_term(
            ELEMENTWISE_TERM_NAME,
            "step",
            "latency",
            layers * ELEMENTWISE_KERNELS_PER_LAYER * ELEMENTWISE_KERNEL_S,
            note,
            "derived",
        ),
        cost_term(
            ELEMENTWISE_TERM_NAME,
            "token",
            "memory",
            layers
            * per_token_bytes
            / (hardware.memory_bandwidth_bytes_per_s * ELEMENTWISE_BANDWIDTH),
            note,
            "derived",
        ),
    ]
