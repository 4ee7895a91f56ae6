"""The plan's answer as one typed report, and the clear message when there is no answer.

`assemble` turns the searches' outcomes into a `PlanReport` (`simulator.planner.report`: the
recommendation, the recommended and one-fewer scenarios, a row per GPU type, the static baseline,
the autoscaled and dynamic-batch comparisons, ...); the two scenarios are complete, so anyone can re-check the answer with `surgeplan simulate`.
`explain_failure` tells apart, and says what to change for: a model that fits no candidate GPU, an
SLO that even an idle replica misses (no fleet can meet it), and a spike whose peak needs more
replicas than the range allows.
"""

from __future__ import annotations

from dataclasses import replace

from simulator.kv_quality import measured_quality
from simulator.planner.fleet import Answer, Fleet
from simulator.planner.outcome import Outcome
from simulator.planner.report import (
    Autoscaled,
    BestFixed,
    DynamicBatch,
    FleetSummary,
    GpuRow,
    KvCacheRow,
    PlanReport,
    PlanSLO,
    Recommendation,
    TrafficFacts,
    Uncertainty,
    Verdict,
)
from simulator.planner.search import checked_by, drive, simulated_replicas
from simulator.planner.spec import PlanError, PlanSettings
from simulator.planner.uncertainty import describe_recheck, error_of
from simulator.scenario import Scenario

_TERMS = {
    "slo_ttft": "P99 TTFT",
    "slo_tpot": "P99 TPOT",
    "timeouts": "abandon rate",
    "goodput": "goodput share",
}


def assemble(
    scenario: Scenario,
    settings: PlanSettings,
    fleet: Fleet,
    answer: Answer,
    best: GpuRow,
    per_gpu: list[GpuRow],
    results: dict,
    traffic: TrafficFacts,
) -> PlanReport:
    n = answer.replicas
    calibration = best.calibration
    below = results.get("one_fewer")
    recommendation = Recommendation(
        gpu=best.gpu,
        tensor_parallel=best.tensor_parallel,
        replicas=best.replicas,
        gpus=best.gpus,
        max_num_seqs=best.max_num_seqs,
        max_num_batched_tokens=best.max_num_batched_tokens,
        cost_per_hour_usd=best.cost_per_hour_usd,
        cost_per_request_usd=best.cost_per_request_usd,
        cost_per_million_output_tokens_usd=best.cost_per_million_output_tokens_usd,
        gpu_hours=best.gpu_hours,
        binding_constraint=best.binding_constraint if below is None else below.binding,
        headroom=best.headroom,
        headroom_term=best.headroom_term,
        ttft_p99_s=best.ttft_p99_s,
        tpot_p99_s=best.tpot_p99_s,
        abandon_rate=best.abandon_rate,
        calibration=calibration,
        one_fewer_misses=None if below is None else not below.meets,
        checked_by=best.checked_by,
        binding_checked_by=None if below is None else checked_by(below),
    )
    report = PlanReport(
        recommendation=recommendation,
        recommended_scenario=fleet.scenario(n, answer.batch).model_dump(mode="json"),
        one_fewer_scenario=fleet.scenario(n - 1, answer.batch).model_dump(mode="json")
        if n > 1
        else None,
        one_fewer=_verdict(below),
        per_gpu_type=per_gpu,
        traffic=traffic,
        slo=PlanSLO(**scenario.slo.model_dump(), goodput_share=settings.goodput_share),
        replica_range=[fleet.low, fleet.high],
    )
    if "slower" in results:
        error, source = error_of(calibration, settings.assumed_error)
        report.uncertainty = Uncertainty(
            step_time_error=error,
            source=source,
            replicas_if_slower=results["slower"],
            replicas_if_faster=results["faster"],
            text=describe_recheck(n, error, results["slower"], results["faster"], fleet.high),
        )
        recommendation.replicas_if_slower = results["slower"]
    if "static" in results:
        report.static_baseline = _fleet_summary(results["static"], fleet.tensor_parallel)
    if "autoscaled" in results:
        report.autoscaled = _autoscaled(results["autoscaled"], answer, fleet)
    if "dynamic" in results:
        report.dynamic_batch = _dynamic(results["dynamic"], best, fleet)
    report.kv_cache_dtypes = kv_cache_rows(results, fleet, settings.kv_cache_dtypes)
    static = report.static_baseline
    recommendation.sentence = (
        f"{n} x {fleet.gpu} (TP {fleet.tensor_parallel}: {best.gpus} GPUs) with max_num_seqs "
        f"{answer.batch.max_num_seqs}, max_num_batched_tokens {answer.batch.max_num_batched_tokens}: "
        f"${best.cost_per_hour_usd:.2f}/hour, ${best.cost_per_request_usd:.6f}/request"
        + (
            f"; a traditional (static batching) server needs {_count(static)} replicas"
            if static
            else ""
        )
    )
    return report


