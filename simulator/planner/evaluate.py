"""One planner evaluation: a scenario simulated (whole fleet, or one replica's share of the traffic),
judged against its SLO, and reduced to a small JSON-able outcome. The unit every backend runs.

A job is a plain dict (picklable for worker processes and Ray): the scenario as JSON, `share` (None:
the whole fleet; N: every N-th request on one replica, which round-robin-like routing makes a near
independent slice of an N-replica fleet), `share_replicas` (k > 1: the requests whose index modulo N
is below k, on k replicas: exactly what round robin sends k of the N replicas, retries apart),
`step_scale` (step times × this: the calibration-error re-check) and the goodput share. Outcomes of
runs with several tenants carry each tenant's summary too. It runs `load_traffic` / `build_cluster` /
`summarize`, the pieces `simulate` is made of, because the planner also needs the cluster while it
runs: with `early_stop` it stops a simulation as soon as its miss is certain (more than 1% of all
requests already past the TTFT or TPOT target, or more abandoned than the SLO allows), which makes
overloaded probes cheap.
The outcome is the same for the same job whoever runs it, so results are cached by the job's hash.
"""
from __future__ import annotations

import hashlib
import json
import time

import numpy as np

from simulator.scenario import Scenario

# Bump when what an outcome holds or how it is judged changes: disk caches keyed on older code go stale.
OUTCOME_VERSION = 2
SUMMARY_KEYS = ("requests", "completed", "timed_out", "rejected", "in_flight", "retries", "preemptions",
                "ttft_mean_s", "ttft_p50_s", "ttft_p99_s", "tpot_mean_s", "tpot_p99_s", "e2e_mean_s", "e2e_p99_s",
                "abandon_rate", "slo_attainment", "meets_slo", "replicas_peak", "gpu_hours", "cost_usd",
                "cost_per_request_usd", "cost_per_million_output_tokens_usd", "simulated_s", "kv_utilization",
                "kv_usage_peak", "throughput_rps", "output_tokens_per_s")
# Why a candidate is rejected: the SLO term it misses, or why it cannot run at all.
REASONS = ("slo_ttft", "slo_tpot", "timeouts", "goodput", "kv_capacity", "does_not_fit", "invalid")
# The ratio of a term missed without any finite measure (no first token at all, nothing allowed): finite,
# so outcomes stay valid JSON.
NEVER = 1e9


def make_job(scenario: Scenario, share: int | None = None, step_scale: float = 1.0,
             goodput_share: float | None = None, early_stop: bool = True, share_replicas: int = 1) -> dict:
    if share is not None and share < 1:
        raise ValueError(f"share={share}; expected None (the whole fleet) or N ≥ 1 (one replica's 1/N share)")
    if share_replicas < 1 or (share_replicas > 1 and (share is None or share_replicas > share)):
        raise ValueError(f"share_replicas={share_replicas} with share={share}; expected 1, or k ≤ N with a share N")
    if share is not None:      # k replicas, no autoscaler: the share is what k of N fixed replicas see
        cluster = scenario.cluster.model_copy(update={
            "replicas": share_replicas,
            "autoscaler": scenario.cluster.autoscaler.model_copy(update={"enabled": False})})
        scenario = scenario.model_copy(update={"cluster": cluster})
    return {"scenario": scenario.model_dump(mode="json"), "share": share, "share_replicas": share_replicas,
            "step_scale": float(step_scale), "goodput_share": goodput_share, "early_stop": bool(early_stop)}


