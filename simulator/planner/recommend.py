"""`plan(scenario, settings) -> PlanResult`: for this traffic, spike included, the cheapest fleet and
batch settings that hold the SLO, per GPU type and overall, with cost per hour, per request and per
1M output tokens, the binding constraint, headroom, error bars and the baselines it beats.

Each candidate GPU gets the tensor-parallel degree asked for, or the smallest of 1, 2, 4, 8 at which
the model's weights leave room for KV (the simulator's own memory math; `simulator.planner.candidates`).
All searches run through one `Runner` (cache, backend, ledger); the answer is the same on every
backend for the same seed.
Fleets of more than 256 replicas (the article's 10,000 requests/s needs ~1,500 A100s) are confirmed on
a representative sample of 256 of their replicas with those replicas' share of the traffic, as the
search module's docstring argues and measures; each answer says what checked it (`checked_by`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.planner import comparisons
from simulator.planner.assemble import assemble, explain_failure
from simulator.planner.backends import Runner, make_backend
from simulator.planner.cache import OutcomeCache
from simulator.planner.candidates import batch_grid, candidate_fleets
from simulator.planner.fleet import Answer, Batch, Fleet
from simulator.planner.ledger import Ledger
from simulator.planner.outcome import Outcome
from simulator.planner.report import GpuRow, PlanReport, Simulations, TrafficFacts
from simulator.planner.search import (
    Ahead,
    checked_by,
    confirm_answer,
    drive,
    fewest_replicas,
    simulated_replicas,
)
from simulator.planner.spec import PlanError, PlanSettings
from simulator.planner.uncertainty import error_of
from simulator.scenario import Scenario
from simulator.simulation import load_traffic
from simulator.slo import SLO


@dataclass
class PlanResult:
    report: PlanReport  # the answer; `report.to_json()` is `surgeplan plan --json`
    ledger: Ledger

    def write(self, out_dir: str | Path) -> list[Path]:
        """plan.json, ledger.csv/.json, pareto.html and the two scenarios as YAML in `out_dir`."""
        from simulator.planner.pareto import write_pareto

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = [out / "plan.json"]
        written[0].write_text(json.dumps(self.report.to_json(), indent=1))
        written += self.ledger.write(out)
        for name, scenario in (
            ("recommended_scenario", self.report.recommended_scenario),
            ("one_fewer_scenario", self.report.one_fewer_scenario),
        ):
            if scenario:
                written.append(Scenario.model_validate(scenario).save(out / f"{name}.yaml"))
        written.append(write_pareto(self.ledger.rows, self.report, out / "pareto.html"))
        return written


def plan(
    scenario: Scenario,
    settings: PlanSettings | None = None,
    backend: str = "local",
    workers: int | None = None,
    ray_address: str | None = None,
    cache_dir: str | Path | None = None,
    progress: bool | None = None,
    cache: OutcomeCache | None = None,
) -> PlanResult:
    started = time.perf_counter()
    settings = settings or PlanSettings()
    low, high = settings.replica_range(scenario)
    traffic = _traffic_facts(scenario)
    ledger = Ledger()
    fleets, unfit = candidate_fleets(scenario, settings, low, high, ledger)
    grid = batch_grid(settings)
    runner = Runner(
        make_backend(backend, workers, ray_address), cache or OutcomeCache(cache_dir), progress
    )
    try:
        confirm_all = settings.confirm == "all"
        answers = drive(
            runner,
            {
                name: fewest_replicas(
                    fleet,
                    grid,
                    settings.fast_pass,
                    confirm_all,
                    confirm_all,
                    # a single candidate's answer is the recommendation: its comparisons start early
                    likely_next=(
                        lambda answer, fleet=fleet: _first_probes(
                            fleet, answer, grid, settings, scenario
                        )
                    )
                    if len(fleets) == 1
                    else None,
                )
                for name, fleet in fleets.items()
            },
            ledger,
        )
        if not confirm_all:
            _confirm_cheapest(runner, ledger, fleets, answers)
        per_gpu = [_gpu_row(fleets[name], answers[name]) for name in fleets] + unfit
        found = [
            name
            for name in fleets
            if answers[name].replicas is not None and answers[name].confirmed
        ]
        if not found:
            explain_failure(scenario, fleets, answers, unfit, traffic, runner, ledger)
        best = min(
            found,
            key=lambda name: (
                _row(per_gpu, name).cost_per_hour_usd,
                _row(per_gpu, name).cost_per_request_usd or 0.0,
            ),
        )
        fleet, answer = fleets[best], answers[best]
        extras = _comparisons(fleet, answer, grid, settings, scenario)
        results = drive(runner, extras, ledger)
    finally:
        runner.close()
    report = assemble(
        scenario, settings, fleet, answer, _row(per_gpu, best), per_gpu, results, traffic
    )
    evaluated = sum(row["phase"] != "fit check" for row in ledger.rows)
    report.simulations = Simulations(
        evaluated=evaluated,
        simulated=runner.simulated,
        from_cache=evaluated - runner.simulated,
        backend=runner.backend.name,
    )
    report.elapsed_s = time.perf_counter() - started
    return PlanResult(report, ledger)


def _confirm_cheapest(
    runner, ledger: Ledger, fleets: dict[str, Fleet], answers: dict[str, Answer]
) -> None:
    """Confirm (full fleet, one fewer) the cheapest share-pass answer, then the next cheapest as long as a
    confirmation made the winner dearer than an unconfirmed estimate."""

    def estimate(name: str) -> float:
        answer = answers[name]
        price = answer.outcome.facts.get("price_usd_per_gpu_hour") or 0.0
        return answer.replicas * fleets[name].tensor_parallel * price

    while True:
        pending = [
            name
            for name, answer in answers.items()
            if answer.replicas is not None and not answer.confirmed
        ]
        confirmed = [
            name
            for name, answer in answers.items()
            if answer.replicas is not None and answer.confirmed
        ]
        if not pending or (
            confirmed and min(map(estimate, confirmed)) <= min(map(estimate, pending))
        ):
            return
        name = min(pending, key=estimate)
        answers[name] = drive(runner, {name: confirm_answer(fleets[name], answers[name])}, ledger)[
            name
        ]


def _traffic_facts(scenario: Scenario) -> TrafficFacts:
    try:
        trace = load_traffic(scenario)
    except ValueError as error:
        raise PlanError(str(error)) from None
    arrivals = np.asarray(trace.arrival_s)
    window_s = 10.0
    counts = np.bincount((arrivals // window_s).astype(int)) if len(arrivals) else np.zeros(1)
    return TrafficFacts(
        requests=len(trace),
        duration_s=float(trace.duration_s),
        mean_rate_per_s=len(trace) / max(float(trace.duration_s), 1e-9),
        peak_rate_per_s=float(counts.max()) / window_s,
        peak_window_s=window_s,
    )


def _row(rows: list[GpuRow], name: str) -> GpuRow:
    return next(row for row in rows if f"{row.gpu} TP{row.tensor_parallel}" == name)


def _gpu_row(fleet: Fleet, answer: Answer) -> GpuRow:
    outcome, summary = answer.outcome, answer.outcome.summary
    facts = outcome.facts
    row = dict(
        gpu=fleet.gpu,
        tensor_parallel=fleet.tensor_parallel,
        replicas=answer.replicas,
        gpus=answer.replicas * fleet.tensor_parallel if answer.replicas else None,
        max_num_seqs=answer.batch.max_num_seqs,
        max_num_batched_tokens=answer.batch.max_num_batched_tokens,
        kv_cache_dtype=answer.batch.kv_cache_dtype,
        calibration=facts.get("calibration"),
        kv_blocks_per_replica=facts.get("kv_blocks_per_replica"),
        price_usd_per_gpu_hour=facts.get("price_usd_per_gpu_hour"),
        batch_grid=answer.grid,
    )
    if answer.replicas is None:
        reason = outcome.binding or "slo"
        status = reason if outcome.status == "invalid" else "exceeds_max_fleet"
        return GpuRow(
            **row,
            status=status,
            reason=outcome.error
            or f"misses {' and '.join(outcome.reasons)} with {fleet.high} replicas (the most searched)",
        )
    ratios = outcome.ratios
    headroom_term = SLO.binding(ratios)
    below = answer.below
    return GpuRow(
        **row,
        status="meets",
        cost_per_hour_usd=row["gpus"] * row["price_usd_per_gpu_hour"],
        cost_per_request_usd=summary.cost_per_request_usd,
        cost_per_million_output_tokens_usd=summary.cost_per_million_output_tokens_usd,
        gpu_hours=_fleet_gpu_hours(outcome, answer.replicas),
        ttft_p99_s=summary.ttft_p99_s,
        tpot_p99_s=summary.tpot_p99_s,
        abandon_rate=summary.abandon_rate,
        checked_by=checked_by(outcome),
        binding_constraint=below.binding
        if below is not None
        else (
            f"none: {fleet.low} is the smallest fleet searched"
            if answer.replicas <= fleet.low
            else "throughput: the cost model's ceiling rules out fewer replicas"
        ),
        binding_checked_by=None if below is None else checked_by(below),
        headroom=1.0 - ratios[headroom_term],
        headroom_term=headroom_term,
        slo_ratios=ratios,
    )


def _fleet_gpu_hours(outcome: Outcome, replicas: int) -> float | None:
    """The whole fleet's GPU-hours, from a simulation of all, one or a sample of its replicas."""
    hours = outcome.summary.gpu_hours
    return None if hours is None else hours * replicas / simulated_replicas(outcome, replicas)


