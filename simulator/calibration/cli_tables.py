"""Rich tables for `surgeplan calibrations`: a calibration's measured points, fitted terms and fit
errors, and an engine profile's host terms and published errors. Kept apart from the commands in
`cli.py` so each file holds one concept: the commands parse and load, these render."""

from rich.console import Console
from rich.table import Table

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import feature_value
from simulator.calibration.engine_profile import EngineProfile
from simulator.calibration.fp8_small_batch import with_carried_fp8
from simulator.calibration.host_terms import HOST_FEATURES
from simulator.calibration.plausibility import (
    kv_read_rates,
    linear_peak_shares,
    prefill_attention_shares,
)
from simulator.calibration.schema import Calibration
from simulator.calibration.weight_dtype import supports_weight_dtype, weight_dtype_calibration
from simulator.hardware.catalog import load_catalog


def console_print(*items) -> None:
    """Print through a console made now, so the terminal width (or COLUMNS) is read at call time."""
    Console().print(*items)


def percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _fp8_scale_here(profile: EngineProfile, calibration: Calibration | None) -> str:
    """'; here with fp8 weights: xS' for a calibration of the profile's own backend's fp8 tables."""
    if (
        calibration is None
        or calibration.cost_model is None
        or profile.scales_kernels_of(calibration.provenance.backend)
        or not supports_weight_dtype(calibration, "fp8")
    ):
        return ""
    fp8 = weight_dtype_calibration(calibration, "fp8")
    gpu = fp8.device.hardware or fp8.device.name
    scale, source = with_carried_fp8(profile, fp8).fp8_linear_scale(gpu)
    if source is None:
        return ""
    return (
        f"; {fp8.model.name} TP{fp8.device.tensor_parallel} on {gpu} with fp8 weights: x{scale:.2f}"
    )


