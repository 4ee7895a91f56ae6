"""One planner evaluation: a scenario simulated (whole fleet, or one replica's share of the traffic),
judged against its SLO (`simulator.slo.SLO`), and reduced to a small typed `Outcome`. The unit every
backend runs.

A job is a plain dict (picklable for worker processes and Ray): the scenario as JSON, `share` (None:
the whole fleet; N: every N-th request on one replica, which round-robin-like routing makes a near
independent slice of an N-replica fleet), `share_replicas` (k > 1: the requests whose index modulo N
is below k, on k replicas: exactly what round robin sends k of the N replicas, retries apart),
`share_offset` (a: replicas [a, a + k) instead of [0, k): a part of the whole fleet,
`simulator.planner.parts`), `step_scale` (step times × this: the calibration-error re-check) and the
goodput share; `parts` (S: the whole fleet, simulated as parts of S replicas and merged). Outcomes of
runs with several tenants carry each tenant's summary too. It runs `load_traffic` / `build_cluster` /
`summarize`, the pieces `simulate` is made of, because the planner also needs the cluster while it
runs: with `early_stop` it stops a simulation as soon as its miss is certain (more than 1% of all
requests already past the TTFT or TPOT target, or more abandoned than the SLO allows), which makes
overloaded probes cheap. A request whose first token came too late counts as late from that token on,
not from its last one: its TTFT is final then, and a request with a first token always ends served.
The outcome is the same for the same job whoever runs it, so results are cached by the job's hash.
"""

from __future__ import annotations

import hashlib
import json
import time

import numpy as np

from simulator.errors import ModelDoesNotFit, PoolTooSmall
from simulator.planner.cache import inputs_fingerprint
from simulator.planner.outcome import OUTCOME_VERSION, FleetPart, Outcome, OutcomeSummary
from simulator.scenario import Scenario
from simulator.slo import SLO, ratio


def make_job(
    scenario: Scenario,
    share: int | None = None,
    step_scale: float = 1.0,
    goodput_share: float | None = None,
    early_stop: bool = True,
    share_replicas: int = 1,
    share_offset: int = 0,
    parts: int | None = None,
) -> dict:
    if share is not None and share < 1:
        raise ValueError(
            f"share={share}; expected None (the whole fleet) or N ≥ 1 (one replica's 1/N share)"
        )
    if share_replicas < 1 or (share_replicas > 1 and (share is None or share_replicas > share)):
        raise ValueError(
            f"share_replicas={share_replicas} with share={share}; expected 1, or k ≤ N with a share N"
        )
    if share_offset < 0 or (
        share_offset and (share is None or share_offset + share_replicas > share)
    ):
        raise ValueError(
            f"share_offset={share_offset} with share={share}, share_replicas={share_replicas}; "
            "expected 0, or a ≥ 0 with a + k ≤ N"
        )
    if parts is not None and (parts < 1 or share is not None):
        raise ValueError(
            f"parts={parts} with share={share}; expected None, or S ≥ 1 replicas a part of the "
            "whole fleet (share None)"
        )
    if share is not None:  # k replicas, no autoscaler: the share is what k of N fixed replicas see
        cluster = scenario.cluster.model_copy(
            update={
                "replicas": share_replicas,
                "autoscaler": scenario.cluster.autoscaler.model_copy(update={"enabled": False}),
            }
        )
        scenario = scenario.model_copy(update={"cluster": cluster})
    job = {
        "scenario": scenario.model_dump(mode="json"),
        "share": share,
        "share_replicas": share_replicas,
        "step_scale": float(step_scale),
        "goodput_share": goodput_share,
        "early_stop": bool(early_stop),
    }
    # only when set: the keys (and disk caches) of every other job stay as they were
    if share_offset:
        job["share_offset"] = share_offset
    if parts is not None:
        job["parts"] = parts
    return job