def job_key(job: dict) -> str:
    """sha256 of the job's canonical JSON (and the outcome format's version)."""
    text = json.dumps({"job": job, "version": OUTCOME_VERSION}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class _Doomed(Exception):
    def __init__(self, reasons: list[str], at_s: float):
        super().__init__(reasons, at_s)              # SimPy re-raises a copy built from the args
        self.reasons, self.at_s = reasons, at_s


def evaluate_job(job: dict) -> dict:
    """Simulate the job and judge it; never raises for a scenario that cannot run (its outcome says why)."""
    from simulator.calibration.schema import Calibration
    from simulator.result import summarize
    from simulator.simulation import build_cluster, load_traffic, resolve_calibration_for

    started = time.process_time()
    scenario = Scenario.model_validate(job["scenario"])
    share, share_replicas = job["share"], job["share_replicas"]
    outcome = {"key": job_key(job), "share": share, "share_replicas": share_replicas, "step_scale": job["step_scale"],
               "early_stop_s": None}
    try:
        trace = load_traffic(scenario)
        if share is not None and share > 1:
            keep = np.arange(len(trace)) % share < share_replicas
            trace = trace.select(keep, step=f"requests i with i mod {share} < {share_replicas}: {share_replicas} "
                                 f"replicas' share of {share}")
        calibration: Calibration = resolve_calibration_for(scenario)
        if job["step_scale"] != 1.0:
            from simulator.calibration.cost_model import scaled_calibration
            calibration = scaled_calibration(calibration, job["step_scale"])
        cluster, facts = build_cluster(scenario, trace, calibration)
    except ValueError as error:
        return outcome | {"status": "invalid", "meets": False, "reasons": [_invalid_reason(str(error))],
                          "binding": _invalid_reason(str(error)), "error": str(error), "ratios": {}, "summary": {},
                          "facts": {}, "cpu_s": time.process_time() - started}
    watch = _Watch(cluster, scenario, job["goodput_share"]) if job["early_stop"] else None
    try:
        end_s = cluster.run(scenario.horizon_s, watch)
    except _Doomed as doomed:
        ratios = watch.partial_ratios()
        return outcome | {"status": "misses", "meets": False, "reasons": doomed.reasons,
                          "binding": max(doomed.reasons, key=lambda r: ratios.get(r, 0.0)), "error": None,
                          "ratios": ratios, "summary": {"requests": len(cluster.records)}, "facts": _facts(facts),
                          "early_stop_s": doomed.at_s, "cpu_s": time.process_time() - started}
    result = summarize(scenario, cluster, end_s, facts)
    summary = result.summary
    ratios = slo_ratios(summary, scenario, job["goodput_share"])
    reasons = [reason for reason, ratio in ratios.items() if ratio > 1.0]
    tenants = {tenant: {key: row.get(key) for key in SUMMARY_KEYS if key in row}
               for tenant, row in result.tenants.items()} if len(result.tenants) > 1 else {}
    return outcome | {"status": "misses" if reasons else "meets", "meets": not reasons, "reasons": reasons,
                      "binding": max(ratios, key=ratios.get) if ratios else None, "error": None, "ratios": ratios,
                      "summary": {key: summary.get(key) for key in SUMMARY_KEYS}, "tenants": tenants,
                      "facts": _facts(facts), "cpu_s": time.process_time() - started}


def slo_ratios(summary: dict, scenario: Scenario, goodput_share: float | None) -> dict[str, float]:
    """Each SLO term as observed / allowed (> 1: missed), as `summarize` judges `meets_slo`: a run with no
    first token at all misses TTFT, one with requests still in flight at the horizon misses `timeouts`."""
    slo = scenario.slo
    ttft, tpot = summary["ttft_p99_s"], summary["tpot_p99_s"]
    abandoned = summary["abandon_rate"]
    ratios = {"slo_ttft": NEVER if ttft is None else ttft / slo.ttft_p99_s,
              "slo_tpot": 0.0 if tpot is None else tpot / slo.tpot_p99_s,
              "timeouts": NEVER if summary["in_flight"] else _ratio(abandoned, slo.max_abandon_rate)}
    if goodput_share is not None:
        ratios["goodput"] = _ratio(1.0 - summary["slo_attainment"], 1.0 - goodput_share)
    return ratios


def _ratio(observed: float, allowed: float) -> float:
    if allowed > 0:
        return observed / allowed
    return NEVER if observed > 0 else 0.0


def _facts(facts: dict) -> dict:
    return {key: facts[key] for key in ("calibration", "kv_blocks_per_replica", "kv_cache_dtype",
                                        "price_usd_per_gpu_hour", "cold_start_s", "max_model_len") if key in facts}


def _invalid_reason(message: str) -> str:
    """`build_cluster`'s refusals, by the words of its messages."""
    if "does not fit" in message:
        return "does_not_fit"
    if "KV pool holds" in message:
        return "kv_capacity"
    return "invalid"


class _Watch:
    """Called every metrics window of simulated time: raises `_Doomed` once the SLO miss is certain
    whatever happens to the requests still open. A P99 above its target is certain when more than
    1% of all requests (+2, for the percentile's interpolation) already exceed it; the abandon rate
    when more requests than it allows have already given up. Each record is counted once, when it
    ends, so a whole run costs O(requests + open requests per window)."""

    def __init__(self, cluster, scenario: Scenario, goodput_share: float | None):
        self.cluster, self.slo, self.goodput_share = cluster, scenario.slo, goodput_share
        self.total = len(cluster.records)
        self.p99_limit = 0.01 * self.total + 2
        self.counts = {"slo_ttft": 0, "slo_tpot": 0, "timeouts": 0, "goodput": 0}
        self._arrived = 0                 # records before this index have arrived
        self._open: list[int] = []        # arrived, not ended yet

    def __call__(self, fraction: float) -> None:
        slo, records, counts = self.slo, self.cluster.records, self.counts
        now, arrivals = self.cluster.env.now, self.cluster.arrival_s
        while self._arrived < self.total and arrivals[self._arrived] <= now:
            self._open.append(self._arrived)
            self._arrived += 1
        still_open = []
        for index in self._open:
            record = records[index]
            status = record.status
            if status == "ok":
                ttft, tpot = record.ttft_s, record.tpot_s
                late_ttft = ttft is not None and ttft > slo.ttft_p99_s
                late_tpot = tpot is not None and tpot > slo.tpot_p99_s
                counts["slo_ttft"] += late_ttft
                counts["slo_tpot"] += late_tpot
                counts["goodput"] += late_ttft or late_tpot
            elif status in ("timeout", "rejected"):
                counts["timeouts"] += 1
                counts["goodput"] += 1
            else:
                still_open.append(index)
        self._open = still_open
        reasons = [reason for reason, limit in self._limits().items() if counts[reason] > limit]
        if reasons:
            raise _Doomed(reasons, now)

    def _limits(self) -> dict[str, float]:
        limits = {"slo_ttft": self.p99_limit, "slo_tpot": self.p99_limit,
                  "timeouts": self.slo.max_abandon_rate * self.total}
        if self.goodput_share is not None:
            limits["goodput"] = (1.0 - self.goodput_share) * self.total
        return limits

    def partial_ratios(self) -> dict[str, float]:
        """What had already happened when the run stopped, against what the SLO allows over the whole run."""
        return {reason: _ratio(self.counts[reason], limit) for reason, limit in self._limits().items()}
