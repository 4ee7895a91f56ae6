"""`surgeplan replay --url URL --trace FILE`: a trace against a live OpenAI-compatible server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from traces.replay import ReplayConfig, ReplayResult, replay
from traces.replay_summary import format_summary, parse_goodput, summarise, write_csv, write_json


def run_replay(trace, config: ReplayConfig, progress: bool = True) -> ReplayResult:
    """The replay with a progress bar (completed requests, failures in the postfix)."""
    from tqdm import tqdm

    from traces.replay import replayable

    total = len(replayable(trace, config.limit)[0])
    with tqdm(total=total, desc="replay", unit="req", disable=not progress) as bar:
        failures = 0

        def done(record) -> None:
            nonlocal failures
            failures += not record.ok
            bar.update(1)
            if failures:
                bar.set_postfix(failed=failures)

        return asyncio.run(replay(trace, config, done))


def replay_command(
    url: str = typer.Option(..., "--url", help="the server's base URL, e.g. http://127.0.0.1:8000"),
    trace_path: Path = typer.Option(
        ...,
        "--trace",
        exists=True,
        dir_okay=False,
        help="a trace file (any format load_trace reads)",
    ),
    trace_format: str | None = typer.Option(
        None, "--format", help="trace format (default: detect)"
    ),
    model: str | None = typer.Option(
        None, "--model", help="model name (default: the server's first)"
    ),
    time_scale: float = typer.Option(
        1.0, "--time-scale", help="multiplies arrival times; 0 sends all at once"
    ),
    max_concurrency: int | None = typer.Option(
        None, "--max-concurrency", help="requests in flight at most"
    ),
    limit: int | None = typer.Option(None, "--limit", help="only the first N requests"),
    goodput: list[str] = typer.Option(
        [], "--goodput", help="SLOs in ms, e.g. --goodput ttft:500 --goodput tpot:50"
    ),
    vocab_size: int | None = typer.Option(
        None, "--vocab-size", help="token ids drawn below this (default: the server's)"
    ),
    min_token_id: int = typer.Option(
        3, "--min-token-id", help="token ids drawn from here up (skip special tokens)"
    ),
    seed: int = typer.Option(0, "--seed", help="seed of the prompt token ids"),
    request_timeout: float = typer.Option(
        3600.0, "--request-timeout", help="seconds before the client gives up"
    ),
    output_json: Path | None = typer.Option(
        None, "--output-json", help="summary + per-request records"
    ),
    output_csv: Path | None = typer.Option(None, "--output-csv", help="one row per request"),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
) -> None:
    """Replay a trace against an OpenAI-compatible server and print a summary like `vllm bench serve`.

    Each request is sent at its arrival time as a token-id prompt of the trace's length, with
    ignore_eos and max_tokens set to its output length; answers are streamed and timed per chunk."""
    import httpx

    from traces import load_trace

    try:
        slos = parse_goodput(goodput)
        config = ReplayConfig(
            url=url,
            model=model,
            time_scale=time_scale,
            max_concurrency=max_concurrency,
            limit=limit,
            vocab_size=vocab_size,
            min_token_id=min_token_id,
            seed=seed,
            request_timeout_s=request_timeout,
        )
        trace = load_trace(trace_path, format=trace_format)
        result = run_replay(trace, config, progress)
    except (
        ValueError,
        httpx.HTTPError,
    ) as exc:  # a bad option or trace file; a server not there or not OpenAI
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    summary = summarise(result, slos)
    typer.echo(format_summary(summary))
    if output_json is not None:
        typer.echo(f"wrote {write_json(output_json, summary, result)}")
    if output_csv is not None:
        typer.echo(f"wrote {write_csv(output_csv, result)}")
    errors = sorted({r.error for r in result.records if r.error})
    for error in errors[:5]:
        typer.echo(f"error seen: {error}", err=True)


app = typer.Typer(help="Replay a trace against a live server.")
app.command("replay")(replay_command)
