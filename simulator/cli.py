"""`surgeplan simulate SCENARIO`: run a scenario through the SimPy cluster, print its summary (or one
JSON object), and write per-request and time-series files and a plotly timeline."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer


def _format(key: str, value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if key.endswith("_s") and not key.endswith("_per_s"):
            return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.2f} s"
        return f"{value:.6g}"
    return str(value)


def _engine_profile_option():
    from engine.config import cli_option
    from simulator.scenario import Scenario

    return cli_option(Scenario, "engine_profile", flag="--engine-profile")


ENGINE_PROFILE_OPTION = _engine_profile_option()


def _staleness_option():
    from engine.config import cli_option
    from simulator.fleet_spec import RouterSpec

    return cli_option(RouterSpec, "staleness_s", default=None, flag="--router-staleness-s")


STALENESS_OPTION = _staleness_option()


def _weight_dtype_option():
    from engine.config import cli_option
    from simulator.scenario import ModelChoice

    return cli_option(ModelChoice, "weight_dtype", default=None, flag="--weight-dtype")


WEIGHT_DTYPE_OPTION = _weight_dtype_option()


def _max_concurrency_option():
    from engine.config import cli_option
    from simulator.scenario import TrafficSpec

    return cli_option(TrafficSpec, "max_concurrency", default=None, flag="--max-concurrency")


MAX_CONCURRENCY_OPTION = _max_concurrency_option()


def with_weight_dtype(scenario, weight_dtype: str | None):
    """The scenario with `model.weight_dtype` replaced (validated: a bad name is a ValueError), or
    itself for None."""
    if weight_dtype is None:
        return scenario
    model = type(scenario.model).model_validate(
        {**scenario.model.model_dump(), "weight_dtype": weight_dtype}
    )
    return scenario.model_copy(update={"model": model})


def simulate_command(
    scenario_file: Path = typer.Argument(
        ..., help="scenario YAML or JSON (see examples/scenarios/)"
    ),
    trace: Path | None = typer.Option(
        None, "--trace", help="replace the scenario's traffic by this trace file"
    ),
    out: Path | None = typer.Option(
        None, "--out", help="folder for requests.csv, timeseries.csv/.json, timeline.html"
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help='print one JSON object: {"summary": ..., "facts": ..., '
        '"scenario": ..., "run": {"cpu_s": ..., "wall_s": ...}}',
    ),
    engine_profile: str | None = ENGINE_PROFILE_OPTION,
    staleness_s: float | None = STALENESS_OPTION,
    weight_dtype: str | None = WEIGHT_DTYPE_OPTION,
    max_concurrency: int | None = MAX_CONCURRENCY_OPTION,
    workers: int = typer.Option(
        1,
        "--workers",
        min=1,
        help="shards of replicas advancing in parallel between the router's scrapes (worker "
        "processes, or Ray actors with --backend ray); the answer does not depend on it",
    ),
    backend: str = typer.Option("local", "--backend", help="where the shards run: local | ray"),
    ray_address: str | None = typer.Option(
        None, "--ray-address", help="a Ray cluster (default: a local instance)"
    ),
) -> None:
    """Simulate a cluster serving the scenario's traffic; summary, files and timeline."""
    from simulator.cluster.shards import ShardSpec
    from simulator.scenario import Scenario
    from simulator.simulation import simulate
    from simulator.timeline import write_timeline

    try:
        scenario = Scenario.load(scenario_file)
        if trace is not None:
            scenario = scenario.model_copy(
                update={"traffic": scenario.traffic.model_copy(update={"trace": str(trace)})}
            )
        if engine_profile is not None:
            scenario = scenario.model_copy(update={"engine_profile": engine_profile})
        scenario = with_weight_dtype(scenario, weight_dtype)
        if max_concurrency is not None:
            traffic = scenario.traffic.model_copy(update={"max_concurrency": max_concurrency})
            scenario = scenario.model_copy(update={"traffic": traffic})
        if staleness_s is not None:
            router = scenario.cluster.router.model_copy(update={"staleness_s": staleness_s})
            cluster = scenario.cluster.model_copy(update={"router": router})
            scenario = scenario.model_copy(update={"cluster": cluster})
        progress = _progress_bar() if sys.stderr.isatty() and not as_json else None
        shards = ShardSpec(workers, backend, ray_address)
        result = simulate(scenario, progress=progress, shards=shards)
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=2) from None
    if out is not None:
        result.write(out)
        write_timeline(result, out / "timeline.html")
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "summary": result.summary.as_dict(),
                    "facts": result.facts,
                    "scenario": scenario.model_dump(mode="json"),
                    "run": result.run,
                }
            )
        )
        return
    calibration = result.facts["calibration"]
    typer.echo(
        f"{scenario.name}: {result.facts['model']} on {result.facts['gpu']} x{result.facts['tensor_parallel']}, "
        + _fused_note(result.facts.get("fused_all_reduce_mb"))
        + f"{result.facts['kv_blocks_per_replica']} KV blocks per replica; calibration {calibration['name']} "
        f"({calibration['label']}, fit error {_format('', calibration['fit_error'])}); engine profile "
        f"{calibration['engine_profile']} (held-out error {_format('', calibration['held_out_error'])}"
        f"{', ' + calibration['held_out_rows'] if calibration.get('held_out_error') else ''})"
    )
    summary = result.summary.as_dict()
    width = max(len(key) for key in summary)
    for key, value in summary.items():
        typer.echo(f"  {key:<{width}}  {_format(key, value)}")
    if out is not None:
        typer.echo(f"wrote {out}/requests.csv, timeseries.csv, timeseries.json, timeline.html")


def _fused_note(limit_mb: float | None) -> str:
    """The summary's word on a fused all-reduce (`hardware.fused_all_reduce_mb`), where one is set."""
    if limit_mb is None:
        return ""
    return f"all-reduces up to {limit_mb:g} MiB as TensorRT-LLM's fused kernel, "


def _progress_bar():
    from tqdm import tqdm

    bar = tqdm(total=100, unit="%", leave=False)

    def update(fraction: float) -> None:
        bar.n = round(fraction * 100)
        bar.refresh()

    return update
