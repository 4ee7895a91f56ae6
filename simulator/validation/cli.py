"""`surgeplan validate`: run the live engine and the simulator on the same trace at several loads and
print, per metric, measured vs simulated, the relative error and the live engine's noise floor; with
`--published NAME|FILE|all`, replay public measurements of real serving stacks on real GPUs instead
(`simulator.validation.published_report`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from simulator.validation.error_sources import describe

SHOWN = (
    "throughput_rps",
    "ttft_mean_s",
    "ttft_p99_s",
    "tpot_mean_s",
    "tpot_p99_s",
    "e2e_mean_s",
    "e2e_p99_s",
    "queue_mean_s",
    "preemptions",
    "kv_utilization",
)


def _value(key: str, value) -> str:
    if value is None:
        return "n/a"
    if key.endswith("_s"):
        return f"{value * 1e3:.1f} ms"
    return f"{value:.3g}"


def format_result(result: dict) -> str:
    lines = [
        "measured: mean of the live repeats; error: simulated vs measured; at speed: each repeat simulated at "
        "the host speed measured in it (error sources, below); noise: live repeat vs live repeat",
        f"trace {result['trace']['name']}: {result['trace']['requests']} requests, prompts "
        f"{result['trace']['mean_prompt_tokens']:.0f} / outputs {result['trace']['mean_output_tokens']:.0f} tokens "
        f"on average; capacity {result['capacity_rps']:.2f} requests/s (offline run)",
    ]
    for level in result["levels"]:
        used = level["used_calibration"]
        lines.append(
            f"\nload {level['load']:.0%} ({level['rate_rps']:.2f} requests/s), calibration: {used} "
            f"({result['calibration'][used]['name']})"
        )
        lines.append(
            f"{'metric':<20}{'measured':>12}{'simulated':>12}{'error':>10}{'at speed':>10}{'noise':>9}"
            "  other calibration"
        )
        others = {name: entry for name, entry in level["by_calibration"].items() if name != used}
        at_speed = (level.get("at_run_speed") or {}).get("relative_error", {})
        for key in SHOWN:
            error = level["relative_error"].get(key)
            speed_error = at_speed.get(key)
            floor = (level["noise_floor"] or {}).get(key)
            other = "; ".join(
                f"{name} {entry['relative_error'][key]:+.1%}"
                for name, entry in others.items()
                if entry["relative_error"].get(key) is not None
            )
            absolute = level["absolute_error_ms"].get(key)
            note = f" ({absolute:+.1f} ms)" if absolute is not None else ""
            lines.append(
                f"{key:<20}{_value(key, level['measured'][key]):>12}{_value(key, level['simulated'][key]):>12}"
                f"{'n/a' if error is None else f'{error:+.1%}':>10}"
                f"{'n/a' if speed_error is None else f'{speed_error:+.1%}':>10}"
                f"{'n/a' if floor is None else f'{floor:.1%}':>9}"
                f"  {other}{note}{'  below noise' if level['verdict'][key] == 'below noise' else ''}"
            )
        lines.append(describe(level.get("error_sources")))
    return "\n".join(lines)


def validate_command(
    trace: Path | None = typer.Option(
        None, "--trace", help="any trace format `traces` reads (required unless --published)"
    ),
    published: str | None = typer.Option(
        None,
        "--published",
        help="replay a published measurement set "
        "(a name from simulator/validation/published/, a JSON file, or all) "
        "instead of running the live engine",
    ),
    engine_profile: str | None = typer.Option(
        None,
        "--engine-profile",
        help="with --published: replay with this profile instead of the set's own",
    ),
    refit: bool = typer.Option(
        False,
        "--refit",
        help="with --published: refit each set's profile on its fit "
        "rows first and write it (simulator/calibration/profiles/); held-out-only sets are "
        "never fitted on, and a closed-loop set's fit rows also fit its bunched_turns (written to "
        "the set, before and after the profile); their errors are recorded afterwards",
    ),
    as_json: bool = typer.Option(False, "--json", help="with --published: print one JSON object"),
    workers: int | None = typer.Option(
        None,
        "--workers",
        min=1,
        help="with --published: runs replayed in parallel (default: CPUs, at most 8; 1: in this "
        "process); the figures are the same either way",
    ),
    model: str = typer.Option("cpu-small", "--model", help="model preset (dummy weights)"),
    num_requests: int = typer.Option(64, "--num-requests", min=2),
    max_prompt_tokens: int = typer.Option(256, "--max-prompt-tokens", min=1),
    max_output_tokens: int = typer.Option(64, "--max-output-tokens", min=1),
    length_scale: float | None = typer.Option(
        None, "--length-scale", help="multiply lengths (then clip)"
    ),
    load_levels: str = typer.Option(
        "0.5,0.8,1.1", "--load-levels", help="shares of the measured capacity"
    ),
    calibration: Path | None = typer.Option(
        None, "--calibration", help="a calibration made elsewhere"
    ),
    profile: str = typer.Option(
        "quick",
        "--profile",
        help="quick: profile the CI grid now; full: a grid sized to the engine's limits; none: workload fit only",
    ),
    repeats: int = typer.Option(
        2, "--repeats", min=1, help="live runs per level (2 gives the noise floor)"
    ),
    num_kv_blocks: int = typer.Option(512, "--num-kv-blocks", min=1),
    seed: int = typer.Option(0, "--seed"),
    via: str = typer.Option(
        "engine", "--via", help="engine: in-process LLMEngine; http: surgeplan serve + replay"
    ),
    save_steps: Path | None = typer.Option(
        None,
        "--save-steps",
        help="write the step log the workload calibration is fitted on (capacity run and batch ladder) here",
    ),
    own_profile: str = typer.Option(
        "shipped",
        "--own-profile",
        help="our engine's profile (the measured "
        "live-vs-calibrated gap) on top of the calibration: shipped "
        "(profiles/surgeplan.json), probe (measure it now on a 65%-load run over "
        "the next requests of the trace, before the validated runs) or none",
    ),
    out: Path | None = typer.Option(None, "--out", help="results JSON"),
    plot: Path | None = typer.Option(None, "--plot", help="plotly HTML of errors vs noise floor"),
) -> None:
    """Live engine vs simulator on the same trace: the simulator's error, with the engine's noise floor;
    or (--published) simulator vs public measurements, fit and held-out rows apart."""
    from simulator.validation.replay_workers import replay_workers
    from simulator.validation.validate import validate

    if published is not None:
        with replay_workers(workers):
            _published(published, engine_profile, refit, as_json, out)
        return
    if trace is None:
        typer.echo(
            "error: --trace is required; expected a trace file, or --published NAME", err=True
        )
        raise typer.Exit(code=2)

    try:
        levels = tuple(float(x) for x in load_levels.split(","))
    except ValueError:
        typer.echo(
            f"error: --load-levels {load_levels!r}; expected numbers like 0.5,0.8,1.1", err=True
        )
        raise typer.Exit(code=2) from None
    try:
        result = validate(
            model,
            trace,
            num_requests,
            max_prompt_tokens,
            max_output_tokens,
            length_scale,
            levels,
            calibration,
            profile,
            repeats,
            seed,
            num_kv_blocks=num_kv_blocks,
            save_steps=save_steps,
            via=via,
            own=own_profile,
            progress=(lambda message: typer.echo(message, err=True))
            if sys.stderr.isatty()
            else None,
        )
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=2) from None
    typer.echo(format_result(result))
    if result.get("own_profile") and result["own_profile"].get("gap"):
        gap = result["own_profile"]["gap"]
        typer.echo(
            f"our engine's measured gap ({result['own_profile']['mode']}): between steps "
            f"{gap['between_steps_s'] * 1e3:.2f} ms/step, wake-up {gap['wake_s'] * 1e3:.2f} ms "
            f"({gap['wake_ups']} wake-ups), in-step slowdown {gap['kernel_scale']:.3f}x"
        )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1))
    if plot is not None:
        write_plot(result, plot)


def _published(
    name: str, engine_profile: str | None, refit: bool, as_json: bool, out: Path | None
) -> None:
    from simulator.validation.closed_loop_fit import fit_bunched_turns
    from simulator.validation.profile_fit import fit_profile, record_errors
    from simulator.validation.published_report import (
        format_summary,
        format_table,
        pooled_summary,
        validate_published,
    )
    from simulator.validation.published_sets import fits, load_published, published_names

    names = published_names() if name == "all" else [name]
    results = []
    try:
        if refit:  # fit on the sets with fit runs first, then record the held-out-only checks
            sets = {each: load_published(each) for each in names}
            # a closed loop's bunched turns are fitted with the profile as it is, then again with
            # the profile fitted with them; a set fitting only them is recorded like a check
            looped = [each for each in names if "bunched_turns" in fits(sets[each])]
            independent = [
                each
                for each in names
                if sets[each].get("held_out_only") or "profile" not in fits(sets[each])
            ]
            for each in looped:
                fit_bunched_turns(each)
            fitted: set[str] = set()  # one fit per profile, on all its sets' fit runs together
            for each in names:
                profile = sets[each]["engine_profile"]
                if each not in independent and profile not in fitted:
                    fit_profile(each)
                    fitted.add(profile)
            for each in looped:
                if each not in independent:
                    fit_bunched_turns(each)
            for each in independent + [each for each in looped if each not in independent]:
                record_errors(each)
        for each in names:
            results.append(validate_published(each, engine_profile))
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=2) from None
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1))
    if as_json:
        typer.echo(json.dumps(results))
        return
    for result in results:
        source = result["source"]
        typer.echo(
            f"{source['name']}: {source['engine_version']} (profile {source['engine_profile']}), "
            f"{source['url']}, retrieved {source['retrieved']}"
        )
        if source.get("closed_loop"):
            typer.echo(source["closed_loop"])
        typer.echo(format_table(result) + "\n")
    summary = pooled_summary(results)
    if summary:
        typer.echo(format_summary(summary))


def write_plot(result: dict, path: Path) -> Path:
    import plotly.graph_objects as go

    figure = go.Figure()
    for level in result["levels"]:
        keys = [key for key in SHOWN if level["relative_error"].get(key) is not None]
        figure.add_bar(
            name=f"error at {level['load']:.0%}",
            x=keys,
            y=[100 * level["relative_error"][k] for k in keys],
        )
        if level["noise_floor"]:
            figure.add_scatter(
                name=f"noise floor at {level['load']:.0%}",
                x=keys,
                mode="markers",
                y=[100 * (level["noise_floor"].get(k) or 0) for k in keys],
            )
    figure.update_layout(
        title="simulated vs measured, relative error (%)", yaxis_title="%", barmode="group"
    )
    figure.write_html(path, include_plotlyjs=True)
    return path
