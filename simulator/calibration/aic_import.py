"""Fit our cost model per GPU × model × TP × backend on aiconfigurator's measured kernel tables
(see `aic_tables`): the linear layers on its GEMM sweep, prefill and decode attention on its
attention sweeps (with the per-layer floors the tables show), the LM head on its GEMMs; the
tensor-parallel all-reduce reads its custom all-reduce table as measured. Elementwise kernels and host overhead are
not in the tables and stay `derived` (the engine profile owns host time). Only the fitted figures
are written; every term names the table and version it came from.
"""

from pathlib import Path

from simulator.calibration import aic_tables as tables
from simulator.calibration.aic_fit import (
    all_reduce_curve,
    fit_decode_attention,
    fit_linear_layers,
    fit_lm_head,
    fit_prefill_attention,
)
from simulator.calibration.aic_repeats import AmbiguousTable
from simulator.calibration.aic_step_check import step_error
from simulator.calibration.aic_terms import (
    cost_term,
    decode_attention_terms,
    elementwise_terms,
    kv_cache_dtype_terms,
    linear_terms,
    weight_dtype_terms,
)
from simulator.calibration.plausibility import (
    check_plausible,
    without_implausible_kv_variants,
)
from simulator.calibration.roofline import ALL_REDUCES_PER_LAYER, host_terms
from simulator.calibration.schema import (
    Calibration,
    CostModelFit,
    DeviceInfo,
    Provenance,
)
from simulator.hardware.catalog import get_hardware
from simulator.model_spec import ModelSpec

# catalog GPU -> aiconfigurator system folder
SYSTEMS = {
    "A100-80GB": "a100_sxm",
    "H100-80GB": "h100_sxm",
    "H200-141GB": "h200_sxm",
    "L40S": "l40s",
    "B200-180GB": "b200_sxm",
    "B300-288GB": "b300_sxm",
    "GB200-186GB": "gb200",
    "GB300-288GB": "gb300",
    "RTX-PRO-6000-96GB": "rtx_pro_6000_server",
    "Arc-Pro-B60-24GB": "b60",
}
AIC_SOURCE = "NVIDIA aiconfigurator (Apache-2.0) measured kernel database, systems/data/{system}"


def model_spec(name: str) -> ModelSpec:
    return ModelSpec.from_preset(name, dtype="bfloat16")  # the tables time bf16 kernels


def _measured_kv_heads(
    root: Path, system: str, backend: str, heads: int, kv_heads: int, head_dim: int
) -> int:
    """`kv_heads` when the decode table has rows for it, else the most KV heads below it it has."""
    for candidate in sorted(
        {kv_heads, *(k for k in (16, 8, 4, 2, 1) if k < kv_heads)}, reverse=True
    ):
        try:
            tables.read_attention(root, system, backend, "generation", heads, candidate, head_dim)
            tables.read_attention(root, system, backend, "context", heads, candidate, head_dim)
            return candidate
        except AmbiguousTable:
            raise
        except ValueError:
            continue
    raise ValueError(
        f"{root}/{system}/attention/{backend}: no bf16 rows for {heads} heads with ≤ {kv_heads} KV "
        f"heads, head_dim {head_dim}"
    )


