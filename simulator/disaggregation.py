"""Resolving `cluster.disaggregation` into a prefill pool and a decode pool (`simulator.cluster.disaggregated`).

Each pool's KV pool comes from the same memory math as a co-located replica's at that pool's TP degree,
its step costs from the best calibration for that TP degree (the scenario's own when its TP matches),
its batch settings from the scenario's scheduler settings with the pool's overrides, and its cold start
from its weights per GPU. Every request must fit both pools.
"""

from __future__ import annotations

from collections.abc import Callable

from simulator.calibration.cost_model import CostModel
from simulator.calibration.engine_profile import kernel_backend
from simulator.calibration.profiled_cost_model import ProfiledCostModel
from simulator.calibration.schema import Calibration, resolve_calibration
from simulator.calibration.shipped import calibration_for
from simulator.calibration.weight_dtype import precision_calibration
from simulator.cluster.autoscaler import Autoscaler
from simulator.cluster.cluster import ClusterConfig
from simulator.cluster.disaggregated import DisaggregatedCluster, PoolConfig
from simulator.hardware.catalog import get_hardware
from simulator.hardware.spec import HardwareSpec
from simulator.kv_tiers import host_tier_costs, kv_bytes_per_token
from simulator.links import get_link
from simulator.model_spec import ModelSpec, kv_blocks_available
from simulator.scenario import Scenario
from traces import Trace


def pinned_pools(scenario: Scenario) -> Scenario:
    """The disaggregated scenario with each pool's GPU and TP degree written out (catalog names), and
    `hardware` set to the prefill pool's: the base settings (and the checks on them) are the prefill
    pool's. A named calibration is kept only while the prefill pool's GPU is the scenario's."""
    spec, hardware = scenario.cluster.disaggregation, scenario.hardware
    gpus = {
        role: get_hardware(getattr(spec, role).gpu or hardware.gpu).name
        for role in ("prefill", "decode")
    }
    pinned = spec.model_copy(
        update={
            "prefill_tensor_parallel": spec.prefill_tensor_parallel or hardware.tensor_parallel,
            "decode_tensor_parallel": spec.decode_tensor_parallel or hardware.tensor_parallel,
            **{
                role: getattr(spec, role).model_copy(update={"gpu": gpus[role]})
                for role in ("prefill", "decode")
            },
        }
    )
    same_gpu = gpus["prefill"] == get_hardware(hardware.gpu).name
    calibration = spec.prefill.calibration or (hardware.calibration if same_gpu else None)
    return scenario.model_copy(
        update={
            "cluster": scenario.cluster.model_copy(update={"disaggregation": pinned}),
            "hardware": hardware.model_copy(
                update={
                    "gpu": gpus["prefill"],
                    "tensor_parallel": pinned.prefill_tensor_parallel,
                    "calibration": calibration,
                }
            ),
        }
    )


def pool_price_usd_per_gpu_hour(
    scenario: Scenario, gpu: HardwareSpec, own_gpu: str | None = None
) -> float:
    """A pool's price per GPU-hour: the catalog's for its GPU; `prices.gpu_usd_per_hour` replaces it
    for the scenario's own GPU only (`own_gpu`: the scenario's `hardware.gpu` as written, before
    `pinned_pools`); a pool on another GPU keeps that GPU's catalog price."""
    override = scenario.prices.gpu_usd_per_hour
    if override is not None and gpu.name == get_hardware(own_gpu or scenario.hardware.gpu).name:
        return override
    return gpu.price_usd_per_hour


def _pool_calibration(name: str, model: str, gpu: HardwareSpec, tp: int, role: str) -> Calibration:
    calibration = resolve_calibration(name)
    device = calibration.device
    if (calibration.model.name, device.hardware, device.tensor_parallel) != (model, gpu.name, tp):
        raise ValueError(
            f"cluster.disaggregation.{role}.calibration {name!r} is for {calibration.model.name} on "
            f"{device.hardware} at tensor_parallel={device.tensor_parallel}; expected one for {model} "
            f"on {gpu.name} at tensor_parallel={tp} (the {role} pool's)"
        )
    return calibration


