"""A whole fleet simulated in parts: the planner's full-fleet confirmation of a large fleet, spread over
its workers instead of one process.

Under round robin a fixed fleet's replica r serves exactly the requests i with i mod N = r (retries
apart: a retried request goes to whichever replica is next in turn), and replicas share nothing else,
so the fleet is N independent replicas. A job with `parts` = S (`make_job(parts=S)`, the whole fleet)
is run as ⌈N / S⌉ part jobs, part a being replicas [a, a + S): the requests whose index mod N lies
there, on those replicas (`make_job(share_offset=a, share_replicas=S)`). Each part keeps its requests'
records and its replicas' figures (`FleetPart`), and `merge_parts` rebuilds the whole fleet's outcome
from them: the requests' records in trace order (so the same request summary, P99s and SLO verdict as
one run of the whole fleet), GPU-hours, KV utilisation and the KV usage peak per metrics window from
the replicas in fleet order (`tests/test_planner_parts.py` checks the merge against one whole run).

`PartedBackend` puts this in front of any backend (local processes, Ray): a job with `parts` becomes its
part jobs, done when all are, merged when read. The parts are not cached on their own (their records
would not survive the disk cache's JSON); the merged outcome is, under the whole job's key.
`evaluate_in_parts` is the serial twin; `evaluate_job` runs such a job whole, in one process.

Only fleets whose replicas are independent qualify (`parts_refusal`): round robin, no autoscaler, no
disaggregation, no cap on the clients' concurrency. With retries a part keeps a retried request on its
own replicas, the approximation the planner's samples already make: a fleet meeting its SLO retries
nothing when no request times out.
"""

from __future__ import annotations

import time

import numpy as np

from simulator.planner.evaluate import evaluate_job, job_key, judged, make_job
from simulator.planner.outcome import FleetPart, Outcome, OutcomeSummary
from simulator.scenario import Scenario


def parts_refusal(scenario: Scenario) -> str | None:
    """Why the scenario's fleet cannot be simulated in parts (None: it can)."""
    cluster = scenario.cluster
    if cluster.router.policy != "round_robin":
        return f"router {cluster.router.policy!r} reads the replicas' state; expected round_robin"
    if cluster.autoscaler.enabled:
        return "an autoscaled fleet's replicas come and go together; expected a fixed fleet"
    if cluster.disaggregation is not None:
        return "a disaggregated fleet hands requests between pools; expected a co-located fleet"
    if cluster.router.staleness_s > 0:
        return "router.staleness_s > 0 runs the fleet in parallel intervals already; expected 0"
    if scenario.traffic.max_concurrency is not None:
        return "traffic.max_concurrency caps the fleet's requests together; expected None"
    return None


def part_jobs(job: dict) -> list[dict]:
    """The part jobs of a job with `parts` (S): replicas [a, a + S) for a = 0, S, 2S, ... below N."""
    scenario = Scenario.model_validate(job["scenario"])
    refusal = parts_refusal(scenario)
    if refusal is not None:
        raise ValueError(f"parts={job['parts']}: {refusal}")
    replicas, size = scenario.cluster.replicas, job["parts"]
    return [
        make_job(
            scenario,
            share=replicas,
            share_replicas=min(size, replicas - first),
            share_offset=first,
            step_scale=job["step_scale"],
            goodput_share=job["goodput_share"],
            early_stop=False,  # a part past its own P99 says nothing certain about the fleet's
        )
        | {"part": True}
        for first in range(0, replicas, size)
    ]


def evaluate_in_parts(job: dict) -> Outcome:
    """The job's parts one after another in this process, merged (`PartedBackend` runs them side by side)."""
    return merge_parts(job, [evaluate_job(part) for part in part_jobs(job)])