def aic_calibration(
    model_name: str, gpu: str, tensor_parallel: int, backend: str = "vllm", root: Path | None = None
) -> Calibration:
    """A `fitted` calibration of `model_name` on `gpu` × `tensor_parallel` from `backend`'s."""
    if gpu not in SYSTEMS:
        raise ValueError(
            f"GPU {gpu!r} has no aiconfigurator tables; expected one of {sorted(SYSTEMS)}"
        )
    if backend not in tables.BACKENDS:
        raise ValueError(f"backend {backend!r}; expected one of {tables.BACKENDS}")
    root = tables.installed_database_root() if root is None else Path(root)
    system, model = SYSTEMS[gpu], model_spec(model_name)
    heads, kv_heads = (
        model.num_attention_heads // tensor_parallel,
        max(model.num_kv_heads // tensor_parallel, 1),
    )
    gemm = tables.read_gemm(root, system, backend)
    linear, per_layer = fit_linear_layers(gemm, model, tensor_parallel)
    table_kv_heads = _measured_kv_heads(root, system, backend, heads, kv_heads, model.head_dim)
    decode_table = tables.read_attention(
        root, system, backend, "generation", heads, table_kv_heads, model.head_dim
    )
    prefill_table = tables.read_attention(
        root, system, backend, "context", heads, table_kv_heads, model.head_dim
    )
    decode, prefill = fit_decode_attention(decode_table), fit_prefill_attention(prefill_table)
    # Without rows for this many KV heads (Llama-2's 32: multi-head attention), the nearest grouped
    # layout is timed and its KV read scaled by the KV bytes; prefill FLOPs follow query heads only.
    kv_scale = kv_heads / table_kv_heads
    head = fit_lm_head(gemm, model, tensor_parallel)
    layers = model.num_layers
    model_dtype_linear = linear_terms(linear, layers)
    model_dtype_decode = decode_attention_terms(decode, layers, kv_scale, table_kv_heads)
    terms = (
        model_dtype_linear
        + model_dtype_decode
        + [
            cost_term(
                "prefill attention: per-layer floor",
                "prefill_step",
                "latency",
                prefill.coefficients[0] * layers,
                prefill.error.note,
            ),
            cost_term(
                "prefill attention: per token",
                "token",
                "memory",
                prefill.coefficients[1] * layers,
                prefill.error.note,
            ),
            cost_term(
                "prefill attention (FLOPs)",
                "prefill_attention_pair",
                "compute",
                prefill.coefficients[2] * layers,
                prefill.error.note,
            ),
            cost_term("LM head", "step", "memory", head.coefficients[0], head.error.note),
            cost_term("LM head", "sequence", "compute", head.coefficients[1], head.error.note),
        ]
    )
    errors = [linear.error, decode.error, prefill.error, head.error]
    versions = {
        "gemm": gemm.version,
        "attention": f"{decode_table.version} ({decode_table.kernel})"
        if decode_table.kernel
        else decode_table.version,
    }
    curve = None
    if tensor_parallel > 1:
        reduce_table = tables.read_all_reduce(root, system, backend, tensor_parallel)
        count = ALL_REDUCES_PER_LAYER * layers
        curve, reduce_error = all_reduce_curve(reduce_table, model, count)
        terms.append(
            cost_term(
                "tensor-parallel all-reduce",
                "all_reduce_curve",
                "network",
                1.0,
                f"{reduce_error.note}; {count} per step",
                label="measured",
            )
        )
        errors.append(reduce_error)
        versions["all-reduce"] = f"{reduce_table.version} ({reduce_table.kernel})"
    reduce_fit = reduce_table if tensor_parallel > 1 else None
    errors.insert(
        0, step_error(gemm, decode_table, prefill_table, model, tensor_parallel, reduce_fit)
    )
    terms += elementwise_terms(model, gpu, tensor_parallel) + host_terms()
    hardware = get_hardware(gpu)
    knee, tile = linear.params[0], int(linear.params[1])
    calibration = Calibration(
        name=f"{model_name}@{gpu}-tp{tensor_parallel}-aic-{backend}",
        label="fitted",
        model=model,
        dtype=model.dtype,
        device=DeviceInfo.of_catalog(hardware, tensor_parallel),
        cost_model=CostModelFit(
            knee_tokens=knee,
            knee_label="fitted",
            tile_tokens=tile,
            terms=terms,
            fit_errors=errors,
            all_reduce_curve=curve,
            weight_dtype_terms=weight_dtype_terms(
                root, system, backend, gemm.version, model, tensor_parallel, model_dtype_linear
            ),
            kv_cache_dtype_terms=kv_cache_dtype_terms(
                root,
                system,
                backend,
                decode_table.version,
                heads,
                table_kv_heads,
                model,
                kv_scale,
                model_dtype_decode,
            ),
        ),
        provenance=Provenance(
            source=f"{AIC_SOURCE.format(system=system)}; {tables.package_version()}",
            method="aiconfigurator kernel tables",
            backend=backend,
            backend_version=gemm.version,
            database_mode=tables.DATABASE_MODE,
            notes=[
                f"table versions: {versions}",
                "linear layers (bf16, and fp8 weights where the sweep measured fp8 GEMMs), "
                "attention (with per-layer floors), LM head: fitted (non-negative least squares, "
                "relative error, 5-fold cross-validated per table); all-reduce: measured (the "
                "table, log-log between sizes; each size held out against its neighbours)",
                "elementwise kernels and host overhead: derived (not in the tables; host time "
                "belongs to "
                "the engine profile)",
            ],
        ),
    )
    # a table that timed less work than it names would make the stack faster than the GPU
    return check_plausible(without_implausible_kv_variants(calibration))