def kv_cache_rows(results: dict, fleet: Fleet, kv_cache_dtypes: list[str]) -> list[KvCacheRow]:
    """ "Does FP8 KV help?": per KV cache dtype compared, the fleet (GPUs, $/request, P99s, KV blocks) beside
    the measured quality cost of that dtype (benchmarks/kv_cache_quality.py, in simulator/data)."""
    rows = []
    for kv_cache_dtype in dict.fromkeys(kv_cache_dtypes):  # in the order asked
        answer = results[f"kv_cache {kv_cache_dtype}"]
        facts = answer.outcome.facts
        rows.append(
            KvCacheRow(
                **_fleet_fields(answer, fleet.tensor_parallel),
                kv_cache_dtype=kv_cache_dtype,
                kv_blocks_per_replica=facts.get("kv_blocks_per_replica"),
                quality=measured_quality(kv_cache_dtype),
            )
        )
    return rows


def _count(fleet_summary: FleetSummary) -> str:
    return (
        str(fleet_summary.replicas)
        if fleet_summary.replicas
        else f"more than {fleet_summary.searched_up_to}"
    )


def _verdict(outcome: Outcome | None) -> Verdict | None:
    if outcome is None:
        return None
    return Verdict(
        status=outcome.status,
        reasons=outcome.reasons,
        binding=outcome.binding,
        ratios=outcome.ratios,
        ttft_p99_s=outcome.summary.ttft_p99_s,
        tpot_p99_s=outcome.summary.tpot_p99_s,
        early_stop_s=outcome.early_stop_s,
    )


def _fleet_fields(answer: Answer, tensor_parallel: int) -> dict:
    """The `FleetSummary` fields of a comparison's answer (shared by its subclasses' rows)."""
    summary = answer.outcome.summary
    price = answer.outcome.facts.get("price_usd_per_gpu_hour")
    gpus = answer.replicas * tensor_parallel if answer.replicas else None
    return dict(
        replicas=answer.replicas,
        gpus=gpus,
        searched_up_to=answer.high,
        policy=answer.batch.policy,
        batch_controller=answer.batch.batch_controller,
        max_num_seqs=answer.batch.max_num_seqs,
        max_num_batched_tokens=answer.batch.max_num_batched_tokens,
        cost_per_hour_usd=gpus * price if gpus and price is not None else None,
        cost_per_request_usd=summary.cost_per_request_usd if answer.replicas else None,
        ttft_p99_s=summary.ttft_p99_s,
        tpot_p99_s=summary.tpot_p99_s,
        status="meets" if answer.replicas else "misses",
        reasons=answer.outcome.reasons,
    )


def _fleet_summary(answer: Answer, tensor_parallel: int) -> FleetSummary:
    return FleetSummary(**_fleet_fields(answer, tensor_parallel))


def _autoscaled(result: tuple, answer: Answer, fleet: Fleet) -> Autoscaled:
    pool, outcome = result
    fixed, scaled = answer.outcome.summary, outcome.summary
    # the whole fixed fleet
    fixed_cost_usd = (
        fixed.cost_usd * answer.replicas / simulated_replicas(answer.outcome, answer.replicas)
    )
    hours = (scaled.simulated_s or 0.0) / 3600.0
    saved = (
        fixed_cost_usd - scaled.cost_usd
        if pool is not None and scaled.cost_usd is not None
        else None
    )
    return Autoscaled(
        warm_pool=pool,
        max_replicas=max(fleet.high, answer.replicas),
        meets=pool is not None,
        replicas_peak=scaled.replicas_peak,
        cost_usd=scaled.cost_usd,
        cost_per_hour_usd=scaled.cost_usd / hours
        if hours and scaled.cost_usd is not None
        else None,
        cost_per_request_usd=scaled.cost_per_request_usd,
        ttft_p99_s=scaled.ttft_p99_s,
        fixed_cost_usd=fixed_cost_usd,
        fixed_cost_per_request_usd=fixed.cost_per_request_usd,
        saved_usd=saved,
        saved_share=saved / fixed_cost_usd if saved is not None and fixed_cost_usd else None,
        cold_start_s=outcome.facts.get("cold_start_s"),
        reasons=outcome.reasons,
    )


