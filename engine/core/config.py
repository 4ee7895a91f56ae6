"""Settings of the KV cache and the scheduler, each defined once: its type, bound, default and help.

Pure Python (shared with the simulator). `EngineConfig`, the `serve` options, the calibration's engine
settings, simulator scenarios and dashboard widgets all read a setting's definition from here through
`setting(...)`, as vLLM's `EngineArgs.add_cli_args` reads `SchedulerConfig`.
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.fields import FieldInfo

Policy = Literal["continuous", "static"]
StaticReserve = Literal["max_model_len", "request"]
Admission = Literal["optimistic", "guaranteed_no_evict", "new_token_ratio"]
BatchController = Literal["fixed", "slo"]
Role = Literal["both", "prefill", "decode"]
# vLLM's --kv-cache-dtype names: auto = the model's dtype; fp8 = fp8_e4m3
KVCacheDtype = Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "int8"]
# The linear layers' weights: auto = the model's dtype; fp8 = FP8 E4M3 weights and activations with
# per-tensor scales (vLLM's --quantization fp8, TensorRT-LLM's FP8 checkpoints)
WeightDtype = Literal["auto", "fp8"]


class CacheConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    block_size: int = Field(
        16, ge=1, le=1024, description="tokens per KV block (vLLM's --block-size)"
    )
    num_kv_blocks: int = Field(
        ..., ge=1, description="KV blocks in the pool (default: sized from memory)"
    )
    enable_prefix_caching: bool = Field(
        True,
        description="reuse full KV blocks of a shared prompt prefix, "
        "found by a chained hash of their tokens",
    )
    tenant_block_quota: dict[str, int] = Field(
        default_factory=dict, description="KV blocks each tenant may hold at once (TENANT=BLOCKS)"
    )
    num_cpu_kv_blocks: int = Field(
        0,
        ge=0,
        description="KV blocks of a second tier in host memory: blocks the "
        "GPU prefix cache evicts are kept there and loaded back on a later hit, and a "
        "preempted request's blocks come back from it instead of being recomputed "
        "(engine.core.host_tier); 0: no host tier",
    )
    kv_cache_dtype: KVCacheDtype = Field(
        "auto",
        description="KV cache storage (vLLM's --kv-cache-dtype): auto "
        "= the model's dtype; fp8 = fp8_e4m3 or fp8_e5m2 with a per-tensor "
        "scale per layer; int8 with a scale per block and KV head. 1 byte a "
        "value: about twice the blocks for the same memory",
    )
    gpu_memory_utilization: float = Field(
        0.9,
        gt=0,
        le=1,
        description="share of each GPU's memory the engine may use for weights, "
        "activations and KV (sizes the pool when num_kv_blocks is not given)",
    )

    @property
    def num_token_slots(self) -> int:
        return self.num_kv_blocks * self.block_size


class WeightConfig(BaseModel):
    """How the model's weights are stored. The simulator and planner model fp8 weights (memory from
    `engine.core.memory`, linear-layer time from a calibration's fitted fp8 GEMM terms); the live
    engine runs its model's own dtype."""

    model_config = ConfigDict(extra="forbid")
    weight_dtype: WeightDtype = Field(
        "auto",
        description="linear-layer weights (vLLM's --quantization fp8): auto = the model's dtype; "
        "fp8 = FP8 E4M3 weights and activations with per-tensor scales, half the bytes, GEMM time "
        "from measured fp8 GEMMs (only on a calibration fitted on them: aiconfigurator's H100, "
        "H200, B200 and other fp8 GPUs, not the A100); embeddings and LM head stay in the model's "
        "dtype",
    )


class MetricsConfig(BaseModel):
    """How often the engine's load gauges (waiting, running, KV usage) are read by whoever routes to it."""

    model_config = ConfigDict(extra="forbid")
    metrics_interval_s: float = Field(
        0.05,
        ge=0,
        le=60,
        description="seconds between two reads of an engine's load gauges by the router: "
        "llm-d's endpoint picker refreshes them every 50 ms (--refresh-metrics-interval, its default "
        "and minimum); 0: read at every request",
    )


class SchedulerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_num_seqs: int = Field(
        256, ge=1, le=65536, description="most requests running in one step (vLLM's --max-num-seqs)"
    )
    max_num_batched_tokens: int = Field(
        2048,
        ge=1,
        le=1 << 20,
        description="token budget of one step, "
        "prefill chunks and decodes together (vLLM's --max-num-batched-tokens)",
    )
    max_model_len: int = Field(
        2048, ge=2, description="longest sequence, prompt plus output, in tokens"
    )
    policy: Policy = Field(
        "continuous",
        description="continuous: vLLM's token-budget rule with preemption; "
        "static: a batch is admitted together and reserves KV for its longest sequence",
    )
    # static batching reserves KV for the longest sequence a request could reach:
    # max_model_len (the traditional server) or its own prompt + max_tokens
    static_reserve: StaticReserve = Field(
        "max_model_len",
        description="static policy's reservation per "
        "request: max_model_len (traditional) or its own prompt + max_tokens",
    )
    # TensorRT-LLM's default capacity scheduler (GUARANTEED_NO_EVICT) admits a request only when the
    # pool can hold it and every running request at their full lengths; vLLM admits what fits now
    # and preempts later; SGLang 0.4 reserves a decaying share of the running requests' remaining
    # output (engine.core.new_token_ratio).
    admission: Admission = Field(
        "optimistic",
        description="continuous policy's admission: optimistic (vLLM: what fits now, preempt "
        "later) or guaranteed_no_evict (TensorRT-LLM: only when every admitted request can reach "
        "its full length without eviction) or new_token_ratio (SGLang 0.4: only when its prompt and "
        "output fit beside a decaying share, 0.7 down to 0.098, of the running requests' remaining "
        "output; out of room, a decode step retracts the least advanced requests and raises the share)",
    )
    batch_controller: BatchController = Field(
        "fixed",
        description="fixed: max_num_seqs and max_num_batched_tokens "
        "as set; slo: adapt both, up to those caps, from the observed time per "
        "output token and the waiting queue (engine.core.batch_controller)",
    )
    batch_target_tpot_s: float = Field(
        0.1, gt=0, description="the slo batch controller's target time per output token, seconds"
    )
    mixed_steps: bool = Field(
        True,
        description="True: a step decodes the running requests and prefills waiting ones together "
        "(vLLM v1, Sarathi-Serve); False: vLLM v0's default scheduler, the co-located baseline of "
        "DistServe and Splitwise: while prompts wait and fit, a step prefills only them (whole "
        "prompts, they go first) and every running decode waits for it; otherwise a step only decodes",
    )
    batch_wait_steps: int = Field(
        0,
        ge=0,
        le=1000,
        description="TensorRT-LLM's batch_wait_timeout_iters: while requests decode, hold new prompts "
        "back for up to this many steps in a row so more of them share a prefill, unless the step's "
        "tokens reach batch_wait_max_tokens_ratio x max_num_batched_tokens (engine.core.batch_wait); "
        "0: no hold",
    )
    batch_wait_max_tokens_ratio: float = Field(
        0.0,
        ge=0,
        le=1,
        description="TensorRT-LLM's batch_wait_max_tokens_ratio: a held step lets its prompts in once "
        "they and the running requests' tokens reach this share of max_num_batched_tokens",
    )
    role: Role = Field(
        "both",
        description="both: prefill and decode here (co-located); prefill: run each "
        "request's prefill, then hand its KV blocks and first token over; decode: admit requests "
        "whose KV arrives from a prefill instance (engine.core.kv_handoff)",
    )

    @model_validator(mode="after")
    def _role_needs_continuous(self) -> "SchedulerConfig":
        if self.role != "both" and self.policy != "continuous":
            raise ValueError(
                f"role={self.role!r} needs policy='continuous' (got {self.policy!r}); the static "
                "policy cannot hand requests over"
            )
        if not self.mixed_steps and (self.policy != "continuous" or self.role != "both"):
            raise ValueError(
                f"mixed_steps=False needs policy='continuous' and role='both' (got {self.policy!r}, "
                f"{self.role!r}); it is a co-located continuous-batching schedule"
            )
        if (self.batch_wait_steps > 0) != (self.batch_wait_max_tokens_ratio > 0):
            raise ValueError(
                f"batch_wait_steps={self.batch_wait_steps} with batch_wait_max_tokens_ratio="
                f"{self.batch_wait_max_tokens_ratio} holds nothing (TensorRT-LLM lets prompts in at "
                "once when either is 0); expected both above 0, or both 0 for no hold"
            )
        if self.batch_wait_steps and (self.policy != "continuous" or not self.mixed_steps):
            raise ValueError(
                f"batch_wait_steps={self.batch_wait_steps} needs policy='continuous' and "
                f"mixed_steps=True (got {self.policy!r}, mixed_steps={self.mixed_steps}); prompts "
                "are held back only from steps that decode"
            )
        return self


def engine_configs(
    settings: Any, *, num_kv_blocks: int, max_model_len: int, **resolved: Any
) -> tuple[CacheConfig, SchedulerConfig]:
    """The engine's `CacheConfig` and `SchedulerConfig` from any settings object that carries
    their fields by name (`EngineConfig`, a scenario's `SchedulerSettings`, a calibration's
    `EngineSettings`).

    The one place settings become engine configs: the live engine, the simulator and validation
    all call it, so a setting added to either config reaches all three. Each field the settings
    hold (not None) is taken as it is; `num_kv_blocks`, `max_model_len` and `resolved` (values the
    caller worked out, e.g. prefix caching off for a trace without block hashes) replace the
    settings' own; the rest keep their defaults. A name in `resolved` that neither config has is
    an error."""
    unknown = set(resolved) - set(CacheConfig.model_fields) - set(SchedulerConfig.model_fields)
    if unknown:
        raise KeyError(
            f"engine_configs: no setting named {sorted(unknown)}; expected fields of "
            "CacheConfig or SchedulerConfig"
        )
    resolved = {**resolved, "num_kv_blocks": num_kv_blocks, "max_model_len": max_model_len}

    def build(config: type[BaseModel]) -> Any:
        values = {
            name: getattr(settings, name)
            for name in config.model_fields
            if getattr(settings, name, None) is not None
        }
        values.update(
            {name: value for name, value in resolved.items() if name in config.model_fields}
        )
        return config(**values)

    return build(CacheConfig), build(SchedulerConfig)


def setting(config: type[BaseModel], name: str, **changes: Any) -> Any:
    """The field `name` of `config` (its bound, default and help), with `changes` (e.g. default=None),
    for reuse as another model's field: `max_num_seqs: int = setting(SchedulerConfig, "max_num_seqs")`."""
    if name not in config.model_fields:
        raise KeyError(
            f"{config.__name__} has no setting {name!r}; expected one of {sorted(config.model_fields)}"
        )
    return FieldInfo.merge_field_infos(config.model_fields[name], **changes)


def bounds(config: type[BaseModel], name: str) -> tuple[float | None, float | None]:
    """(lower, upper) inclusive bounds of a numeric setting, None where unbounded; for CLI and widgets."""
    low = high = None
    for item in config.model_fields[name].metadata:
        low = getattr(item, "ge", low)
        high = getattr(item, "le", high)
        if getattr(item, "gt", None) is not None:
            low = item.gt
        if getattr(item, "lt", None) is not None:
            high = item.lt
    return low, high
