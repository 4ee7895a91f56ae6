"""`EngineConfig`: everything `LLM(...)` and `surgeplan serve` accept. Cache and scheduler settings are
the fields of `engine.core.config`, reused here (never redeclared), and `cli_option` turns any of them
into a command-line option with the same bound, default and help."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.core.config import (
    BatchController,
    CacheConfig,
    KVCacheDtype,
    Policy,
    Role,
    SchedulerConfig,
    StaticReserve,
    bounds,
    setting,
)

__all__ = ["CacheConfig", "SchedulerConfig", "EngineConfig", "cli_option"]


class EngineConfig(BaseModel):
    """Cache and scheduler settings are derived from these by `LLMEngine`."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())
    model: str = Field(
        description="model directory, or a preset name (tiny, cpu-small, llama-3-8b, ...)"
    )
    load_format: Literal["auto", "safetensors", "dummy"] = Field(
        "auto", description="auto, safetensors or dummy (random weights)"
    )
    dtype: str = Field("auto", description="auto, float32, float16 or bfloat16")
    device: str | None = Field(None, description="cpu or cuda (default: cuda when present)")
    seed: int = 0
    enforce_eager: bool = Field(
        False,
        description="run every step eagerly: no CUDA graphs for decode-only steps (on a CPU "
        "every step is eager)",
    )
    block_size: int = setting(CacheConfig, "block_size")
    num_kv_blocks: int | None = setting(CacheConfig, "num_kv_blocks", default=None)
    kv_cache_memory_bytes: int | None = Field(
        None, ge=1, description="KV pool size in bytes (default: from device memory)"
    )
    gpu_memory_utilization: float = setting(CacheConfig, "gpu_memory_utilization")
    enable_prefix_caching: bool = setting(CacheConfig, "enable_prefix_caching")
    tenant_block_quota: dict[str, int] = setting(CacheConfig, "tenant_block_quota")
    num_cpu_kv_blocks: int = setting(CacheConfig, "num_cpu_kv_blocks")
    kv_cache_dtype: KVCacheDtype = setting(CacheConfig, "kv_cache_dtype")
    max_num_seqs: int = setting(SchedulerConfig, "max_num_seqs")
    max_num_batched_tokens: int = setting(SchedulerConfig, "max_num_batched_tokens")
    max_model_len: int | None = setting(
        SchedulerConfig,
        "max_model_len",
        default=None,
        description="longest sequence in tokens (default: the model's max_position_embeddings)",
    )
    policy: Policy = setting(SchedulerConfig, "policy")
    static_reserve: StaticReserve = setting(SchedulerConfig, "static_reserve")
    batch_controller: BatchController = setting(SchedulerConfig, "batch_controller")
    mixed_steps: bool = setting(SchedulerConfig, "mixed_steps")
    batch_wait_steps: int = setting(SchedulerConfig, "batch_wait_steps")
    batch_wait_max_tokens_ratio: float = setting(SchedulerConfig, "batch_wait_max_tokens_ratio")
    batch_target_tpot_s: float = setting(SchedulerConfig, "batch_target_tpot_s")
    role: Role = setting(SchedulerConfig, "role")


_FROM_FIELD = object()


def cli_option(
    config: type[BaseModel],
    name: str,
    default: Any = _FROM_FIELD,
    flag: str | None = None,
    **typer_options: Any,
) -> Any:
    """A typer option for setting `name` of `config`: its default (unless given), help and bounds;
    `typer_options` go to typer.Option as they are (e.g. envvar)."""
    import typer

    field = config.model_fields[name]
    if default is _FROM_FIELD:
        default = ... if field.is_required() else field.get_default(call_default_factory=True)
    flag = flag or "--" + name.replace("_", "-")
    if field.annotation is bool:
        flag = f"{flag}/--no-{flag[2:]}"
    low, high = bounds(config, name)
    help_text = field.description or ""
    choices = getattr(field.annotation, "__args__", None)
    if (
        choices
        and all(isinstance(choice, str) for choice in choices)
        and choices[0] not in help_text
    ):
        help_text += f" [{' | '.join(choices)}]"
    return typer.Option(default, flag, help=help_text, min=low, max=high, **typer_options)