def merge_parts(job: dict, outcomes: list[Outcome]) -> Outcome:
    """The whole fleet's outcome from its parts' (in part order); invalid if a part could not run."""
    about = {
        "key": job_key(job),
        "share": None,
        "share_replicas": 1,
        "step_scale": job["step_scale"],
    }
    cpu_s = sum(outcome.cpu_s for outcome in outcomes)
    broken = next((o for o in outcomes if o.status == "invalid" or o.part is None), None)
    if broken is not None:  # every part is the same scenario: one that cannot run, none can
        return Outcome(
            **about,
            status="invalid",
            meets=False,
            reasons=broken.reasons or ["invalid"],
            binding=broken.binding,
            error=broken.error or "a part came back without its records",
            cpu_s=cpu_s,
        )
    from simulator.result import tenant_summaries
    from simulator.summary import RequestSummary

    scenario = Scenario.model_validate(job["scenario"])
    parts: list[FleetPart] = [outcome.part for outcome in outcomes]  # type: ignore[misc]
    records = [record for part in parts for record in part.records]
    order = np.argsort(np.concatenate([part.indices for part in parts]), kind="stable")
    records = [records[i] for i in order]  # trace order, as one run's records
    end_s = max(part.end_s for part in parts)
    requests = RequestSummary.of(records, end_s, scenario.slo)
    replicas = [replica for part in parts for replica in part.replicas]
    gpu_seconds = sum(
        (min(stopped, end_s) if stopped is not None else end_s) - requested
        for requested, stopped, _, _ in replicas
    )
    gpu_hours = gpu_seconds * scenario.hardware.tensor_parallel / 3600.0
    price = outcomes[0].facts.get("price_usd_per_gpu_hour", 0.0)
    cost = gpu_hours * price
    ok = [record for record in records if record.ok]
    output_tokens = sum(record.output_tokens for record in ok)
    busy_s = sum(busy for _, _, busy, _ in replicas)
    summary = OutcomeSummary.of(requests)
    summary.meets_slo = scenario.slo.verdict(requests)
    summary.replicas_peak = sum(o.summary.replicas_peak or 0 for o in outcomes)
    summary.gpu_hours, summary.cost_usd = gpu_hours, cost
    summary.cost_per_request_usd = cost / len(ok) if ok else None
    summary.cost_per_million_output_tokens_usd = (
        cost / output_tokens * 1e6 if output_tokens else None
    )
    summary.simulated_s = end_s
    summary.kv_utilization = (
        sum(kv_busy for _, _, _, kv_busy in replicas) / busy_s if busy_s else None
    )
    summary.kv_usage_peak = _usage_peak(parts)
    tenants = tenant_summaries(records, end_s, scenario.slo)
    return judged(
        about,
        summary,
        {name: OutcomeSummary.of(row) for name, row in tenants.items()} if len(tenants) > 1 else {},
        scenario.slo,
        job["goodput_share"],
        outcomes[0].facts,
        cpu_s,
    )


def _usage_peak(parts: list[FleetPart]) -> float:
    """The highest fleet KV usage of any metrics window (the whole run's windows are the longest part's):
    each window's mean over every replica in fleet order, a part that has ended holding its last
    window's figures (its replicas are idle from then on)."""
    longest = max(parts, key=lambda part: part.end_s)
    peak, latest = 0.0, [0] * len(parts)
    for at, _ in longest.windows:
        usage: list[float] = []
        for k, part in enumerate(parts):
            windows = part.windows
            while latest[k] + 1 < len(windows) and windows[latest[k] + 1][0] <= at:
                latest[k] += 1
            if windows:
                usage += windows[latest[k]][1]
        peak = max(peak, float(np.mean(usage)) if usage else 0.0)
    return peak


class _Parts:
    """A job in parts on a backend: its part handles, merged when read."""

    def __init__(self, job: dict, handles: list):
        self.job, self.handles = job, handles


class PartedBackend:
    """Any backend, with a job in `parts` run as its part jobs side by side (module docstring)."""

    def __init__(self, backend):
        self.backend = backend
        self.slots, self.name = backend.slots, backend.name

    def submit(self, job: dict):
        if job.get("parts") is None:
            return self.backend.submit(job)
        return _Parts(job, [self.backend.submit(part) for part in part_jobs(job)])

    def _flat(self, handles: list) -> list:
        return [
            h
            for handle in handles
            for h in (handle.handles if isinstance(handle, _Parts) else [handle])
        ]

    def wait(self, handles: list) -> None:
        """Until one of `handles` is done (a job in parts: when its last part is)."""
        while not any(self.done(handle) for handle in handles):
            self.backend.wait([h for h in self._flat(handles) if not self.backend.done(h)])

    def done(self, handle) -> bool:
        if isinstance(handle, _Parts):
            return all(self.backend.done(h) for h in handle.handles)
        return self.backend.done(handle)

    def result(self, handle) -> Outcome:
        if isinstance(handle, _Parts):
            started = time.perf_counter()
            merged = merge_parts(handle.job, [self.backend.result(h) for h in handle.handles])
            merged.cpu_s += time.perf_counter() - started  # the merge, in this process
            return merged
        return self.backend.result(handle)

    def close(self) -> None:
        self.backend.close()
