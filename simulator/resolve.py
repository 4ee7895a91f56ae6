"""Resolving a scenario's step-time sources and memory: the GPU calibration its serving stack would
run (`resolve_calibration_for`: the engine profile's kernel backend first), that calibration at the
scenario's weight / KV dtypes and fused all-reduce (`scenario_calibration`), the engine profile
(`resolve_profile`) and the KV pool per replica (`resolve_pool`: the engine's memory formula, or the
stack's own rule). Apart from `simulator.simulation` because the planner (its candidates' fit
check, its throughput ceiling, its evaluations) and the claims resolve these without building a
cluster.
"""

from __future__ import annotations

from simulator.calibration.engine_profile import (
    EngineProfile,
    default_profile_name,
    kernel_backend,
    load_profile,
)
from simulator.calibration.fused_all_reduce import fused_all_reduce_calibration
from simulator.calibration.schema import Calibration, resolve_calibration
from simulator.calibration.shipped import calibration_for
from simulator.calibration.weight_dtype import precision_calibration
from simulator.errors import ModelDoesNotFit
from simulator.hardware.catalog import get_hardware
from simulator.model_spec import ModelSpec, kv_blocks_available
from simulator.scenario import Scenario


def kernel_backend_of(scenario: Scenario, profile: EngineProfile | None = None) -> str:
    """Whose kernels the scenario's serving stack runs (its engine profile's `kernel_backend`):
    the calibration to prefer when several measured this GPU; vLLM's by default."""
    if profile is None and scenario.engine_profile:
        try:
            profile = load_profile(scenario.engine_profile)
        except ValueError:
            return "vllm"  # `resolve_profile` reports the unknown name
    return kernel_backend(profile)


def resolve_calibration_for(
    scenario: Scenario, profile: EngineProfile | None = None
) -> Calibration:
    hardware = scenario.hardware
    if hardware.calibration is None:
        return calibration_for(
            scenario.model.name,
            hardware.gpu,
            hardware.tensor_parallel,
            backend=kernel_backend_of(scenario, profile),
            weight_dtype=scenario.model.weight_dtype,
        )
    calibration = resolve_calibration(hardware.calibration)
    if calibration.model.name != scenario.model.name:
        raise ValueError(
            f"hardware.calibration {hardware.calibration!r} was made for model "
            f"{calibration.model.name!r}, not {scenario.model.name!r}; expected a calibration of the "
            "scenario's model"
        )
    return calibration


def scenario_calibration(scenario: Scenario, calibration: Calibration) -> Calibration:
    """`calibration` for the scenario's weight and KV cache dtypes (`precision_calibration`) and
    its deployment's fused all-reduce (`fused_all_reduce_calibration`)."""
    return fused_all_reduce_calibration(
        precision_calibration(
            calibration, scenario.model.weight_dtype, scenario.scheduler.kv_cache_dtype
        ),
        scenario.hardware.fused_all_reduce_mb,
    )


def resolve_profile(scenario: Scenario, calibration: Calibration) -> EngineProfile:
    """The scenario's engine profile, or the default for its calibration."""
    try:
        return load_profile(scenario.engine_profile or default_profile_name(calibration))
    except ValueError as error:
        raise ValueError(f"engine_profile: {error}") from None


def graphed_profile(scenario: Scenario, profile: EngineProfile) -> EngineProfile:
    """`profile` with its CUDA graphs as the scenario's server captures them: the largest graph by
    its max_num_seqs, and the scenario's graph mode where it names one
    (`EngineProfile.graphed`)."""
    return profile.graphed(scenario.scheduler.max_num_seqs, scenario.hardware.graph_steps)


def resolve_pool(scenario: Scenario, model: ModelSpec, profile: EngineProfile | None = None) -> int:
    """KV blocks per replica: the engine's memory formula, or the serving stack's own rule where
    its profile (`profile`, else the scenario's named one) has one (`EngineProfile.kv_memory`)."""
    settings, hardware = scenario.scheduler, scenario.hardware
    if settings.num_kv_blocks is not None:
        return settings.num_kv_blocks
    gpu = get_hardware(hardware.gpu)
    if profile is None and scenario.engine_profile:
        try:
            profile = load_profile(scenario.engine_profile)
        except ValueError:
            profile = None  # `resolve_profile` reports the unknown name
    if profile is not None and profile.kv_memory is not None:
        tp = hardware.tensor_parallel
        blocks = profile.kv_memory.kv_blocks(
            gpu.memory_bytes,
            settings.gpu_memory_utilization,
            model.weight_bytes_per_gpu(tp),
            model.vocab_size * model.hidden_size * model.dtype_bytes,
            model.hidden_size,
            tp,
            model.kv_block_bytes_per_gpu(tp, settings.block_size, settings.kv_cache_dtype),
        )
    else:
        blocks = kv_blocks_available(
            model,
            gpu,
            hardware.tensor_parallel,
            settings.gpu_memory_utilization,
            settings.block_size,
            kv_cache_dtype=settings.kv_cache_dtype,
            max_num_batched_tokens=settings.max_num_batched_tokens,
            max_num_seqs=settings.max_num_seqs,
        )
    if blocks < 1:
        weights_gib = model.weight_bytes_per_gpu(hardware.tensor_parallel) / 2**30
        raise ModelDoesNotFit(
            f"{model.name} does not fit {gpu.name} at tensor_parallel={hardware.tensor_parallel}: "
            f"{weights_gib:.1f} GiB of weights per GPU leave no KV block within "
            f"{settings.gpu_memory_utilization:.0%} of {gpu.memory_gib:.1f} GiB; expected a "
            "larger tensor_parallel, a bigger GPU or a smaller dtype"
        )
    return blocks
