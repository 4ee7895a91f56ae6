"""`surgeplan traces ...`: describe, synthesise, convert and fit request traces."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from traces.arrivals import (
    ArrivalSpec,
    ConstantArrivals,
    DiurnalArrivals,
    GammaArrivals,
    PoissonArrivals,
    SpikeArrivals,
    mean_rate_per_s,
)
from traces.lengths import fit_trace_lengths, parse_length
from traces.loaders import load_trace
from traces.plot import check_plot_path, write_rate_plot
from traces.request import TraceFormatError
from traces.stats import TraceStats, compute_stats
from traces.synthetic import SyntheticTraceSpec, synthesize
from traces.trace import Trace

app = typer.Typer(
    help="Request traces: real production formats, synthetic spikes, statistics.",
    no_args_is_help=True,
)
console = Console()
# Spinners go to stderr so `info --json` keeps stdout to the one JSON object.
progress = Console(stderr=True)

FormatOption = typer.Option(
    None,
    "--format",
    help="azure, burstgpt, mooncake, vidur, jsonl, csv (default: detect from the file)",
)
SkipOption = typer.Option(
    False, "--skip-bad-rows", help="skip malformed rows (counted) instead of failing"
)
ModelOption = typer.Option(None, "--model", help="BurstGPT: keep only this Model (e.g. ChatGPT)")
DropFailedOption = typer.Option(False, "--drop-failed", help="BurstGPT: drop failed requests")


@contextmanager
def _user_errors() -> Iterator[None]:
    """Bad input is the user's to fix: show the message, not a traceback."""
    try:
        yield
    except (TraceFormatError, ValueError, FileNotFoundError, RuntimeError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=1) from None


def _load(
    path: Path, format: str | None, skip_bad_rows: bool, model: str | None, drop_failed: bool
) -> Trace:
    with progress.status(f"reading {path}"):
        trace = load_trace(
            path, format=format, skip_bad_rows=skip_bad_rows, model=model, drop_failed=drop_failed
        )
    report = trace.load_report
    if report is not None and (report.rows_skipped or report.rows_filtered):
        typer.echo(report.summary(), err=True)
    return trace


def _stats_table(stats: TraceStats) -> Table:
    table = Table(title=f"{stats.name}", show_header=False)
    table.add_column("statistic", style="bold")
    table.add_column("value", justify="right")
    cv = "n/a" if stats.interarrival_cv is None else f"{stats.interarrival_cv:.3f}"
    rows = [
        ("requests", f"{stats.requests:,}"),
        ("duration", f"{stats.duration_s:,.1f} s"),
        ("mean rate", f"{stats.mean_rate_per_s:.3f} req/s"),
        (f"peak rate ({stats.window_s:g} s windows)", f"{stats.peak_rate_per_s:.3f} req/s"),
        ("peak / mean", f"{stats.peak_to_mean:.2f}"),
        ("empty windows", str(stats.empty_windows)),
        ("inter-arrival CV", cv),
        ("failed requests", str(stats.failed_requests)),
    ]
    for label, lengths in (("prompt", stats.prompt_tokens), ("output", stats.output_tokens)):
        rows.append(
            (
                f"{label} tokens mean / p50 / p90 / p99 / max",
                f"{lengths.mean:,.1f} / {lengths.p50:,.0f} / {lengths.p90:,.0f} / "
                f"{lengths.p99:,.0f} / {lengths.max:,}",
            )
        )
    if stats.prefix_block_repeat_share is not None:
        rows.append(
            (
                f"repeated prompt blocks ({stats.hash_block_size} tokens)",
                f"{stats.prefix_block_repeat_share:.1%}",
            )
        )
    rows.append(("tenants", ", ".join(f"{t}: {c:,}" for t, c in stats.tenants.items())))
    for label, value in rows:
        table.add_row(label, value)
    return table


@app.command()
def info(
    file: Path = typer.Argument(..., help="trace file"),
    format: str | None = FormatOption,
    skip_bad_rows: bool = SkipOption,
    model: str | None = ModelOption,
    drop_failed: bool = DropFailedOption,
    window_s: float = typer.Option(60.0, help="window for the rate statistics and plot (s)"),
    as_json: bool = typer.Option(False, "--json", help="print the statistics as one JSON object"),
    plot: Path | None = typer.Option(
        None, help="write a rate plot: .html (or .png if an image backend is installed)"
    ),
) -> None:
    """Summary statistics of a trace file."""
    with _user_errors():
        if plot is not None:
            check_plot_path(plot)  # before the work, so a missing PNG backend fails fast
        trace = _load(file, format, skip_bad_rows, model, drop_failed)
        stats = compute_stats(trace, window_s)
        if as_json:
            print(stats.model_dump_json())
        else:
            console.print(_stats_table(stats))
        if plot is not None:
            typer.echo(f"plot written to {write_rate_plot(trace, plot, window_s)}", err=True)