def _dynamic(answer: Answer, best: GpuRow, fleet: Fleet) -> DynamicBatch:
    return DynamicBatch(
        **_fleet_fields(answer, fleet.tensor_parallel),
        batch_target_tpot_s=answer.batch.batch_target_tpot_s,
        best_fixed=BestFixed(
            replicas=best.replicas,
            gpus=best.gpus,
            max_num_seqs=best.max_num_seqs,
            max_num_batched_tokens=best.max_num_batched_tokens,
            cost_per_request_usd=best.cost_per_request_usd,
            ttft_p99_s=best.ttft_p99_s,
            tpot_p99_s=best.tpot_p99_s,
        ),
    )


def explain_failure(
    scenario: Scenario,
    fleets: dict[str, Fleet],
    answers: dict[str, Answer],
    unfit: list[GpuRow],
    traffic: TrafficFacts,
    runner,
    ledger,
) -> None:
    """Raise the `PlanError` that says why no candidate has an answer, and what to change."""
    model = scenario.model.name
    if not fleets:
        details = "; ".join(f"{row.gpu}: {row.reason}" for row in unfit)
        raise PlanError(
            f"{model} fits none of the candidate GPUs ({details}); expected a larger tensor_parallel, "
            "a GPU with more memory in plan.candidates, or a smaller dtype"
        )
    invalid = {
        name: answer for name, answer in answers.items() if answer.outcome.status == "invalid"
    }
    if len(invalid) == len(answers):
        details = "; ".join(f"{name}: {answer.outcome.error}" for name, answer in invalid.items())
        raise PlanError(f"no candidate can run this traffic: {details}")
    # an idle replica: one replica's share of a fleet so large that it sees about 20 requests
    idle_share = max(2, traffic.requests // 20)
    names = [name for name in answers if name not in invalid]
    checks = drive(
        runner,
        {
            name: _one(
                replace(fleets[name], early_stop=False).probe(  # to the end: real P99s
                    idle_share, answers[name].batch, True, "idle check"
                )
            )
            for name in names
        },
        ledger,
    )
    outcomes = [checks[name] for name in names]
    lines = []
    for name, idle in zip(names, outcomes):
        if not idle.meets:
            terms = ", ".join(f"{_TERMS.get(r, r)} {_observed(idle, r)}" for r in idle.reasons)
            lines.append(f"{name}: even an idle replica misses it ({terms})")
    if len(lines) == len(names):
        slo = scenario.slo
        raise PlanError(
            f"no fleet of any size can meet the SLO (P99 TTFT ≤ {slo.ttft_p99_s:g} s, P99 TPOT ≤ "
            f"{slo.tpot_p99_s:g} s, abandon rate ≤ {slo.max_abandon_rate:g}): "
            + "; ".join(lines)
            + "; expected a looser slo, a faster GPU or a larger tensor_parallel"
        )
    high = max(fleet.high for fleet in fleets.values())
    details = "; ".join(
        f"{name} misses {' and '.join(_TERMS.get(r, r) for r in answers[name].outcome.reasons)} "
        f"with {_replicas(fleets[name].high)}"
        for name in names
    )
    raise PlanError(
        f"the traffic's peak ({traffic.peak_rate_per_s:.1f} requests/s over {traffic.peak_window_s:g} s, "
        f"{traffic.mean_rate_per_s:.1f}/s on average) needs more than {_replicas(high)}: {details}; "
        "expected a larger plan.max_replicas (or cluster.autoscaler.max_replicas), a smaller spike, "
        "or a faster GPU"
    )


def _replicas(count: int) -> str:
    return f"{count} replica" + ("" if count == 1 else "s")


def _one(pair):
    return (yield [pair])[0]


def _observed(outcome: Outcome, reason: str) -> str:
    key = {"slo_ttft": "ttft_p99_s", "slo_tpot": "tpot_p99_s", "timeouts": "abandon_rate"}.get(
        reason
    )
    value = getattr(outcome.summary, key) if key else None
    if value is None:
        return f"{outcome.ratios.get(reason, 0):.2f}x its limit"
    return f"{value:.3g}" + (" s" if key.endswith("_s") else "")