def print_profile(
    profile: EngineProfile,
    gpu: str | None = None,
    tensor_parallel: int | None = None,
    calibration: Calibration | None = None,
) -> None:
    """`calibration`: the one shown, for the fp8 scale the profile takes on it."""
    console_print(
        f"[bold]engine profile {profile.name}[/bold]: {profile.engine} {profile.versions}. {profile.description}"
    )
    table = Table("host term", "value", "label", "source")
    for term in profile.terms:
        table.add_row(
            HOST_FEATURES[term.feature], f"{term.seconds_per_unit:.4g} s", term.label, term.source
        )
    table.add_row(
        "overlap with the GPU",
        f"{profile.overlap:.0%}",
        profile.overlap_label,
        profile.overlap_source,
    )
    by_bound = ", ".join(f"{k} x{v:.2f}" for k, v in profile.kernel_scale_by_bound.items())
    fitted = profile.kernel_scale != 1.0 or profile.kernel_scale_by_bound
    table.add_row(
        f"kernel time vs the calibration's (stack's kernels: {profile.kernel_backend or 'any'}; "
        "applied only on another backend's calibration)",
        f"x{profile.kernel_scale:.2f}" + (f"; {by_bound}" if by_bound else ""),
        "fitted" if fitted else "derived",
        profile.kernel_scale_source,
    )
    if profile.kernel_era_scales:
        era = profile.kernel_era_scales.get(gpu or "")
        table.add_row(
            "linear layers vs its own backend's kernel tables (an older stack's GEMMs)",
            f"x{era:.3f} on {gpu}"
            if era
            else ", ".join(f"{name} x{v:.3f}" for name, v in profile.kernel_era_scales.items()),
            "derived",
            profile.kernel_era_source,
        )
    if profile.older_era_scales:
        table.add_row(
            "bf16 linear layers of an older stack than the kernel tables (only for the published "
            "sources below that ran it)",
            ", ".join(f"{name} x{v:.3f}" for name, v in profile.older_era_scales.items()),
            "derived",
            profile.older_era_source,
        )
    if profile.fp8_linear_scales:
        table.add_row(
            "fp8 linear layers up to the knee vs its own backend's fp8 GEMM tables",
            ", ".join(
                f"{name} x{v:.2f}"
                + (
                    f" at {at.model} TP{at.tensor_parallel}"
                    if (at := profile.fp8_linear_reference.get(name))
                    else ""
                )
                for name, v in profile.fp8_linear_scales.items()
            ),
            "fitted",
            profile.fp8_linear_source,
        )
        if profile.fp8_linear_reference:
            table.add_row(
                "the same at another model or TP degree",
                "the same seconds off per layer of a small decode step"
                + _fp8_scale_here(profile, calibration),
                "derived",
                "the tables' fixed cost per GEMM, which served steps do not pay "
                "(fp8_small_batch.carried_fp8_shape)",
            )
        carried = {
            name: profile.fp8_linear_scale(name)
            for name in load_catalog()
            if name not in profile.fp8_linear_scales
        }
        carried = {name: pair for name, pair in carried.items() if pair[1] is not None}
        if carried:
            table.add_row(
                "the same, carried to GPUs of the fitted GPU's kernel build target",
                ", ".join(f"{name} from {src}'s x{v:.2f}" for name, (v, src) in carried.items()),
                "derived",
                "the same compiled fp8 GEMMs (HardwareSpec.compute_capability), not fitted on them; "
                "each calibration takes the scale that reads its fp8 weights at the share of its "
                "HBM peak the fitted GPU's served steps read at (fp8_small_batch.with_carried_fp8)",
            )
    if profile.fp8_large_batch_scales:
        table.add_row(
            "fp8 linear layers, each token beyond the knee (prefill), vs the same tables",
            ", ".join(f"{name} x{v:.2f}" for name, v in profile.fp8_large_batch_scales.items())
            + "; that GPU's own only, the same ratio at every model and TP degree",
            "fitted",
            profile.fp8_large_batch_source,
        )
    if profile.graph_steps != "every":
        table.add_row(
            "steps replayed as CUDA graphs (the fp8 small-batch scale; others pay eager_layer)",
            profile.graph_steps,
            "derived",
            profile.graph_steps_source,
        )
    if profile.graph_max_tokens is not None:
        per_seq = profile.graph_tokens_per_max_seq
        table.add_row(
            "largest step in tokens replayed as a CUDA graph (larger ones run eagerly)",
            str(profile.graph_max_tokens)
            + (f", at most {per_seq} x max_num_seqs" if per_seq is not None else ""),
            "derived",
            profile.graph_max_tokens_source,
        )
    for name, era in profile.source_eras.items():
        ran = [
            f"the kernel tables' own GEMMs (era scale x1) on {', '.join(era.tables_gpus)}"
        ] * bool(era.tables_gpus) + [f"the older era on {', '.join(era.older_gpus)}"] * bool(
            era.older_gpus
        )
        table.add_row(f"published source {name}: ran", "; ".join(ran), "fitted", era.source)
    if profile.kv_memory is not None:
        memory = profile.kv_memory
        table.add_row(
            "KV cache: gpu_memory_utilization of the memory free after weights and reserves",
            f"activations {memory.max_num_tokens} tokens x hidden x "
            + "/".join(f"{v:g}" for v in memory.activation_bytes_per_token_hidden.values())
            + f" B (TP {'/'.join(map(str, memory.activation_bytes_per_token_hidden))}); other "
            f"{memory.other_bytes / 2**20:.0f} MiB",
            "derived",
            memory.source,
        )
    console_print(table)
    if profile.errors:
        errors = Table(
            "published set", "GPU", "split", "TP", "rows", "median |error|", "bias", "within 10%"
        )
        for e in profile.errors:
            errors.add_row(
                e.source,
                e.gpu,
                e.split,
                str(e.tensor_parallel or "all"),
                str(e.num_rows),
                percent(e.median_abs_error),
                f"{e.bias:.3f}",
                f"{e.within_10pct:.0%}",
            )
        console_print(errors)
    held_out, rows = profile.held_out(gpu, tensor_parallel)
    at = f" (at TP {tensor_parallel})" if tensor_parallel else ""
    console_print(
        f"held-out error used by the planner's band{at}: "
        + (f"{percent(held_out)} ({rows})" if held_out is not None else "none")
    )


def print_points(calibration: Calibration) -> None:
    """Each measured point: its shape, median and spread of repeats, and the host/device split."""
    table = Table(
        "kind",
        "prefill tokens",
        "decode seqs",
        "context tokens",
        "median",
        "spread",
        "forward",
        "host",
    )
    for point in calibration.points:
        shape = point.shape.to_shape()
        table.add_row(
            point.kind,
            str(shape.num_prefill_tokens),
            str(shape.num_decode_seqs),
            str(shape.decode_context_tokens),
            f"{point.median_total_s * 1e3:.2f} ms",
            percent(point.spread),
            f"{point.median_forward_s * 1e3:.2f} ms",
            f"{point.median_host_s * 1e3:.2f} ms",
        )
    console_print(table)


def _add_term_rows(table: Table, terms) -> None:
    """One row per cost term: name, feature, seconds per unit, bound, label, note."""
    for term in terms:
        curve = term.feature == "all_reduce_curve"  # a scale of the measured curve, not seconds
        table.add_row(
            term.name,
            term.feature,
            f"x{term.seconds_per_unit:.3g}" if curve else f"{term.seconds_per_unit:.4g} s",
            term.bound,
            term.label,
            term.note[:70],
        )