def _arrivals(
    kind: str, rate: float, cv: float, amplitude: float, period_s: float, spike: dict
) -> ArrivalSpec:
    builders = {
        "constant": lambda: ConstantArrivals(rate_per_s=rate),
        "poisson": lambda: PoissonArrivals(rate_per_s=rate),
        "gamma": lambda: GammaArrivals(rate_per_s=rate, cv=cv),
        "diurnal": lambda: DiurnalArrivals(
            mean_rate_per_s=rate, amplitude=amplitude, period_s=period_s
        ),
    }
    if kind not in builders:
        raise ValueError(f"--arrivals {kind!r}; expected one of {sorted(builders)}")
    base = builders[kind]()
    return base if spike["multiplier"] is None else SpikeArrivals(base=base, **spike)


@app.command()
def synth(
    out: Path = typer.Argument(..., help="output file: .jsonl (canonical) or .csv"),
    spec: Path | None = typer.Option(
        None, help="a SyntheticTraceSpec JSON file (other options are then ignored)"
    ),
    arrivals: str = typer.Option("poisson", help="constant, poisson, gamma or diurnal"),
    rate: float = typer.Option(10.0, help="baseline (mean) rate, requests/s"),
    cv: float = typer.Option(2.0, help="gamma: coefficient of variation of the gaps"),
    amplitude: float = typer.Option(0.5, help="diurnal: relative swing of the rate"),
    period_s: float = typer.Option(86_400.0, help="diurnal: period (s)"),
    duration_s: float = typer.Option(600.0, help="trace length (s)"),
    spike_multiplier: float | None = typer.Option(None, help="add a spike: rate x this"),
    spike_start_s: float = typer.Option(0.0),
    ramp_up_s: float = typer.Option(0.0),
    hold_s: float = typer.Option(60.0),
    ramp_down_s: float = typer.Option(0.0),
    prompt: str = typer.Option(
        "azure-conv-prompt",
        help="fixed:N, uniform:LOW:HIGH, "
        "lognormal:MEDIAN:SIGMA, a preset (azure-code-prompt, ...) or JSON",
    ),
    output: str = typer.Option("azure-conv-output", help="as --prompt, e.g. azure-conv-output"),
    seed: int = typer.Option(0),
    name: str = typer.Option("synthetic"),
    max_requests: int | None = typer.Option(None, help="keep only the first N arrivals"),
) -> None:
    """Generate a synthetic trace and write it in the canonical format."""
    with _user_errors():
        if spec is not None:
            chosen = SyntheticTraceSpec.model_validate_json(spec.read_text())
        else:
            spike = {
                "multiplier": spike_multiplier,
                "start_s": spike_start_s,
                "ramp_up_s": ramp_up_s,
                "hold_s": hold_s,
                "ramp_down_s": ramp_down_s,
            }
            chosen = SyntheticTraceSpec(
                arrivals=_arrivals(arrivals, rate, cv, amplitude, period_s, spike),
                prompt=parse_length(prompt),
                output=parse_length(output),
                duration_s=duration_s,
                seed=seed,
                name=name,
                max_requests=max_requests,
            )
        with progress.status(f"generating and writing {out}"):
            trace = synthesize(chosen)
            trace.save(out)
        intended = mean_rate_per_s(chosen.arrivals, chosen.duration_s)
        console.print(
            f"wrote {len(trace):,} requests over {trace.duration_s:,.1f} s to {out} "
            f"(intended mean rate {intended:.3f}/s, drawn {len(trace) / chosen.duration_s:.3f}/s)",
            highlight=False,
        )


@app.command()
def convert(
    source: Path = typer.Argument(..., help="trace in any supported format"),
    target: Path = typer.Argument(..., help="canonical output: .jsonl or .csv"),
    format: str | None = FormatOption,
    skip_bad_rows: bool = SkipOption,
    model: str | None = ModelOption,
    drop_failed: bool = DropFailedOption,
) -> None:
    """Convert a trace to surgeplan's canonical JSONL or CSV."""
    with _user_errors():
        trace = _load(source, format, skip_bad_rows, model, drop_failed)
        with progress.status(f"writing {target}"):
            trace.save(target)
        console.print(f"wrote {len(trace):,} requests to {target}", highlight=False)


@app.command()
def fit(
    file: Path = typer.Argument(..., help="trace file"), format: str | None = FormatOption
) -> None:
    """Fit length distributions (empirical quantiles and lognormal) to a trace; prints JSON."""
    with _user_errors():
        fits = fit_trace_lengths(load_trace(file, format=format))
        print(
            json.dumps(
                {
                    column: {
                        "empirical": value["empirical"].model_dump(),
                        "lognormal_median_sigma": value["lognormal_median_sigma"],
                    }
                    for column, value in fits.items()
                },
                indent=2,
            )
        )
