"""`surgeplan serve`: the OpenAI-compatible server, with vLLM's option names. Engine options come from
EngineConfig's fields and server options from ServerConfig's, through `cli_option`."""

import re
from pathlib import Path

import typer

from engine.config import EngineConfig, cli_option
from engine.openai.server_config import ServerConfig

_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "kib": 2**10,
    "m": 10**6,
    "mb": 10**6,
    "mib": 2**20,
    "g": 10**9,
    "gb": 10**9,
    "gib": 2**30,
    "t": 10**12,
    "tb": 10**12,
    "tib": 2**40,
}


def parse_bytes(text: str) -> int:
    """'8GiB', '512MB', '1e9' or a plain byte count, as bytes."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise typer.BadParameter(
            f"{text!r} is not a size; expected bytes like 8GiB, 512MiB, 2GB or 1073741824"
        )
    return int(float(match.group(1)) * _UNITS[unit])


def parse_quotas(items: list[str]) -> dict[str, int]:
    """['tenant=blocks', ...] as a dict."""
    quotas = {}
    for item in items:
        tenant, _, blocks = item.partition("=")
        if not tenant or not blocks.isdigit() or int(blocks) < 1:
            raise typer.BadParameter(
                f"--tenant-kv-quota {item!r}; expected TENANT=BLOCKS with BLOCKS ≥ 1"
            )
        quotas[tenant] = int(blocks)
    return quotas


def _size_option(name: str):
    """A byte-count setting of ServerConfig, given on the command line as a size (4MiB, 16KiB)."""
    field = ServerConfig.model_fields[name]
    return typer.Option(
        "auto" if field.default is None else f"{field.default}",
        "--" + name.replace("_", "-"),
        help=f"{field.description}; bytes or a size like 16KiB",
    )


def serve(
    model: str = cli_option(EngineConfig, "model"),
    load_format: str = cli_option(EngineConfig, "load_format"),
    dtype: str = cli_option(EngineConfig, "dtype"),
    device: str | None = cli_option(EngineConfig, "device"),
    seed: int = cli_option(EngineConfig, "seed"),
    enforce_eager: bool = cli_option(EngineConfig, "enforce_eager"),
    block_size: int = cli_option(EngineConfig, "block_size"),
    num_kv_blocks: int | None = cli_option(EngineConfig, "num_kv_blocks"),
    kv_cache_memory: str | None = typer.Option(
        None, "--kv-cache-memory", help="KV pool size, e.g. 4GiB"
    ),
    gpu_memory_utilization: float = cli_option(EngineConfig, "gpu_memory_utilization"),
    kv_cache_dtype: str = cli_option(EngineConfig, "kv_cache_dtype"),
    max_num_seqs: int = cli_option(EngineConfig, "max_num_seqs"),
    max_num_batched_tokens: int = cli_option(EngineConfig, "max_num_batched_tokens"),
    max_model_len: int | None = cli_option(EngineConfig, "max_model_len"),
    policy: str = cli_option(EngineConfig, "policy"),
    batch_controller: str = cli_option(EngineConfig, "batch_controller"),
    mixed_steps: bool = cli_option(EngineConfig, "mixed_steps"),
    batch_wait_steps: int = cli_option(EngineConfig, "batch_wait_steps"),
    batch_wait_max_tokens_ratio: float = cli_option(EngineConfig, "batch_wait_max_tokens_ratio"),
    batch_target_tpot: float = cli_option(
        EngineConfig, "batch_target_tpot_s", flag="--batch-target-tpot"
    ),
    enable_prefix_caching: bool = cli_option(EngineConfig, "enable_prefix_caching"),
    num_cpu_kv_blocks: int = cli_option(EngineConfig, "num_cpu_kv_blocks"),
    tenant_kv_quota: list[str] = typer.Option(
        [],
        "--tenant-kv-quota",
        help="TENANT=BLOCKS (repeatable); with "
        "quotas, a tenant without its own gets default=BLOCKS, which is "
        "then required",
    ),
    api_key: list[str] = cli_option(
        ServerConfig, "api_keys", flag="--api-key", envvar="SURGEPLAN_API_KEY", show_envvar=False
    ),
    tenant_keys: Path | None = cli_option(ServerConfig, "tenant_keys", flag="--tenant-keys"),
    max_waiting_requests: int | None = cli_option(ServerConfig, "max_waiting_requests"),
    request_timeout: float | None = cli_option(
        ServerConfig, "request_timeout_s", flag="--request-timeout"
    ),
    drain_timeout: float = cli_option(ServerConfig, "drain_timeout_s", flag="--drain-timeout"),
    rate_limit_burst: float = cli_option(
        ServerConfig, "rate_limit_burst_s", flag="--rate-limit-burst"
    ),
    served_model_name: list[str] = cli_option(
        ServerConfig, "served_model_names", flag="--served-model-name"
    ),
    max_request_body_bytes: str = _size_option("max_request_body_bytes"),
    max_header_bytes: str = _size_option("max_header_bytes"),
    client_body_bytes_per_s: str = _size_option("client_body_bytes_per_s"),
    retry_after: int = cli_option(ServerConfig, "retry_after_s", flag="--retry-after"),
    record_steps: int = cli_option(ServerConfig, "record_steps"),
    max_stop_sequences: int = cli_option(ServerConfig, "max_stop_sequences"),
    max_stop_sequence_chars: int = cli_option(ServerConfig, "max_stop_sequence_chars"),
    max_stop_token_ids: int = cli_option(ServerConfig, "max_stop_token_ids"),
    max_open_tenants: int = cli_option(ServerConfig, "max_open_tenants"),
    header_timeout: float = cli_option(ServerConfig, "header_timeout_s", flag="--header-timeout"),
    body_timeout: float = cli_option(ServerConfig, "body_timeout_s", flag="--body-timeout"),
    max_connections: int = cli_option(ServerConfig, "max_connections"),
    open_keys_claim_tenants: bool = cli_option(ServerConfig, "open_keys_claim_tenants"),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8000, "--port"),
    uvicorn_log_level: str = typer.Option("info", "--uvicorn-log-level"),
) -> None:
    """Serve a model over the OpenAI API (/v1/completions, /v1/chat/completions, /v1/models; /health and
    /metrics need no key). SIGTERM or Ctrl-C drains: no new requests (503), in-flight ones get
    --drain-timeout seconds to finish, the rest are aborted, then the server exits with status 0."""
    from engine.openai.api_server import build_app
    from engine.openai.drain import serve_forever

    try:
        config = EngineConfig(
            model=model,
            load_format=load_format,
            dtype=dtype,
            device=device,
            seed=seed,
            enforce_eager=enforce_eager,
            block_size=block_size,
            num_kv_blocks=num_kv_blocks,
            kv_cache_memory_bytes=parse_bytes(kv_cache_memory) if kv_cache_memory else None,
            gpu_memory_utilization=gpu_memory_utilization,
            kv_cache_dtype=kv_cache_dtype,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            max_model_len=max_model_len,
            policy=policy,
            batch_controller=batch_controller,
            mixed_steps=mixed_steps,
            batch_wait_steps=batch_wait_steps,
            batch_wait_max_tokens_ratio=batch_wait_max_tokens_ratio,
            batch_target_tpot_s=batch_target_tpot,
            enable_prefix_caching=enable_prefix_caching,
            tenant_block_quota=parse_quotas(tenant_kv_quota),
            num_cpu_kv_blocks=num_cpu_kv_blocks,
        )
        server_config = ServerConfig(
            served_model_names=served_model_name,
            api_keys=api_key,
            tenant_keys=tenant_keys,
            max_waiting_requests=max_waiting_requests,
            request_timeout_s=request_timeout,
            max_request_body_bytes=None
            if max_request_body_bytes == "auto"
            else parse_bytes(max_request_body_bytes),
            max_header_bytes=parse_bytes(max_header_bytes),
            client_body_bytes_per_s=parse_bytes(client_body_bytes_per_s),
            retry_after_s=retry_after,
            rate_limit_burst_s=rate_limit_burst,
            drain_timeout_s=drain_timeout,
            record_steps=record_steps,
            max_stop_sequences=max_stop_sequences,
            max_stop_sequence_chars=max_stop_sequence_chars,
            max_stop_token_ids=max_stop_token_ids,
            max_open_tenants=max_open_tenants,
            header_timeout_s=header_timeout,
            body_timeout_s=body_timeout,
            max_connections=max_connections,
            open_keys_claim_tenants=open_keys_claim_tenants,
        )
        app = build_app(config, server_config)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError too
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    typer.echo(app.state.serving.engine.engine.kv_cache_line(), err=True)  # the startup line
    typer.echo(app.state.limits_line, err=True)
    serve_forever(app, host, port, uvicorn_log_level)


app = typer.Typer(help="The OpenAI-compatible server.")
app.command("serve")(serve)

if __name__ == "__main__":
    app()