def print_terms(calibration: Calibration) -> None:
    fit = calibration.cost_model
    table = Table("term", "per", "value", "bound", "label", "note")
    _add_term_rows(table, fit.terms)
    table.add_row(
        "knee (tokens)",
        "—",
        f"{fit.knee_tokens:.0f}",
        "—",
        fit.knee_label,
        "weight-read floor below it",
    )
    table.add_row(
        "GEMM tile (tokens)",
        "—",
        str(fit.tile_tokens),
        "—",
        fit.knee_label,
        "tokens count in whole tiles",
    )
    table.add_row(
        "GEMM switch (tokens)",
        "—",
        str(fit.gemm_switch_tokens),
        "—",
        fit.knee_label,
        "matrix-matrix kernels from here on",
    )
    if fit.spill_tokens is not None:
        table.add_row(
            "cache spill (tokens)", "—", f"{fit.spill_tokens:.0f}", "—", fit.knee_label, ""
        )
    if fit.all_reduce_curve is not None:
        curve = fit.all_reduce_curve
        at = {
            tokens: feature_value("all_reduce_curve", StepShape(((tokens, 0),)), fit)
            for tokens in (1, 64, 512, 4096)
        }
        table.add_row(
            "all-reduce curve (a step's)",
            "—",
            ", ".join(f"{tokens} tok {seconds * 1e3:.3g} ms" for tokens, seconds in at.items()),
            "network",
            "measured",
            f"{len(curve.tokens)} sizes, {curve.tokens[0]:.3g}-{curve.tokens[-1]:.0f} tokens",
        )
    console_print(table)
    for weight_dtype, variant in fit.weight_dtype_terms.items():
        console_print(
            f"with model.weight_dtype={weight_dtype}, these replace {', '.join(variant.replaces)}:"
        )
        table = Table("term", "per", "value", "bound", "label", "note")
        _add_term_rows(table, variant.terms)
        table.add_row(
            "knee (tokens)", "—", f"{variant.knee_tokens:.0f}", "—", variant.knee_label, ""
        )
        table.add_row(
            "GEMM tile (tokens)", "—", str(variant.tile_tokens), "—", variant.knee_label, ""
        )
        console_print(table)
    if not fit.weight_dtype_terms:
        console_print("weight_dtype: auto only (no GEMMs of another weight dtype measured)")
    for kv_cache_dtype, variant in fit.kv_cache_dtype_terms.items():
        console_print(
            f"with scheduler.kv_cache_dtype={kv_cache_dtype}, these replace "
            f"{', '.join(variant.replaces)}:"
        )
        table = Table("term", "per", "value", "bound", "label", "note")
        _add_term_rows(table, variant.terms)
        console_print(table)
    if not fit.kv_cache_dtype_terms:
        console_print(
            "kv_cache_dtype other than auto: KV read scaled by the bytes stored (no decode "
            "kernels reading another cache dtype measured)"
        )


def print_errors(calibration: Calibration) -> None:
    table = Table("fit target", "points", "MAPE train", "MAPE held-out", "max error")
    fit = calibration.cost_model
    variants = [
        error
        for variant in [*fit.weight_dtype_terms.values(), *fit.kv_cache_dtype_terms.values()]
        for error in variant.fit_errors
    ]
    for error in fit.fit_errors + variants:
        table.add_row(
            error.target,
            str(error.num_points),
            percent(error.mape_train),
            percent(error.mape_cross_validated),
            percent(error.max_ape),
        )
    console_print(table)


def print_peak_shares(calibration: Calibration) -> None:
    """How near its GPU's peaks the kernel model runs (`plausibility`): each decode KV read's share
    of the HBM peak, the linear layers' weight read at one sequence and a 4,096-token prefill."""
    if calibration.device.kind != "gpu":
        return
    hardware = load_catalog()[calibration.device.hardware]
    peak = hardware.memory_bandwidth_bytes_per_s
    read, compute = linear_peak_shares(calibration)
    reads = ", ".join(f"{term.name} {rate / peak:.0%}" for term, rate in kv_read_rates(calibration))
    console_print(
        f"against the {hardware.name}'s peaks ({peak / 1e9:.0f} GB/s HBM): KV read: {reads}; "
        f"linear layers' weight read at one sequence {read:.0%}, a 4,096-token prefill "
        f"{compute:.0%} of the dense peak"
        + "".join(f", {t.name} {share:.0%}" for t, share in prefill_attention_shares(calibration))
    )
