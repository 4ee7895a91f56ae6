"""Building small simulated clusters for tests: a cost model from hand-set terms, a cluster config, a
cluster over explicit requests."""

from engine.core.config import CacheConfig, SchedulerConfig
from simulator.calibration.cost_model import CostModel
from simulator.calibration.engine_profile import EngineProfile, HostTerm
from simulator.calibration.kernel_era import linear_s
from simulator.calibration.schema import CostModelFit, CostTerm
from simulator.cluster.cluster import Cluster, ClusterConfig
from simulator.cluster.disaggregated import PoolConfig


def cost_model(
    step_s: float = 0.01, per_token_s: float = 0.0, per_context_token_s: float = 0.0
) -> CostModel:
    """A step costs `step_s` + `per_token_s` per batched token + `per_context_token_s` per decode context token."""
    terms = [
        CostTerm(
            name="step", feature="step", seconds_per_unit=step_s, bound="host", label="derived"
        ),
        CostTerm(
            name="token",
            feature="token",
            seconds_per_unit=per_token_s,
            bound="compute",
            label="derived",
        ),
        CostTerm(
            name="decode attention",
            feature="decode_context_token",
            seconds_per_unit=per_context_token_s,
            bound="memory",
            label="derived",
        ),
    ]
    return CostModel(CostModelFit(knee_tokens=0, knee_label="derived", terms=terms))


def cluster_config(
    model: CostModel | None = None,
    num_blocks: int = 512,
    block_size: int = 16,
    max_num_seqs: int = 32,
    max_num_batched_tokens: int = 512,
    max_model_len: int = 2048,
    policy: str = "continuous",
    replicas: int = 1,
    prefix_caching: bool = False,
    **overrides,
) -> ClusterConfig:
    settings = dict(
        scheduler_config=SchedulerConfig(
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            max_model_len=max_model_len,
            policy=policy,
        ),
        cache_config=CacheConfig(
            block_size=block_size, num_kv_blocks=num_blocks, enable_prefix_caching=prefix_caching
        ),
        cost_model=model or cost_model(0.01, 1e-5, 1e-7),
        tensor_parallel=1,
        initial_replicas=replicas,
        router_policy="round_robin",
        max_waiting_per_replica=None,
        ttft_timeout_s=None,
        max_retries=0,
        retry_backoff_s=1.0,
        cold_start_s=0.0,
        window_s=10.0,
        scrape_interval_s=None,
        seed=0,
    )
    settings.update(overrides)
    return ClusterConfig(**settings)


def run_cluster(
    config: ClusterConfig, arrival_s, prompt_tokens, output_tokens, tenants=None
) -> tuple[Cluster, float]:
    n = len(arrival_s)
    cluster = Cluster(
        config,
        [float(a) for a in arrival_s],
        [int(p) for p in prompt_tokens],
        [int(o) for o in output_tokens],
        list(tenants or ["default"] * n),
    )
    end = cluster.run()
    return cluster, end


def pool_config(
    name: str,
    model: CostModel,
    *,
    replicas: int = 1,
    tensor_parallel: int = 1,
    num_blocks: int = 256,
    max_num_batched_tokens: int = 512,
    router_policy: str = "round_robin",
) -> PoolConfig:
    """One pool of a disaggregated cluster (`name` is its scheduler role), prefix caching off."""
    return PoolConfig(
        name=name,
        scheduler_config=SchedulerConfig(max_num_batched_tokens=max_num_batched_tokens, role=name),
        cache_config=CacheConfig(
            block_size=16, num_kv_blocks=num_blocks, enable_prefix_caching=False
        ),
        cost_model=model,
        tensor_parallel=tensor_parallel,
        initial_replicas=replicas,
        router_policy=router_policy,
        window_s=10.0,
        seed=0,
    )


def host_profile(overlap: float, step_s: float = 0.002, sequence_s: float = 1e-4) -> EngineProfile:
    """A test engine profile: per-step and per-sequence host terms, `overlap` of them hidden."""
    terms = [
        HostTerm(feature="step", seconds_per_unit=step_s, label="derived", source="test"),
        HostTerm(feature="sequence", seconds_per_unit=sequence_s, label="derived", source="test"),
    ]
    return EngineProfile(
        name="test",
        engine="test",
        versions="1",
        overlap=overlap,
        overlap_label="derived",
        overlap_source="test",
        terms=terms,
    )


def fp8_linear_s(gpu: CostModel, shape) -> float:
    """Seconds of a step's fp8 linear-layer terms: what an fp8 small-batch scale shortens."""
    return linear_s(gpu, shape, fp8=True)
