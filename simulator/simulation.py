"""`simulate(scenario) -> SimResult`: resolve a scenario into a cluster and run it.

Resolution is where bad scenarios are caught, one clear error each: an unknown GPU, a model that does
not fit the GPU at that tensor-parallel degree, a calibration made for another model, a request
longer than `max_model_len` (typed: `ModelDoesNotFit`, `PoolTooSmall`). The calibration, the engine
profile and the KV pool per replica are resolved in `simulator.resolve`; the pool from the
memory formula the live engine sizes its own pool with (`engine.core.memory`, through
`kv_blocks_available`: weights, an activation estimate and KV per token within
`gpu_memory_utilization`), block for block (`tests/test_memory_formula.py`).
The engine configs come from the scenario's settings through `engine_configs`, as the live engine's
do. Prefix caching acts when the trace names its prompt blocks (hash ids, as Mooncake traces do):
prompts are then made of `traces`' hash-consistent tokens; without hash ids no two prompts share a
block, so the cache could never hit and is left off.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from engine.core.config import engine_configs
from simulator.calibration.cost_model import CostModel
from simulator.calibration.engine_profile import (
    EngineProfile,
)
from simulator.calibration.profiled_cost_model import ProfiledCostModel
from simulator.calibration.schema import Calibration
from simulator.cluster.autoscaler import Autoscaler
from simulator.cluster.cluster import Cluster, ClusterConfig
from simulator.cluster.collector import collector_paused
from simulator.cluster.parallel import ParallelCluster, parallel_eligible
from simulator.cluster.prompt_source import PromptSource
from simulator.cluster.shards import ShardSpec
from simulator.errors import PoolTooSmall
from simulator.hardware.catalog import get_hardware
from simulator.kv_tiers import host_tier_blocks, host_tier_costs
from simulator.resolve import (
    graphed_profile,
    resolve_calibration_for,
    resolve_pool,
    resolve_profile,
    scenario_calibration,
)
from simulator.result import SimResult, summarize
from simulator.scenario import Scenario
from traces import Trace, load_trace, synthesize
from traces.synthetic import SyntheticTraceSpec
from traces.transforms import assign_tenants, cap_lengths, merge, scale_rate, share_prefixes


def load_traffic(scenario: Scenario) -> Trace:
    spec = scenario.traffic
    if spec.trace is not None:
        if not Path(spec.trace).exists():
            raise ValueError(f"traffic.trace: {spec.trace} does not exist; expected a trace file")
        trace = load_trace(spec.trace, format=spec.trace_format)
    else:
        trace = synthesize(
            SyntheticTraceSpec(
                arrivals=spec.arrivals,
                prompt=spec.prompt,
                output=spec.output,
                duration_s=spec.duration_s,
                seed=scenario.seed,
                name=scenario.name,
            )
        )
    if spec.rate_scale != 1.0:
        trace = scale_rate(trace, spec.rate_scale)
    if spec.max_requests is not None:
        trace = trace.select(slice(0, spec.max_requests), step=f"first {spec.max_requests}")
    if spec.shared_prefix_groups is not None:
        trace = share_prefixes(
            trace,
            spec.shared_prefix_groups,
            spec.shared_prefix_tokens,
            scenario.scheduler.block_size,
            seed=scenario.seed,
        )
    if spec.tenants:
        trace = assign_tenants(trace, spec.tenants, seed=scenario.seed)
    if spec.parts:
        trace = merge(
            [trace] + [part.synthesize(scenario.seed, i) for i, part in enumerate(spec.parts)],
            name=trace.name,
        )
    return trace


@collector_paused()  # it makes a record per request and no cyclic garbage, as the run (collector.py)
def build_cluster(
    scenario: Scenario,
    trace: Trace,
    calibration: Calibration | None = None,
    step_scale: float = 1.0,
    profile: EngineProfile | None = None,
    shards: ShardSpec | None = None,
) -> tuple[Cluster, dict]:
    """The cluster for a scenario and its traffic, and the facts resolved on the way. `step_scale`:
    every step (GPU and serving stack) takes that many times as long (the planner's error band).
    `shards`: where the replicas of a parallel run advance (default: all in this process); it changes
    how fast the run goes, never its answer."""
    own_gpu = scenario.hardware.gpu  # the GPU a prices.gpu_usd_per_hour override prices
    if scenario.cluster.disaggregation is not None:
        from simulator.disaggregation import pinned_pools

        # disaggregated: the base settings (and the checks on them) are the prefill pool's (its GPU
        # and TP degree); each pool's GPU and TP written out
        scenario = pinned_pools(scenario)
    model = scenario.model.spec()
    gpu = get_hardware(scenario.hardware.gpu)
    calibration = calibration or resolve_calibration_for(scenario, profile)
    profile = graphed_profile(scenario, profile or resolve_profile(scenario, calibration))
    # linear layers from the fitted fp8 GEMM terms for fp8 weights (refused where none were
    # measured); decode attention from the KV bytes read for an fp8 / int8 cache (derived)
    calibration = scenario_calibration(scenario, calibration)
    step_model = ProfiledCostModel.of_calibration(calibration, profile, step_scale)
    settings = scenario.scheduler
    max_model_len = settings.max_model_len or model.max_position_embeddings
    num_blocks = resolve_pool(scenario, model, profile)
    if scenario.traffic.too_long != "error":
        trace, _ = cap_lengths(trace, max_model_len, scenario.traffic.too_long)
    too_long = np.flatnonzero(trace.prompt_tokens + trace.output_tokens > max_model_len)
    if len(too_long):
        i = int(too_long[0])
        raise ValueError(
            f"traffic: request {i} has {int(trace.prompt_tokens[i])} prompt + {int(trace.output_tokens[i])} "
            f"output tokens, longer than max_model_len={max_model_len} ({len(too_long)} such requests); "
            "expected shorter requests: set traffic.too_long to clip or drop, or raise scheduler.max_model_len"
        )
    if np.any(trace.output_tokens < 1):
        trace = trace.select(trace.output_tokens >= 1, step="drop requests with no output")
    caching = settings.enable_prefix_caching and trace.hash_ids is not None
    cpu_blocks = (
        host_tier_blocks(settings.cpu_kv_gb, model, settings.block_size, settings.kv_cache_dtype)
        if settings.cpu_kv_gb
        else 0
    )
    own_prompts = cpu_blocks > 0 and not caching and settings.policy == "continuous"
    caching = (
        caching or own_prompts
    )  # the tier works through block hashes: each prompt its own tokens
    cache_config, scheduler_config = engine_configs(
        settings,
        num_kv_blocks=num_blocks,
        max_model_len=max_model_len,
        enable_prefix_caching=caching,
        num_cpu_kv_blocks=cpu_blocks,
    )
    reserves_max_len = settings.policy == "static" and settings.static_reserve == "max_model_len"
    need = (
        -(-max_model_len // settings.block_size)
        if reserves_max_len
        else -(
            -int((trace.prompt_tokens + trace.output_tokens).max(initial=1)) // settings.block_size
        )
    )
    if need > num_blocks:
        raise PoolTooSmall(
            f"a replica's KV pool holds {num_blocks} blocks of {settings.block_size} tokens but a request "
            f"may need {need}; expected a larger pool (gpu_memory_utilization, tensor_parallel) or "
            "shorter requests"
        )
    autoscaler = scenario.cluster.autoscaler
    cold_start = autoscaler.cold_start
    weight_load_s = cold_start.weight_load_s
    if weight_load_s is None:
        weight_load_s = (
            model.weight_bytes_per_gpu(scenario.hardware.tensor_parallel)
            / cold_start.weight_load_bytes_per_s
        )
    cold_start_s = cold_start.provisioning_s + weight_load_s + cold_start.warmup_s
    config = ClusterConfig(
        scheduler_config=scheduler_config,
        cache_config=cache_config,
        cost_model=step_model,
        tensor_parallel=scenario.hardware.tensor_parallel,
        initial_replicas=max(
            scenario.cluster.replicas, autoscaler.min_replicas if autoscaler.enabled else 1
        ),
        router_policy=scenario.cluster.router.policy,
        max_waiting_per_replica=scenario.cluster.max_waiting_per_replica,
        ttft_timeout_s=scenario.clients.ttft_timeout_s,
        max_retries=scenario.clients.max_retries,
        retry_backoff_s=scenario.clients.retry_backoff_s,
        cold_start_s=cold_start_s,
        window_s=scenario.window_s,
        scrape_interval_s=autoscaler.scrape_interval_s if autoscaler.enabled else None,
        seed=scenario.seed,
        max_concurrency=scenario.traffic.max_concurrency,
        host_tier_costs=host_tier_costs(
            model,
            gpu,
            scenario.hardware.tensor_parallel,
            CostModel.from_calibration(calibration),
            settings.block_size,
            settings.max_num_batched_tokens,
            settings.kv_cache_dtype,
        )
        if cpu_blocks
        else None,
    )
    prompt_ids = prompt_hashes = None
    if (
        own_prompts
    ):  # distinct per request (no two share a block), constant within it: cheap to build
        prompts = PromptSource(trace, "own", settings.block_size, model.vocab_size, scenario.seed)
        prompt_ids = prompts.ids
    elif caching:
        prompts = PromptSource(
            trace, "hashed", settings.block_size, model.vocab_size, scenario.seed
        )
        prompt_ids, prompt_hashes = prompts.ids, prompts.hashes

    extra_facts = {}
    if scenario.cluster.disaggregation is not None:
        from simulator.disaggregation import build_disaggregated

        cluster, extra_facts = build_disaggregated(
            scenario,
            config,
            model,
            gpu,
            calibration,
            trace,
            prompt_ids,
            prompt_hashes,
            own_gpu=own_gpu,
        )
    elif parallel_eligible(scenario, config):
        config = replace(config, router_staleness_s=scenario.cluster.router.staleness_s)
        cluster = ParallelCluster(config, trace, prompt_ids, prompt_hashes, shards)
    else:
        cluster = Cluster(
            config,
            trace.arrival_s.tolist(),
            trace.prompt_tokens.tolist(),
            trace.output_tokens.tolist(),
            trace.tenant.tolist(),
            prompt_ids,
            prompt_hashes,
        )
    price = scenario.prices.gpu_usd_per_hour
    cluster.monitor.price_usd_per_gpu_hour = gpu.price_usd_per_hour if price is None else price
    pools = getattr(cluster, "pools", {})
    if pools:  # a split fleet's mean price per GPU-hour at start (each pool's cost: its own price)
        gpus = {
            name: pool.config.initial_replicas * pool.config.tensor_parallel
            for name, pool in pools.items()
        }
        cluster.monitor.price_usd_per_gpu_hour = sum(
            gpus[name] * pool.config.price_usd_per_gpu_hour for name, pool in pools.items()
        ) / sum(gpus.values())
    if autoscaler.enabled and scenario.cluster.disaggregation is None:
        cluster.autoscaler = Autoscaler(cluster, autoscaler, cold_start_s)
    held_out = profile.held_out(gpu.name, scenario.hardware.tensor_parallel)
    facts = {
        "model": model.name,
        "gpu": gpu.name,
        "tensor_parallel": scenario.hardware.tensor_parallel,
        # all-reduces up to this size timed as TensorRT-LLM's fused kernel (`fused_all_reduce`)
        "fused_all_reduce_mb": scenario.hardware.fused_all_reduce_mb.get(
            scenario.hardware.tensor_parallel
        ),
        "kv_blocks_per_replica": num_blocks,
        "kv_cache_dtype": settings.kv_cache_dtype,
        "weight_dtype": model.weight_dtype,
        "block_size": settings.block_size,
        "max_model_len": max_model_len,
        "prefix_caching": caching,
        "cold_start_s": cold_start_s,
        "cpu_kv_blocks_per_replica": cpu_blocks,
        "price_usd_per_gpu_hour": cluster.monitor.price_usd_per_gpu_hour,
        "calibration": {
            "name": calibration.name,
            "label": calibration.label,
            "method": calibration.provenance.method,
            "fit_error": _fit_error(calibration),
            "engine_profile": profile.name,
            "held_out_error": held_out[0],
            "held_out_rows": held_out[1],
            "step_scale": step_scale,
        },
        "trace": {"name": trace.name, "requests": len(trace), "duration_s": trace.duration_s},
        **extra_facts,
    }
    return cluster, facts


def cpu_s() -> float:
    """CPU seconds of this process and of its ended worker processes."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _fit_error(calibration: Calibration) -> float | None:
    fit = calibration.cost_model
    if fit is None or not fit.fit_errors:
        return None
    error = fit.fit_errors[0]
    return (
        error.mape_cross_validated if error.mape_cross_validated is not None else error.mape_train
    )


def simulate(
    scenario: Scenario,
    progress: Callable[[float], None] | None = None,
    trace: Trace | None = None,
    calibration: Calibration | None = None,
    profile: EngineProfile | None = None,
    shards: ShardSpec | None = None,
) -> SimResult:
    """Run the scenario (or `trace` in place of its traffic); deterministic for the scenario's seed,
    whatever `shards` says (worker processes or Ray for the replicas of a parallel run)."""
    started, started_wall = cpu_s(), time.perf_counter()
    trace = load_traffic(scenario) if trace is None else trace
    cluster, facts = build_cluster(scenario, trace, calibration, profile=profile, shards=shards)
    end_s = cluster.run(scenario.horizon_s, progress)
    result = summarize(scenario, cluster, end_s, facts)
    result.run = {
        "cpu_s": cpu_s() - started,  # worker processes included (not Ray's)
        "wall_s": time.perf_counter() - started_wall,
    }
    return result