def job_key(job: dict) -> str:
    """sha256 of the job's canonical JSON, the outcome format's version and the data the scenario
    resolves to outside its JSON (`inputs_fingerprint`: catalog, calibrations, profiles), so that a
    disk cache never answers from before a change to any of them."""
    text = json.dumps(
        {"job": job, "version": OUTCOME_VERSION, "inputs": inputs_fingerprint(job["scenario"])},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(text.encode()).hexdigest()


class _Doomed(Exception):
    def __init__(self, reasons: list[str], at_s: float):
        super().__init__(reasons, at_s)  # SimPy re-raises a copy built from the args
        self.reasons, self.at_s = reasons, at_s


def evaluate_job(job: dict) -> Outcome:
    """Simulate the job and judge it; never raises for a scenario that cannot run (its outcome says why).
    A job in `parts` runs whole here, which gives the same outcome as its parts merged (the planner's
    `Runner` runs them side by side: `simulator.planner.parts`); a part (`part: True`) keeps its
    requests and replicas for that merge."""
    from simulator.calibration.schema import Calibration
    from simulator.resolve import resolve_calibration_for
    from simulator.result import summarize
    from simulator.simulation import build_cluster, load_traffic

    started = time.process_time()
    scenario = Scenario.model_validate(job["scenario"])
    share, share_replicas, slo = job["share"], job["share_replicas"], scenario.slo
    offset = job.get("share_offset", 0)
    about = {
        "key": job_key(job),
        "share": share,
        "share_replicas": share_replicas,
        "step_scale": job["step_scale"],
    }
    try:
        trace = load_traffic(scenario)
        indices = None
        if share is not None and share > 1:
            slot = np.arange(len(trace)) % share - offset
            keep = (slot >= 0) & (slot < share_replicas)
            indices = np.flatnonzero(keep)
            trace = trace.select(
                keep,
                step=f"requests i with {offset} ≤ i mod {share} < {offset + share_replicas}: "
                f"{share_replicas} replicas' share of {share}",
            )
        calibration: Calibration = resolve_calibration_for(scenario)
        # the error band scales whole steps: GPU kernels and the serving stack's host time alike
        cluster, facts = build_cluster(scenario, trace, calibration, step_scale=job["step_scale"])
    except ValueError as error:
        reason = invalid_reason(error)
        return Outcome(
            **about,
            status="invalid",
            meets=False,
            reasons=[reason],
            binding=reason,
            error=str(error),
            cpu_s=time.process_time() - started,
        )
    if job.get("part"):
        cluster.monitor.parts = []  # each window's per-replica KV usage, for the merge
    watch = _Watch(cluster, slo, job["goodput_share"]) if job["early_stop"] else None
    try:
        end_s = cluster.run(scenario.horizon_s, watch)
    except _Doomed as doomed:
        ratios = watch.partial_ratios()
        return Outcome(
            **about,
            early_stop_s=doomed.at_s,
            status="misses",
            meets=False,
            reasons=doomed.reasons,
            binding=SLO.binding(ratios, among=doomed.reasons),
            ratios=ratios,
            summary=OutcomeSummary(requests=len(cluster.records)),
            facts=_facts(facts),
            cpu_s=time.process_time() - started,
        )
    result = summarize(scenario, cluster, end_s, facts)
    tenants = (
        {tenant: OutcomeSummary.of(row) for tenant, row in result.tenants.items()}
        if len(result.tenants) > 1
        else {}
    )
    part = _part(cluster, end_s, indices) if job.get("part") else None
    return judged(
        about,
        OutcomeSummary.of(result.summary),
        tenants,
        slo,
        job["goodput_share"],
        _facts(facts),
        time.process_time() - started,
        part,
    )


def judged(
    about: dict,
    summary: OutcomeSummary,
    tenants: dict[str, OutcomeSummary],
    slo: SLO,
    goodput_share: float | None,
    facts: dict,
    cpu_s: float,
    part: FleetPart | None = None,
) -> Outcome:
    """A run's outcome: its summary judged against the SLO."""
    ratios = slo.ratios(summary, goodput_share)
    reasons = SLO.missed(ratios)
    return Outcome(
        **about,
        status="misses" if reasons else "meets",
        meets=not reasons,
        reasons=reasons,
        binding=SLO.binding(ratios),
        ratios=ratios,
        summary=summary,
        tenants=tenants,
        facts=facts,
        cpu_s=cpu_s,
        part=part,
    )


def _part(cluster, end_s: float, indices) -> FleetPart:
    """A part's records and replicas for the merge (`simulator.planner.parts`)."""
    records = cluster.records
    return FleetPart(
        indices=np.arange(len(records)) if indices is None else indices,
        records=records,
        end_s=end_s,
        replicas=[
            (r.requested_at_s, r.stopped_at_s, r.busy_s, r.kv_utilization_busy_s)
            for r in cluster.replicas
        ],
        windows=[
            (row["time_s"], [usage for _, usage in window["kv_usage"]])
            for row, window in zip(cluster.monitor.rows, cluster.monitor.parts)
        ],
    )


def _facts(facts: dict) -> dict:
    return {
        key: facts[key]
        for key in (
            "calibration",
            "kv_blocks_per_replica",
            "kv_cache_dtype",
            "price_usd_per_gpu_hour",
            "cold_start_s",
            "max_model_len",
        )
        if key in facts
    }


def invalid_reason(error: ValueError) -> str:
    """Why a scenario cannot run, by the type of `build_cluster`'s refusal."""
    if isinstance(error, ModelDoesNotFit):
        return "does_not_fit"
    if isinstance(error, PoolTooSmall):
        return "kv_capacity"
    return "invalid"


class _Watch:
    """Called every metrics window of simulated time: raises `_Doomed` once the SLO miss is certain
    whatever happens to the requests still open (`SLO.miss_limits`). Each finished request is judged
    by `SLO.late`, as the summary's attainment judges it, and counted once, when it ends. On a plain
    `Cluster` a running request is judged on its TTFT as soon as it has a first token: the engine sets
    `first_token_time` once, the client's timeout spares a request with a first token, so it will end
    "ok" with exactly this TTFT (`Cluster._on_progress`); a request ending in flight at the horizon
    misses `timeouts` anyway. Requests are counted by trace index, so none twice. A run costs
    O(requests + open requests per window)."""

    def __init__(self, cluster, slo: SLO, goodput_share: float | None):
        from simulator.cluster.cluster import Cluster

        self.cluster, self.slo = cluster, slo
        self.total = len(cluster.records)
        self.limits = slo.miss_limits(self.total, goodput_share)
        self.counts = {"slo_ttft": 0, "slo_tpot": 0, "timeouts": 0, "goodput": 0}
        self._arrived = 0  # records before this index have arrived
        self._open: list[int] = []  # arrived, not ended yet
        # other clusters (disaggregated pools, shards) time a first token elsewhere: ended requests only
        self._first_tokens = type(cluster) is Cluster
        # open requests already counted late on their first token
        self._late_first: set[int] = set()

    def __call__(self, fraction: float) -> None:
        slo, records, counts = self.slo, self.cluster.records, self.counts
        now, arrivals = self.cluster.env.now, self.cluster.arrival_s
        while self._arrived < self.total and arrivals[self._arrived] <= now:
            self._open.append(self._arrived)
            self._arrived += 1
        still_open = []
        late_first = self._late_first
        for index in self._open:
            record = records[index]
            status = record.status
            if status == "ok":
                late_ttft, late_tpot = slo.late(record.ttft_s, record.tpot_s)
                if index in late_first:  # its TTFT and goodput were counted at its first token
                    late_first.discard(index)
                    late_ttft = False
                else:
                    counts["goodput"] += late_ttft or late_tpot
                counts["slo_ttft"] += late_ttft
                counts["slo_tpot"] += late_tpot
            elif status in ("timeout", "rejected"):
                counts["timeouts"] += 1
                counts["goodput"] += 1
            else:
                still_open.append(index)
        self._open = still_open
        if self._first_tokens:
            self._count_late_first_tokens()
        reasons = [reason for reason, limit in self.limits.items() if counts[reason] > limit]
        if reasons:
            raise _Doomed(reasons, now)

    def _count_late_first_tokens(self) -> None:
        """Running requests whose first token came after the TTFT target: late for good."""
        arrivals, target_s, late_first = (
            self.cluster.arrival_s,
            self.slo.ttft_p99_s,
            self._late_first,
        )
        for replica in self.cluster.replicas:
            for request in replica.scheduler.running:
                first_s = request.first_token_time
                if first_s is None:
                    continue
                index = int(request.request_id.split(".")[0])
                # the same subtraction as `Cluster._on_progress` writes into the record
                if index not in late_first and first_s - arrivals[index] > target_s:
                    late_first.add(index)
                    self.counts["slo_ttft"] += 1
                    self.counts["goodput"] += 1

    def partial_ratios(self) -> dict[str, float]:
        """What had already happened when the run stopped, against what the SLO allows over the whole run."""
        return {reason: ratio(self.counts[reason], limit) for reason, limit in self.limits.items()}
