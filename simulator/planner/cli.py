"""`surgeplan plan SCENARIO`: the cheapest fleet that holds the SLO, as a table or one JSON object, with
the ledger (CSV/JSON), the Pareto chart (HTML) and the recommended and one-fewer scenarios written
under `--out`; and `surgeplan report claims`, the source article's claims measured.
User errors (an SLO no fleet in range meets, a model that fits no GPU, a spike beyond the largest
fleet, a bad field) print `error: ...` and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from simulator.cli import ENGINE_PROFILE_OPTION, WEIGHT_DTYPE_OPTION, with_weight_dtype
from simulator.planner.report import KvCacheRow, PlanReport

report_app = typer.Typer(
    help="Reports built on the simulator and the planner.", no_args_is_help=True
)


def plan_command(
    scenario_file: Path = typer.Argument(
        ...,
        help="scenario YAML or JSON, optionally with a `plan:` section "
        "(see examples/scenarios/plan-*.yaml)",
    ),
    gpu: list[str] | None = typer.Option(
        None,
        "--gpu",
        help="candidate GPU, GPU:TP to fix its tensor-parallel "
        "degree; repeat for several (replaces plan.candidates)",
    ),
    max_replicas: int | None = typer.Option(
        None, "--max-replicas", min=1, help="largest fleet searched"
    ),
    kv_cache_dtype: list[str] | None = typer.Option(
        None,
        "--kv-cache-dtype",
        help="also size the fleet with "
        "this KV cache dtype (auto, fp8, fp8_e5m2, int8); repeat "
        "to compare (replaces plan.kv_cache_dtypes): does FP8 KV help?",
    ),
    as_json: bool = typer.Option(
        False, "--json", help="print one JSON object (recommendation, scenarios, ...)"
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="folder for plan.json, ledger.csv/.json, pareto.html "
        "and the recommended / one-fewer scenarios",
    ),
    workers: int | None = typer.Option(
        None, "--workers", min=1, help="simulations in parallel (default: CPUs; 1: in this process)"
    ),
    backend: str = typer.Option("local", "--backend", help="local (worker processes) or ray"),
    ray_address: str | None = typer.Option(
        None, "--ray-address", help="run on this Ray cluster (implies --backend ray)"
    ),
    cache_dir: Path | None = typer.Option(
        None,
        "--cache-dir",
        help="keep simulation outcomes here, by scenario hash, for the next plan",
    ),
    engine_profile: str | None = ENGINE_PROFILE_OPTION,
    weight_dtype: str | None = WEIGHT_DTYPE_OPTION,
) -> None:
    """The fewest GPUs, per GPU type and overall, with batch settings and cost, that hold the SLO."""
    from simulator.planner.recommend import plan
    from simulator.planner.spec import Candidate, load_plan

    try:
        scenario, settings = load_plan(scenario_file)
        if engine_profile is not None:
            scenario = scenario.model_copy(update={"engine_profile": engine_profile})
        scenario = with_weight_dtype(scenario, weight_dtype)
        updates = {}
        if gpu:
            updates["candidates"] = [_candidate(text, Candidate) for text in gpu]
        if max_replicas is not None:
            updates["max_replicas"] = max_replicas
        if kv_cache_dtype:
            updates["kv_cache_dtypes"] = kv_cache_dtype
        if updates:
            settings = settings.model_validate(settings.model_dump() | updates)
        result = plan(
            scenario,
            settings,
            backend=backend,
            workers=workers,
            ray_address=ray_address,
            cache_dir=cache_dir,
            progress=None if not as_json else False,
        )
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=2) from None
    written = result.write(out) if out is not None else []
    if as_json:
        typer.echo(json.dumps(result.report.to_json()))
        return
    for line in format_plan(scenario.name, result.report):
        typer.echo(line)
    if written:
        typer.echo(f"wrote {', '.join(path.name for path in written)} in {out}")


def _candidate(text: str, candidate_type):
    name, _, tp = text.partition(":")
    if tp and not tp.isdigit():
        raise ValueError(
            f"--gpu {text!r}: expected GPU or GPU:TP with TP a whole number (e.g. H100-80GB:2)"
        )
    return candidate_type(gpu=name, tensor_parallel=int(tp) if tp else None)


def _money(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"${value:,.{digits}f}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value * 1e3:.0f} ms" if value < 1 else f"{value:.2f} s"


def format_plan(name: str, report: PlanReport) -> list[str]:
    """The plan as terminal lines: traffic and SLO, one row per GPU type, then the comparisons."""
    traffic, slo, rec = report.traffic, report.slo, report.recommendation
    lines = [
        f"{name}: {traffic.requests:,} requests over {traffic.duration_s:.0f} s (mean "
        f"{traffic.mean_rate_per_s:.1f}/s, peak {traffic.peak_rate_per_s:.1f}/s); SLO P99 TTFT ≤ "
        f"{slo.ttft_p99_s:g} s, P99 TPOT ≤ {slo.tpot_p99_s:g} s, abandoned ≤ {slo.max_abandon_rate:.1%}",
        f"{'GPU':<12}{'TP':>3}{'repl':>6}{'GPUs':>6}{'seqs':>6}{'tokens':>8}{'$/hour':>10}{'$/request':>11}"
        f"{'$/1M out':>10}{'P99 TTFT':>10}{'P99 TPOT':>10}  {'binding':<10}{'headroom':>9}  calibration",
    ]
    for row in report.per_gpu_type:
        if row.status != "meets":
            lines.append(f"{row.gpu:<12}{row.tensor_parallel:>3}  {row.status}: {row.reason}")
            continue
        calibration = row.calibration or {}
        error = calibration.get("fit_error")
        lines.append(
            f"{row.gpu:<12}{row.tensor_parallel:>3}{row.replicas:>6}{row.gpus:>6}{row.max_num_seqs:>6}"
            f"{row.max_num_batched_tokens:>8}{_money(row.cost_per_hour_usd):>10}"
            f"{_money(row.cost_per_request_usd, 6):>11}{_money(row.cost_per_million_output_tokens_usd):>10}"
            f"{_seconds(row.ttft_p99_s):>10}{_seconds(row.tpot_p99_s):>10}  {row.binding_constraint:<10}"
            f"{row.headroom:>9.0%}  {calibration.get('label', '?')}"
            + (f" ±{error:.1%}" if error else " (no measured error)")
        )
    lines.append(f"recommendation: {rec.sentence}")
    lines.append(
        f"  binding constraint: {rec.binding_constraint} (one replica less "
        f"{'misses' if rec.one_fewer_misses else 'was not checked or meets'}); headroom "
        f"{rec.headroom:.0%} on {rec.headroom_term}"
    )
    if rec.checked_by:
        lines.append(
            f"  simulated on: {rec.checked_by}"
            + (f"; one replica less on: {rec.binding_checked_by}" if rec.binding_checked_by else "")
        )
    if report.uncertainty:
        lines.append(f"  error bars: {report.uncertainty.text} ({report.uncertainty.source})")
    static = report.static_baseline
    if static:
        lines.append(
            f"  traditional server (static batching): {static.replicas or 'more than ' + str(static.searched_up_to)}"
            f" replicas, {_money(static.cost_per_hour_usd)}/hour, {_money(static.cost_per_request_usd, 6)}/request"
        )
    scaled = report.autoscaled
    if scaled:
        if scaled.meets:
            lines.append(
                f"  autoscaled: warm pool {scaled.warm_pool} (peak {scaled.replicas_peak}, cold start "
                f"{scaled.cold_start_s:.0f} s) costs {_money(scaled.cost_usd)} vs {_money(scaled.fixed_cost_usd)} "
                f"fixed over the run: saves {_money(scaled.saved_usd)} ({scaled.saved_share:.0%}), "
                f"{_money(scaled.cost_per_request_usd, 6)}/request"
            )
        else:
            lines.append(
                f"  autoscaled: no warm pool up to {rec.replicas} holds the SLO ({', '.join(scaled.reasons)})"
            )
    dynamic = report.dynamic_batch
    if dynamic:
        fixed = dynamic.best_fixed
        lines.append(
            f"  dynamic batch (SLO-aware, TPOT target {_seconds(dynamic.batch_target_tpot_s)}): "
            f"{dynamic.replicas or 'more than ' + str(dynamic.searched_up_to)} replicas, "
            f"P99 TTFT {_seconds(dynamic.ttft_p99_s)}, P99 TPOT {_seconds(dynamic.tpot_p99_s)}, "
            f"{_money(dynamic.cost_per_request_usd, 6)}/request; best fixed: {fixed.replicas} replicas, "
            f"P99 TTFT {_seconds(fixed.ttft_p99_s)}, P99 TPOT {_seconds(fixed.tpot_p99_s)}, "
            f"{_money(fixed.cost_per_request_usd, 6)}/request"
        )
    lines += kv_cache_lines(report.kv_cache_dtypes)
    sims = report.simulations
    lines.append(
        f"{sims.evaluated} evaluations ({sims.simulated} simulated, {sims.from_cache} from cache) "
        f"on {sims.backend} in {report.elapsed_s:.1f} s"
    )
    return lines


def kv_cache_lines(rows: list[KvCacheRow]) -> list[str]:
    """ "Does FP8 KV help?": per KV cache dtype, what it buys (simulated) beside what it costs (measured)."""
    if not rows:
        return []
    lines = [
        "  KV cache dtype (same batch settings): what it buys, simulated (decode attention derived from KV "
        "bytes) | what it costs, measured (benchmarks/kv_cache_quality.py)",
        f"    {'kv dtype':<10}{'blocks':>8}{'repl':>6}{'GPUs':>6}{'$/request':>11}{'P99 TTFT':>10}"
        f"{'P99 TPOT':>10} | {'KL':>9}{'top-1':>8}{'ppl':>8}",
    ]
    for row in rows:
        quality = row.quality or {}
        kl, top1, ppl = (
            quality.get("kl_divergence"),
            quality.get("top1_agreement"),
            quality.get("perplexity"),
        )
        lines.append(
            f"    {row.kv_cache_dtype:<10}{row.kv_blocks_per_replica or 0:>8}"
            f"{row.replicas or '>' + str(row.searched_up_to):>6}{row.gpus or '-':>6}"
            f"{_money(row.cost_per_request_usd, 6):>11}{_seconds(row.ttft_p99_s):>10}"
            f"{_seconds(row.tpot_p99_s):>10} | "
            + ("not measured" if not quality else f"{kl:>9.2e}{top1:>8.1%}{ppl:>8.3f}")
        )
    return lines


@report_app.command("claims")
def claims_command(
    out: Path = typer.Option(
        Path("out/claims"), "--out", help="folder for claims.html and claims.json"
    ),
    repeats: int = typer.Option(
        5, "--repeats", min=1, max=10, help="seeds per ratio (for its 95% interval)"
    ),
    requests: int = typer.Option(400, "--requests", min=20, help="requests per simulation"),
    workers: int | None = typer.Option(None, "--workers", min=1, help="simulations in parallel"),
    live_repeats: int = typer.Option(
        3,
        "--live-repeats",
        min=0,
        max=10,
        help="repeats of the live engine's "
        "confirmation (cpu-small on this CPU, a few minutes); 0 skips it",
    ),
    live_requests: int = typer.Option(48, "--live-requests", min=8, help="requests per live run"),
) -> None:
    """The source article's claims (KV use, latency, throughput, low load, spike, fleet, long context, tenant
    quotas), simulated, with chosen points confirmed on the live engine."""
    from simulator.planner.claims import run_claims
    from simulator.planner.claims_page import write_claims

    report = run_claims(
        repeats=repeats,
        requests=requests,
        workers=workers,
        live_repeats=live_repeats,
        live_requests=live_requests,
    )
    width = max(len(row["claim"]) for row in report["rows"])
    for row in report["rows"]:
        typer.echo(f"{row['claim']:<{width}}  {row['verdict']:<11} {row['ours']}")
        if row["article"]:
            typer.echo(f"{'':<{width}}  {'':<11} article: {row['article']}; {row['label']}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "claims.json").write_text(json.dumps(report, indent=1))
    typer.echo(f"wrote {write_claims(report, out / 'claims.html')} and {out / 'claims.json'}")
