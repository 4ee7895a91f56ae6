"""`Scenario`: everything one simulation needs, validated on creation and loadable from YAML or JSON.

Traffic (a trace file in any format `traces` reads, or a synthetic arrival process with length
distributions, optionally with extra synthetic parts laid over it on the same clock: a burst of long
requests, another tenant's spike), the model, the GPU, its tensor-parallel degree and calibration, the
cluster (replicas, router, autoscaler with cold starts: `simulator.fleet_spec`), the scheduler
settings (each defined once in `engine.core.config` and reused here), the clients (timeout to first
token, retries), the SLO and prices. The CLI, the planner and the dashboard all build this same object.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine.core.config import (
    Admission,
    BatchController,
    CacheConfig,
    KVCacheDtype,
    Policy,
    SchedulerConfig,
    StaticReserve,
    WeightConfig,
    WeightDtype,
    setting,
)
from engine.settings_file import read_mapping
from simulator.fleet_spec import ClusterSpec
from simulator.model_spec import ModelSpec
from simulator.slo import SLO
from traces.arrivals import ArrivalSpec, PoissonArrivals
from traces.lengths import LengthSpec, PresetLength
from traces.request import DEFAULT_TENANT
from traces.synthetic import SyntheticTraceSpec, synthesize
from traces.trace import Trace

SCENARIO_FILE = "a scenario: a YAML or JSON mapping of scenario fields (as in examples/scenarios/)"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TrafficPart(_Strict):
    """Extra synthetic traffic laid over the main traffic on the same clock: its own arrival process and
    lengths from `start_s` for `duration_s`, all of one tenant (a burst of long-context requests, one
    tenant's spike). Drawn from the scenario's seed and the part's position, independently of the rest."""

    arrivals: ArrivalSpec = Field(description="arrival process, its time 0 at `start_s`")
    prompt: LengthSpec = PresetLength(name="azure-conv-prompt")
    output: LengthSpec = PresetLength(name="azure-conv-output")
    start_s: float = Field(
        0.0, ge=0, description="when the part begins, on the main traffic's clock"
    )
    duration_s: float = Field(60.0, gt=0, description="how long the part's arrivals last")
    tenant: str = Field(
        DEFAULT_TENANT, min_length=1, description="the tenant every request of the part belongs to"
    )

    @model_validator(mode="after")
    def _synthesizable(self) -> TrafficPart:
        try:
            self._spec(0)  # the synthetic trace's own checks (a prompt that could be empty, ...)
        except ValidationError as error:
            raise ValueError(
                "; ".join(item["msg"].removeprefix("Value error, ") for item in error.errors())
            ) from None
        return self

    def _spec(self, seed: int) -> SyntheticTraceSpec:
        return SyntheticTraceSpec(
            arrivals=self.arrivals,
            prompt=self.prompt,
            output=self.output,
            duration_s=self.duration_s,
            seed=seed,
            name=f"part-{self.tenant}",
            tenant=self.tenant,
        )

    def synthesize(self, seed: int, position: int) -> Trace:
        """The part's requests, arrivals shifted to start at `start_s`."""
        part_seed = int(np.random.SeedSequence([seed, position]).generate_state(1)[0])
        trace = synthesize(self._spec(part_seed))
        return trace.replace(
            f"part {position} from {self.start_s} s", arrival_s=trace.arrival_s + self.start_s
        )


class TrafficSpec(_Strict):
    """A trace file, or a synthetic process (`arrivals` + lengths over `duration_s`)."""

    trace: str | None = Field(
        None,
        description="trace file in any format `traces` reads (Azure, BurstGPT, "
        "Mooncake, Vidur, canonical JSONL/CSV)",
    )
    trace_format: str | None = Field(None, description="the trace's format (default: detected)")
    arrivals: ArrivalSpec = Field(
        PoissonArrivals(rate_per_s=5.0),
        description="synthetic arrival process (poisson, gamma, diurnal, spike over any of them)",
    )
    prompt: LengthSpec = PresetLength(name="azure-conv-prompt")
    output: LengthSpec = PresetLength(name="azure-conv-output")
    duration_s: float = Field(600.0, gt=0, description="length of the synthetic traffic")
    rate_scale: float = Field(
        1.0, gt=0, description="multiplies the request rate (arrival times divided by it)"
    )
    max_requests: int | None = Field(None, ge=1, description="keep only the first N requests")
    max_concurrency: int | None = Field(
        None,
        ge=1,
        description="closed loop: at most N requests in flight from the clients (vLLM "
        "benchmark_serving's --max-concurrency); a request arriving while N are in flight waits "
        "at the client and is sent when one ends, its latencies timed from the send; "
        "none: open loop, each request sent at its arrival",
    )
    too_long: Literal["error", "clip", "drop"] = Field(
        "error",
        description="a request longer than max_model_len: an error, clipped to fit, or dropped",
    )
    shared_prefix_groups: int | None = Field(
        None,
        ge=1,
        description="Mooncake-style: each request starts with "
        "one of this many shared prefixes (system prompts, documents)",
    )
    shared_prefix_tokens: int = Field(1024, ge=1, description="length of each shared prefix")
    tenants: dict[str, float] = Field(
        default_factory=dict,
        description="tenant -> share of the requests "
        "(assigned at random); empty: the trace's own tenants",
    )
    parts: list[TrafficPart] = Field(
        default_factory=list,
        description="extra synthetic traffic laid over "
        "the main traffic (after its rate_scale, max_requests, prefixes and tenants), "
        "each part of one tenant",
    )


class ModelChoice(_Strict):
    name: str = Field(
        "llama-2-7b", description="model preset (llama-2-7b, llama-3-8b, llama-2-70b, ...)"
    )
    dtype: str = Field(
        "float16",
        description="the model's dtype (float16, bfloat16, fp8, int8): its activations, its weights "
        "where weight_dtype is auto, and the KV cache's where scheduler.kv_cache_dtype is auto",
    )
    weight_dtype: WeightDtype = setting(WeightConfig, "weight_dtype")

    def spec(self) -> ModelSpec:
        """The model's shape and memory arithmetic, in these dtypes."""
        return ModelSpec.from_preset(self.name, dtype=self.dtype, weight_dtype=self.weight_dtype)


FUSED_MIB_BOUNDS = {"gt": 0, "le": 4096}  # one fused all-reduce threshold, in MiB


class HardwareChoice(_Strict):
    gpu: str = Field("A100-80GB", description="GPU from the hardware catalog")
    tensor_parallel: int = Field(1, ge=1, le=64, description="GPUs per replica")
    calibration: str | None = Field(
        None,
        description="calibration name or file (default: the best shipped "
        "one for this model, GPU and TP degree)",
    )
    fused_all_reduce_mb: dict[
        Annotated[int, Field(ge=1, le=64)], Annotated[float, Field(**FUSED_MIB_BOUNDS)]
    ] = Field(
        default_factory=dict,
        description="per tensor-parallel degree, all-reduces of up to this many MiB of activations "
        "per GPU run TensorRT-LLM's fused one-shot kernel, timed by its aiconfigurator table of "
        "the same GPU, model and degree, less the add + RMSNorm launches it absorbs (vLLM's "
        "enable_fi_allreduce_fusion with VLLM_FLASHINFER_ALLREDUCE_FUSION_THRESHOLDS_MB, the same "
        "map; InferenceMAX's B200 runs: {2: 32, 4: 32, 8: 8}); a degree not in it: every "
        "all-reduce as the calibration times it. The planner keeps the map for this GPU only",
    )
    graph_steps: Literal["every", "decode_only"] | None = Field(
        None,
        description="the serving stack's CUDA-graph mode where its launch settings differ from "
        "the engine profile's: decode_only, a step with a prompt in it runs eagerly and pays the "
        "profile's eager_layer term (vLLM's cudagraph_mode FULL_DECODE_ONLY: InferenceMAX's B200 "
        "runs); empty: the profile's",
    )


class FusedAllReduce(_Strict):
    """One degree's fused all-reduce threshold (`HardwareChoice.fused_all_reduce_mb`'s values): the
    what-if page's widget reads its bounds and help here."""

    mib: float | None = Field(
        None,
        **FUSED_MIB_BOUNDS,
        description="all-reduces of up to this many MiB of activations per GPU at this degree run "
        "TensorRT-LLM's fused kernel (vLLM's enable_fi_allreduce_fusion); empty: none",
    )


class SchedulerSettings(_Strict):
    """The engine's own settings, with their engine definitions."""

    policy: Policy = setting(SchedulerConfig, "policy")
    static_reserve: StaticReserve = setting(SchedulerConfig, "static_reserve")
    admission: Admission = setting(SchedulerConfig, "admission")
    max_num_seqs: int = setting(SchedulerConfig, "max_num_seqs")
    max_num_batched_tokens: int = setting(SchedulerConfig, "max_num_batched_tokens")
    batch_controller: BatchController = setting(SchedulerConfig, "batch_controller")
    batch_target_tpot_s: float = setting(SchedulerConfig, "batch_target_tpot_s")
    mixed_steps: bool = setting(SchedulerConfig, "mixed_steps")
    batch_wait_steps: int = setting(SchedulerConfig, "batch_wait_steps")
    batch_wait_max_tokens_ratio: float = setting(SchedulerConfig, "batch_wait_max_tokens_ratio")
    max_model_len: int | None = setting(
        SchedulerConfig,
        "max_model_len",
        default=None,
        description="longest sequence (default: the model's context length)",
    )
    block_size: int = setting(CacheConfig, "block_size")
    enable_prefix_caching: bool = setting(CacheConfig, "enable_prefix_caching")
    tenant_block_quota: dict[str, int] = setting(CacheConfig, "tenant_block_quota")
    kv_cache_dtype: KVCacheDtype = setting(CacheConfig, "kv_cache_dtype")
    gpu_memory_utilization: float = setting(CacheConfig, "gpu_memory_utilization")
    num_kv_blocks: int | None = setting(CacheConfig, "num_kv_blocks", default=None)
    cpu_kv_gb: float = Field(
        0.0,
        ge=0,
        le=16384,
        description="host memory per replica for a second KV "
        "tier (engine.core.host_tier): evicted prefix blocks and preempted requests' "
        "blocks come back over PCIe instead of being recomputed, when cheaper; 0: none",
    )


class ClientSpec(_Strict):
    ttft_timeout_s: float | None = Field(
        None,
        gt=0,
        description="a client abandons a request with no "
        "first token after this long (the article's 10-second spinner)",
    )
    max_retries: int = Field(
        0, ge=0, le=10, description="times an abandoned or rejected request is retried"
    )
    retry_backoff_s: float = Field(
        1.0, ge=0, description="wait before the first retry; doubles each time"
    )


class Prices(_Strict):
    gpu_usd_per_hour: float | None = Field(
        None, ge=0, description="per GPU-hour (default: the catalog's)"
    )


class Scenario(_Strict):
    name: str = "scenario"
    traffic: TrafficSpec = TrafficSpec()
    model: ModelChoice = ModelChoice()
    hardware: HardwareChoice = HardwareChoice()
    engine_profile: str | None = Field(
        None,
        description="serving stack whose host overhead is added to the "
        "GPU calibration's step time: a name from `surgeplan calibrations "
        "profiles` (vllm-v0, vllm-v1, sglang, trtllm, surgeplan) or a profile "
        "JSON file (default: surgeplan for a calibration measured on our own "
        "engine, else vllm-v1)",
    )
    cluster: ClusterSpec = ClusterSpec()
    scheduler: SchedulerSettings = SchedulerSettings()
    clients: ClientSpec = ClientSpec()
    slo: SLO = SLO()
    prices: Prices = Prices()
    seed: int = 0
    window_s: float = Field(10.0, gt=0, description="time-series window")
    horizon_s: float | None = Field(
        None, gt=0, description="stop the clock here (default: when all is done)"
    )

    @model_validator(mode="after")
    def _fused_all_reduce_not_split(self) -> Scenario:
        if self.hardware.fused_all_reduce_mb and self.cluster.disaggregation is not None:
            raise ValueError(
                "hardware.fused_all_reduce_mb is set with cluster.disaggregation, whose pools read "
                "their own calibrations; expected fused_all_reduce_mb unset for a disaggregated fleet"
            )
        return self

    @classmethod
    def load(cls, path: str | Path) -> Scenario:
        """A scenario from a YAML or JSON file; a bad field is named with its path in the file."""
        path = Path(path)
        return cls.from_file_data(read_mapping(path, SCENARIO_FILE), path)

    @classmethod
    def from_file_data(cls, data: dict, path: Path) -> Scenario:
        """A scenario from the mapping read from the file at `path`: a bad field is named with its path in
        the file, and a relative trace path is taken from the file's folder when the trace is there."""
        try:
            scenario = cls.model_validate(data)
        except ValidationError as error:
            raise ValueError(f"{path}: {describe_errors(error)}") from None
        if scenario.traffic.trace and not Path(scenario.traffic.trace).is_absolute():
            resolved = (path.parent / scenario.traffic.trace).resolve()
            if resolved.exists():
                scenario = scenario.model_copy(
                    update={"traffic": scenario.traffic.model_copy(update={"trace": str(resolved)})}
                )
        return scenario

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = self.model_dump(mode="json")
        if path.suffix.lower() == ".json":
            path.write_text(json.dumps(data, indent=1) + "\n")
        else:
            import yaml

            path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path


def describe_errors(error: ValidationError) -> str:
    """One line per bad field: `cluster.replicas: Input should be greater than or equal to 1 (got 0)`."""
    lines = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "scenario"
        lines.append(f"{where}: {item['msg']} (got {item.get('input')!r})")
    return "; ".join(lines)
