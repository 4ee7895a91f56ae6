"""`surgeplan serve`: the OpenAI-compatible server, with vLLM's option names."""
import re
from typing import Optional

import typer

from engine.config import EngineConfig, cli_option

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "kib": 2**10, "m": 10**6, "mb": 10**6, "mib": 2**20,
          "g": 10**9, "gb": 10**9, "gib": 2**30, "t": 10**12, "tb": 10**12, "tib": 2**40}


def parse_bytes(text: str) -> int:
    """'8GiB', '512MB', '1e9' or a plain byte count, as bytes."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise typer.BadParameter(f"{text!r} is not a size; expected bytes like 8GiB, 512MiB, 2GB or 1073741824")
    return int(float(match.group(1)) * _UNITS[unit])


def parse_quotas(items: list[str]) -> dict[str, int]:
    """['tenant=blocks', ...] as a dict."""
    quotas = {}
    for item in items:
        tenant, _, blocks = item.partition("=")
        if not tenant or not blocks.isdigit() or int(blocks) < 1:
            raise typer.BadParameter(f"--tenant-kv-quota {item!r}; expected TENANT=BLOCKS with BLOCKS ≥ 1")
        quotas[tenant] = int(blocks)
    return quotas


def serve(
    model: str = cli_option(EngineConfig, "model"),
    load_format: str = cli_option(EngineConfig, "load_format"),
    dtype: str = cli_option(EngineConfig, "dtype"),
    device: Optional[str] = cli_option(EngineConfig, "device"),
    seed: int = cli_option(EngineConfig, "seed"),
    block_size: int = cli_option(EngineConfig, "block_size"),
    num_kv_blocks: Optional[int] = cli_option(EngineConfig, "num_kv_blocks"),
    kv_cache_memory: Optional[str] = typer.Option(None, "--kv-cache-memory", help="KV pool size, e.g. 4GiB"),
    gpu_memory_utilization: float = cli_option(EngineConfig, "gpu_memory_utilization"),
    max_num_seqs: int = cli_option(EngineConfig, "max_num_seqs"),
    max_num_batched_tokens: int = cli_option(EngineConfig, "max_num_batched_tokens"),
    max_model_len: Optional[int] = cli_option(EngineConfig, "max_model_len"),
    policy: str = cli_option(EngineConfig, "policy"),
    enable_prefix_caching: bool = cli_option(EngineConfig, "enable_prefix_caching"),
    max_waiting_requests: Optional[int] = typer.Option(None, "--max-waiting-requests",
                                                       help="past this many waiting requests, answer 503 + Retry-After"),
    tenant_kv_quota: list[str] = typer.Option([], "--tenant-kv-quota", help="TENANT=BLOCKS (repeatable; X-Tenant header)"),
    request_timeout: Optional[float] = typer.Option(None, "--request-timeout",
                                                    help="default per-request deadline in seconds (X-Request-Timeout overrides)"),
    served_model_name: list[str] = typer.Option([], "--served-model-name", help="name(s) clients use (default: --model)"),
    max_request_body_bytes: str = typer.Option("4MiB", "--max-request-body-bytes"),
    retry_after: int = typer.Option(1, "--retry-after", help="seconds in the Retry-After header of a 503"),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8000, "--port"),
    uvicorn_log_level: str = typer.Option("info", "--uvicorn-log-level"),
) -> None:
    """Serve a model over the OpenAI API (/v1/completions, /v1/chat/completions, /v1/models, /health, /metrics)."""
    import uvicorn

    from engine.openai.api_server import build_app

    try:
        config = EngineConfig(
            model=model, load_format=load_format, dtype=dtype, device=device, seed=seed, block_size=block_size,
            num_kv_blocks=num_kv_blocks, kv_cache_memory_bytes=parse_bytes(kv_cache_memory) if kv_cache_memory else None,
            gpu_memory_utilization=gpu_memory_utilization, max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens, max_model_len=max_model_len, policy=policy,
            enable_prefix_caching=enable_prefix_caching, tenant_block_quota=parse_quotas(tenant_kv_quota))
        app = build_app(config, served_model_name or None, max_waiting_requests, request_timeout,
                        parse_bytes(max_request_body_bytes), retry_after)
    except ValueError as exc:   # pydantic's ValidationError is a ValueError too
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    uvicorn.run(app, host=host, port=port, log_level=uvicorn_log_level, timeout_graceful_shutdown=5)


app = typer.Typer(help="The OpenAI-compatible server.")
app.command("serve")(serve)

if __name__ == "__main__":
    app()