def _pool_config(
    scenario: Scenario,
    base: ClusterConfig,
    model: ModelSpec,
    base_gpu: HardwareSpec,
    calibration: Calibration,
    role: str,
    need_tokens: int,
    own_gpu: str | None,
) -> tuple[PoolConfig, float]:
    spec = scenario.cluster.disaggregation
    pool = spec.prefill if role == "prefill" else spec.decode
    tp = (
        spec.prefill_tensor_parallel if role == "prefill" else spec.decode_tensor_parallel
    ) or scenario.hardware.tensor_parallel
    gpu = get_hardware(pool.gpu) if pool.gpu is not None else base_gpu
    settings = scenario.scheduler
    if settings.num_kv_blocks is not None:
        num_blocks = settings.num_kv_blocks
    else:
        num_blocks = kv_blocks_available(
            model,
            gpu,
            tp,
            settings.gpu_memory_utilization,
            settings.block_size,
            kv_cache_dtype=settings.kv_cache_dtype,
            max_num_batched_tokens=pool.max_num_batched_tokens or settings.max_num_batched_tokens,
            max_num_seqs=pool.max_num_seqs or settings.max_num_seqs,
        )
    need = -(-need_tokens // settings.block_size)
    if need > num_blocks:
        raise ValueError(
            f"cluster.disaggregation: a {role} replica ({gpu.name}, tensor_parallel={tp}) holds "
            f"{num_blocks} KV "
            f"blocks but a request may need {need}; expected a larger {role}_tensor_parallel or "
            "shorter requests"
        )
    if pool.calibration is not None:  # named for this pool: of its GPU and TP degree
        calibration = precision_calibration(
            _pool_calibration(pool.calibration, scenario.model.name, gpu, tp, role),
            model.weight_dtype,
            settings.kv_cache_dtype,
        )
    elif (
        calibration.device.tensor_parallel != tp
        or scenario.hardware.calibration is None
        or gpu.name != base_gpu.name
    ):  # this pool's own GPU and TP degree
        stated = (
            base.cost_model.stated_profile
            if isinstance(base.cost_model, ProfiledCostModel)
            else None
        )
        calibration = precision_calibration(
            calibration_for(
                scenario.model.name,
                gpu.name,
                tp,
                backend=kernel_backend(stated),
                weight_dtype=model.weight_dtype,
            ),
            model.weight_dtype,
            settings.kv_cache_dtype,
        )
    changes = {"role": role}
    if pool.max_num_seqs is not None:
        changes["max_num_seqs"] = pool.max_num_seqs
    if pool.max_num_batched_tokens is not None:
        changes["max_num_batched_tokens"] = pool.max_num_batched_tokens
    scheduler_config = base.scheduler_config.model_copy(update=changes)
    scheduler_config = type(scheduler_config).model_validate(scheduler_config.model_dump())
    cache_config = base.cache_config.model_copy(update={"num_kv_blocks": num_blocks})
    replicas = spec.prefill_replicas if role == "prefill" else spec.decode_replicas
    if pool.autoscaler.enabled:
        replicas = max(replicas, pool.autoscaler.min_replicas)
    cold = pool.autoscaler.cold_start
    weight_load_s = cold.weight_load_s
    if weight_load_s is None:
        weight_load_s = model.weight_bytes_per_gpu(tp) / cold.weight_load_bytes_per_s
    gpu_model = CostModel.from_calibration(calibration)
    cost_model = gpu_model
    if isinstance(
        base.cost_model, ProfiledCostModel
    ):  # the scenario's serving stack and error band
        cost_model = ProfiledCostModel.of_calibration(
            calibration, base.cost_model.stated_profile, base.cost_model.scale, gpu=gpu_model
        )
    costs = None
    if cache_config.num_cpu_kv_blocks:
        costs = host_tier_costs(
            model,
            gpu,
            tp,
            gpu_model,
            settings.block_size,
            scheduler_config.max_num_batched_tokens,
            settings.kv_cache_dtype,
        )
    config = PoolConfig(
        name=role,
        scheduler_config=scheduler_config,
        cache_config=cache_config,
        cost_model=cost_model,
        tensor_parallel=tp,
        initial_replicas=replicas,
        router_policy=pool.router.policy,
        window_s=base.window_s,
        seed=base.seed,
        host_tier_costs=costs,
        gpu=gpu.name,
        price_usd_per_gpu_hour=pool_price_usd_per_gpu_hour(scenario, gpu, own_gpu),
    )
    return config, cold.provisioning_s + weight_load_s + cold.warmup_s


def build_disaggregated(
    scenario: Scenario,
    base: ClusterConfig,
    model: ModelSpec,
    gpu: HardwareSpec,
    calibration: Calibration,
    trace: Trace,
    prompt_ids: Callable[[int], list[int]] | None,
    prompt_hashes: Callable[[int], list[int]] | None = None,
    own_gpu: str | None = None,
) -> tuple[DisaggregatedCluster, dict]:
    """`scenario` as `pinned_pools` wrote it; `own_gpu`: its `hardware.gpu` before that (the GPU a
    `prices.gpu_usd_per_hour` override prices)."""
    spec = scenario.cluster.disaggregation
    need_tokens = int((trace.prompt_tokens + trace.output_tokens).max(initial=1))
    prefill, prefill_cold_s = _pool_config(
        scenario, base, model, gpu, calibration, "prefill", need_tokens, own_gpu
    )
    decode, decode_cold_s = _pool_config(
        scenario, base, model, gpu, calibration, "decode", need_tokens, own_gpu
    )
    link = get_link(spec.link)
    # what moves: every layer's K and V of a token, in the cache's dtype (fp8 / int8 halve bf16's bytes;
    # per-tensor or per-block scales are a few bytes per block and left out)
    kv_bytes = kv_bytes_per_token(model, scenario.scheduler.kv_cache_dtype)
    config = base.__class__(
        **{**base.__dict__, "initial_replicas": 0, "scrape_interval_s": _scrape(spec)}
    )
    cluster = DisaggregatedCluster(
        config,
        prefill,
        decode,
        link,
        kv_bytes,
        trace.arrival_s.tolist(),
        trace.prompt_tokens.tolist(),
        trace.output_tokens.tolist(),
        trace.tenant.tolist(),
        prompt_ids,
        prompt_hashes,
        spec.mixed_pool_max_pending_tokens if spec.mixed_pool else None,
    )
    for name, cold_s in (("prefill", prefill_cold_s), ("decode", decode_cold_s)):
        autoscaler = (spec.prefill if name == "prefill" else spec.decode).autoscaler
        if autoscaler.enabled:
            cluster.pools[name].autoscaler = Autoscaler(cluster.pools[name], autoscaler, cold_s)
    facts = {
        "disaggregation": {
            "link": link.name,
            "link_bandwidth_bytes_per_s": link.bandwidth_bytes_per_s,
            "link_latency_s": link.latency_s,
            "link_source": link.source,
            "link_label": link.label,
            "kv_bytes_per_token": kv_bytes,
            "kv_cache_dtype": scenario.scheduler.kv_cache_dtype,
            "mixed_pool": spec.mixed_pool,
            "mixed_pool_max_pending_tokens": spec.mixed_pool_max_pending_tokens,
            **{
                f"{pool.name}_{key}": value
                for pool in (prefill, decode)
                for key, value in (
                    ("gpu", pool.gpu),
                    ("price_usd_per_gpu_hour", pool.price_usd_per_gpu_hour),
                    ("replicas", pool.initial_replicas),
                    ("tensor_parallel", pool.tensor_parallel),
                    ("kv_blocks_per_replica", pool.cache_config.num_kv_blocks),
                    ("max_num_seqs", pool.scheduler_config.max_num_seqs),
                    ("max_num_batched_tokens", pool.scheduler_config.max_num_batched_tokens),
                    ("cold_start_s", prefill_cold_s if pool is prefill else decode_cold_s),
                )
            },
        }
    }
    return cluster, facts


def _scrape(spec) -> float | None:
    intervals = [
        pool.autoscaler.scrape_interval_s
        for pool in (spec.prefill, spec.decode)
        if pool.autoscaler.enabled
    ]
    return min(intervals) if intervals else None