def _first_probes(
    fleet: Fleet, answer: Answer, grid: list[Batch], settings: PlanSettings, scenario: Scenario
) -> list:
    """The pairs each comparison of `answer` asks for first (and those it names ahead), found by
    starting its search and closing it: searches are generators with no other effect."""
    pairs = []
    for search in _comparisons(fleet, answer, grid, settings, scenario).values():
        try:
            first = next(search)
            while isinstance(first, Ahead):
                pairs += first
                first = search.send(None)
            pairs += first
        except StopIteration:
            pass
        search.close()
    return pairs


def _comparisons(
    fleet: Fleet, answer: Answer, grid: list[Batch], settings: PlanSettings, scenario: Scenario
) -> dict:
    extras = {"one_fewer": comparisons.one_fewer(fleet, answer)}
    if settings.uncertainty:
        error, _ = error_of(answer.outcome.facts["calibration"], settings.assumed_error)
        extras["slower"] = comparisons.shifted(fleet, answer, 1.0 + error, "step times +error")
        extras["faster"] = comparisons.shifted(fleet, answer, 1.0 - error, "step times -error")
    if settings.static_baseline:
        extras["static"] = comparisons.static_baseline(fleet, answer, settings.fast_pass)
    if settings.autoscaled:
        extras["autoscaled"] = comparisons.warm_pool(fleet, answer)
    if settings.dynamic_batch:
        target = settings.batch_target_tpot_s or 0.8 * scenario.slo.tpot_p99_s
        extras["dynamic"] = comparisons.dynamic_batch(
            fleet, answer, grid, target, settings.fast_pass
        )
    for kv_cache_dtype in dict.fromkeys(settings.kv_cache_dtypes):
        extras[f"kv_cache {kv_cache_dtype}"] = comparisons.kv_cache(
            fleet, answer, kv_cache_dtype, settings.fast_pass
        )
    return extras
