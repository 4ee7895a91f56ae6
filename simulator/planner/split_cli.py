"""`surgeplan plan-split SCENARIO`: co-located vs disaggregated (xPyD, each pool's TP), with and without a
host KV tier; the cheapest fixed fleet that holds the SLO, as a table or one JSON object."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def plan_split_command(
    scenario_file: Path = typer.Argument(
        ...,
        help="scenario YAML or JSON (its cluster.disaggregation, if any, "
        "gives the link and each pool's batch settings)",
    ),
    tensor_parallel: list[int] | None = typer.Option(
        None,
        "--tp",
        min=1,
        max=64,
        help="tensor-parallel degree to try (for replicas and each pool); repeat",
    ),
    max_replicas: int = typer.Option(
        8, "--max-replicas", min=1, max=256, help="most replicas (per pool)"
    ),
    cpu_kv_gb: list[float] | None = typer.Option(
        None, "--cpu-kv-gb", min=0, help="host KV tier per replica to try, GB (0: none); repeat"
    ),
    link: str = typer.Option(
        "infiniband-ndr", "--link", help="KV link when the scenario names none"
    ),
    gpu: list[str] | None = typer.Option(
        None, "--gpu", help="GPU type for co-located fleets (default: the scenario's); repeat"
    ),
    prefill_gpu: list[str] | None = typer.Option(
        None,
        "--prefill-gpu",
        help="GPU type for the prefill pool (default: the scenario's); repeat: each is tried "
        "with each --decode-gpu, fleets ranked by their catalog price per hour",
    ),
    decode_gpu: list[str] | None = typer.Option(
        None, "--decode-gpu", help="GPU type for the decode pool (default: the scenario's); repeat"
    ),
    mixed_pool: str = typer.Option(
        "scenario",
        "--mixed-pool",
        help="Splitwise's mixed pool on the splits: off, on, both (each split tried without and "
        "with it), or scenario (as its cluster.disaggregation.mixed_pool says)",
    ),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """The cheapest fleet that holds the SLO: co-located or prefill/decode split, with its ratio."""
    from simulator.planner.split import plan_split
    from simulator.scenario import Scenario

    try:
        scenario = Scenario.load(scenario_file)
        result = plan_split(
            scenario,
            tensor_parallel or None,
            max_replicas,
            cpu_kv_gb or None,
            link,
            progress=None if as_json else lambda line: typer.echo(f"  {line}", err=True),
            gpus=_catalog_names(gpu, "--gpu"),
            prefill_gpus=_catalog_names(prefill_gpu, "--prefill-gpu"),
            decode_gpus=_catalog_names(decode_gpu, "--decode-gpu"),
            mixed_pools=_mixed_pools(mixed_pool),
        )
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=2) from None
    data = {
        "answer": result.answer.row(),
        "recommendation": result.recommendation.row() if result.recommendation else None,
        "best": {key: outcome.row() if outcome else None for key, outcome in result.best.items()},
        "simulations": result.rows(),
    }
    if as_json:
        typer.echo(json.dumps(data))
        return
    typer.echo(f"{scenario.name}: the cheapest fixed fleet per layout that holds the SLO")
    width = max(map(len, result.best), default=0)
    for key, outcome in result.best.items():
        if outcome is None:
            typer.echo(f"  {key:<{width}} none in range")
        else:
            per_hour = f" (${outcome.usd_per_hour:.2f}/h)" if outcome.usd_per_hour else ""
            typer.echo(
                f"  {key:<{width}} {outcome.layout.label}: {outcome.gpus} GPUs{per_hour}, "
                f"${outcome.cost_usd:.2f}, "
                f"P99 TTFT {outcome.ttft_p99_s:.2f} s, P99 TPOT {outcome.tpot_p99_s:.3f} s"
            )
    typer.echo(result.answer.sentence())


def _catalog_names(names: list[str] | None, option: str) -> list[str] | None:
    """Catalog names for the GPU types given (aliases resolved); an unknown one names the option."""
    from simulator.hardware.catalog import get_hardware

    if not names:
        return None
    try:
        return [get_hardware(name).name for name in names]
    except ValueError as error:
        raise ValueError(f"{option}: {error}") from None


MIXED_POOL_CHOICES = {"scenario": None, "off": [False], "on": [True], "both": [False, True]}


def _mixed_pools(choice: str) -> list[bool] | None:
    """`--mixed-pool`'s value as the planner's list; an unknown value names the accepted ones."""
    if choice not in MIXED_POOL_CHOICES:
        raise ValueError(
            f"--mixed-pool is {choice!r}; expected one of {', '.join(MIXED_POOL_CHOICES)}"
        )
    return MIXED_POOL_CHOICES[choice]
