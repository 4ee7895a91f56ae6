"""The fleet a scenario runs: replicas, the router, the autoscaler with its cold starts, and prefill /
decode pools when disaggregated (`ClusterSpec`). Apart from `simulator.scenario` (traffic, model, GPU,
scheduler, clients, SLO, prices) because the cluster simulation, the planner's searches and the
dashboard's split and what-if pages read these alone; `Scenario.cluster` holds one.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine.core.config import MetricsConfig, SchedulerConfig, setting

RouterPolicy = Literal[
    "round_robin", "least_outstanding", "least_kv", "power_of_two", "prefix_affinity"
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RouterSpec(_Strict):
    policy: RouterPolicy = Field("least_outstanding", description="how a request picks its replica")
    staleness_s: float = setting(
        MetricsConfig,
        "metrics_interval_s",
        default=0.0,
        description="how old the replica state the router reads may be; a real router's is the "
        "engine's metrics interval (MetricsConfig.metrics_interval_s, 50 ms): it sees each replica's "
        "load as of its last scrape, plus the requests it sent since. Above 0 the replicas of a "
        "fixed fleet advance in parallel between scrapes (simulator.cluster.parallel, --workers); "
        "0 (default): every request reads the live state, the exact sequential simulation",
    )


class ColdStart(_Strict):
    """A new replica serves only after provisioning + weight load + engine warm-up.

    Defaults: provisioning 60 s (a GPU node from a cloud pool: typically 1-3 min); weights read at
    1 GB/s (network storage; Llama-2-7B fp16 = 13.5 GB -> 13.5 s); warm-up 30 s (memory profiling,
    CUDA graph capture). Weight load + warm-up = 43.5 s for Llama-2-7B, against about 44 s measured
    from `vllm serve` start to ready for Llama-2-7B on an A100 (vLLM issue reports, 2024)."""

    provisioning_s: float = Field(60.0, ge=0, description="from request to a machine with the GPU")
    weight_load_bytes_per_s: float = Field(
        1e9, gt=0, description="disk/network bandwidth for the weights"
    )
    weight_load_s: float | None = Field(
        None,
        ge=0,
        description="override: seconds to load the weights "
        "(default: weight bytes per GPU / weight_load_bytes_per_s)",
    )
    warmup_s: float = Field(
        30.0, ge=0, description="engine start-up after the weights are in memory"
    )


class AutoscalerSpec(_Strict):
    """Thresholds as llm-d's variant autoscaler: scale out when KV usage ≥ 0.8 or ≥ 5 requests wait per
    replica (or windowed P99 TTFT exceeds its bound); scale in after a stabilisation window of calm."""

    enabled: bool = False
    min_replicas: int = Field(1, ge=1)
    max_replicas: int = Field(8, ge=1)
    scrape_interval_s: float = Field(15.0, gt=0, description="metrics scrape period")
    kv_usage_threshold: float = Field(
        0.8, gt=0, le=1, description="scale out at this mean KV usage"
    )
    waiting_per_replica_threshold: float = Field(
        5.0, gt=0, description="scale out at this many waiting requests per serving replica"
    )
    ttft_p99_threshold_s: float | None = Field(
        None, gt=0, description="scale out when the windowed P99 TTFT exceeds this"
    )
    scale_in_kv_usage: float = Field(
        0.3, ge=0, le=1, description="calm: KV usage below this and no waiting"
    )
    scale_in_stabilization_s: float = Field(
        300.0, ge=0, description="calm this long before a scale-in"
    )
    cooldown_s: float = Field(
        60.0, ge=0, description="no scaling action within this long of the last"
    )
    step_replicas: int = Field(1, ge=1, description="replicas added per scale-out")
    cold_start: ColdStart = ColdStart()

    @model_validator(mode="after")
    def _range(self) -> AutoscalerSpec:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"min_replicas={self.min_replicas} > max_replicas={self.max_replicas}; "
                "expected min ≤ max"
            )
        return self


class PoolSettings(_Strict):
    """One pool's own GPU (default: the scenario's), batch settings (default: the scenario's scheduler
    settings), router and autoscaler."""

    gpu: str | None = Field(
        None,
        description="GPU of this pool's replicas, from the hardware catalog (default: "
        "hardware.gpu): its memory sizes the pool's KV, its calibration times the pool's steps and "
        "its catalog price prices the pool's GPU-hours (Splitwise-HA: H100 prompt, A100 token pools)",
    )
    calibration: str | None = Field(
        None,
        description="calibration name or file for this pool's steps (default: the best shipped "
        "one for the pool's model, GPU and TP degree); it must be of that GPU and TP degree",
    )
    max_num_seqs: int | None = setting(SchedulerConfig, "max_num_seqs", default=None)
    max_num_batched_tokens: int | None = setting(
        SchedulerConfig, "max_num_batched_tokens", default=None
    )
    router: RouterSpec = RouterSpec()
    autoscaler: AutoscalerSpec = AutoscalerSpec()

    @model_validator(mode="after")
    def _known_gpu(self) -> PoolSettings:
        if self.gpu is not None:
            from simulator.hardware.catalog import get_hardware

            get_hardware(self.gpu)
        return self


class DisaggregationSpec(_Strict):
    """Prefill and decode on separate pools (DistServe, Splitwise, Dynamo, llm-d): a request is prefilled
    on a prefill replica, its KV moved over `link` to a decode replica that decodes the rest."""

    prefill_replicas: int = Field(1, ge=1, le=10000, description="prefill replicas at start")
    decode_replicas: int = Field(1, ge=1, le=10000, description="decode replicas at start")
    prefill_tensor_parallel: int | None = Field(
        None,
        ge=1,
        le=64,
        description="GPUs per prefill replica (default: hardware.tensor_parallel)",
    )
    decode_tensor_parallel: int | None = Field(
        None, ge=1, le=64, description="GPUs per decode replica (default: hardware.tensor_parallel)"
    )
    link: str = Field(
        "infiniband-ndr",
        description="KV link from the link catalog (simulator.links): nvlink-4, "
        "nvlink-3, pcie-gen5-x16, pcie-gen4-x16, infiniband-ndr, infiniband-hdr, ethernet-400g, "
        "ethernet-100g",
    )
    prefill: PoolSettings = PoolSettings()
    decode: PoolSettings = PoolSettings()
    mixed_pool: bool = Field(
        False,
        description="Splitwise's mixed pool (simulator.cluster.mixed_pool): when every prefill "
        "replica's queue is long, a decode replica moves to the mixed pool and serves new requests "
        "whole (prefill and decode, no KV transfer); when no decode replica has room for a request's "
        "KV, its prefill replica decodes it; a machine returns to its pool once it runs empty",
    )
    mixed_pool_max_pending_tokens: int = Field(
        8192,
        ge=1,
        le=10_000_000,
        description="mixed pool: a replica's queue is long when requests wait there and its prompt "
        "tokens not yet computed, with the new request's, exceed this (Splitwise's "
        "prompt_max_pending_batch_tokens, 8192)",
    )

    @model_validator(mode="after")
    def _known_link(self) -> DisaggregationSpec:
        from simulator.links import get_link

        get_link(self.link)
        return self


class ClusterSpec(_Strict):
    replicas: int = Field(
        1, ge=1, le=10000, description="replicas at start (each of tensor_parallel GPUs)"
    )
    router: RouterSpec = RouterSpec()
    autoscaler: AutoscalerSpec = AutoscalerSpec()
    max_waiting_per_replica: int | None = Field(
        None,
        ge=1,
        description="admission control: a replica with "
        "this many waiting rejects (as `serve` answers 503)",
    )
    disaggregation: DisaggregationSpec | None = Field(
        None,
        description="prefill and decode on separate pools "
        "(replaces replicas, router and autoscaler above)",
    )
