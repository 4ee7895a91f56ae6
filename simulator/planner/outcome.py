"""`Outcome`: what one planner evaluation found, as a typed struct, and its JSON form.

An outcome crosses process boundaries (worker processes, Ray) as the dataclass and is cached on disk
as JSON (`to_json` / `from_json`, the keys it always had). `OutcomeSummary` is the part of the
simulation summary (`simulator.summary.SimSummary`) an outcome keeps: the figures the planner, its
ledger and the claims report read. To carry another summary figure, add it to `OutcomeSummary` (with
a None default, as an outcome cut short by early stop knows only `requests`) and bump
`OUTCOME_VERSION`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from simulator.summary import RequestSummary

# Bump when what an outcome holds or how it is judged changes: disk caches keyed on older code go
# stale.
OUTCOME_VERSION = 4
# Why a candidate is rejected: the SLO term it misses, or why it cannot run at all.
REASONS = ("slo_ttft", "slo_tpot", "timeouts", "goodput", "kv_capacity", "does_not_fit", "invalid")
Status = Literal["meets", "misses", "invalid"]


@dataclass(kw_only=True)
class OutcomeSummary:
    """The summary figures an outcome keeps; None where the run did not produce them (a tenant's row
    has no fleet or cost figures; a run stopped early knows only `requests`)."""

    requests: int | None = None
    completed: int | None = None
    timed_out: int | None = None
    rejected: int | None = None
    in_flight: int | None = None
    retries: int | None = None
    preemptions: int | None = None
    ttft_mean_s: float | None = None
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    tpot_mean_s: float | None = None
    tpot_p99_s: float | None = None
    e2e_mean_s: float | None = None
    e2e_p99_s: float | None = None
    abandon_rate: float | None = None
    slo_attainment: float | None = None
    meets_slo: bool | None = None
    replicas_peak: int | None = None
    gpu_hours: float | None = None
    cost_usd: float | None = None
    cost_per_request_usd: float | None = None
    cost_per_million_output_tokens_usd: float | None = None
    simulated_s: float | None = None
    kv_utilization: float | None = None
    kv_usage_peak: float | None = None
    throughput_rps: float | None = None
    output_tokens_per_s: float | None = None

    @classmethod
    def of(cls, summary: RequestSummary) -> OutcomeSummary:
        """The kept figures of a simulation's (or a tenant's) summary."""
        return cls(
            **{name: getattr(summary, name) for name in SUMMARY_KEYS if hasattr(summary, name)}
        )

    def as_dict(self, keys: tuple[str, ...] | None = None) -> dict[str, Any]:
        """The JSON object: every field, or those in `keys` (a tenant's row: `TENANT_KEYS`)."""
        return {name: getattr(self, name) for name in (SUMMARY_KEYS if keys is None else keys)}


SUMMARY_KEYS = tuple(f.name for f in dataclasses.fields(OutcomeSummary))
TENANT_KEYS = tuple(
    name for name in SUMMARY_KEYS if name in RequestSummary.keys()
)  # what a tenant's row has


@dataclass
class FleetPart:
    """What a part of a fleet simulated in parts keeps for the merge (`simulator.planner.parts`): its
    requests' indices in the whole trace and their records (in that order), its end, per replica in
    fleet order (requested at, stopped at, busy seconds, KV-utilisation-weighted busy seconds), and
    per metrics window (time, each replica's KV usage). Crosses to the planner's process; never cached."""

    indices: Any  # numpy int64 array
    records: list
    end_s: float
    replicas: list[tuple[float, float | None, float, float]]
    windows: list[tuple[float, list[float]]]


@dataclass(kw_only=True)
class Outcome:
    """One evaluation: the job's key and what it simulated (`share`, `share_replicas`,
    `step_scale`), the verdict (`status`, `meets`, the SLO terms missed in `reasons`, the `binding`
    one, every term's observed / allowed `ratios`), the summary, per-tenant summaries (runs with
    several tenants), resolved facts, and the CPU seconds it took. `error` says why an invalid
    candidate cannot run."""

    key: str
    share: int | None
    share_replicas: int
    step_scale: float
    early_stop_s: float | None = None
    status: Status
    meets: bool
    reasons: list[str]
    binding: str | None
    error: str | None = None
    ratios: dict[str, float] = field(default_factory=dict)
    summary: OutcomeSummary = field(
        default_factory=OutcomeSummary
    )  # all None: the candidate could not run
    tenants: dict[str, OutcomeSummary] | None = (
        None  # None: not a full run (invalid, or stopped early)
    )
    facts: dict = field(default_factory=dict)
    cpu_s: float = 0.0
    part: FleetPart | None = None  # a part's records and replicas (`simulator.planner.parts`)

    def to_json(self) -> dict[str, Any]:
        """The JSON object: `summary` {} for a candidate that could not run, `tenants` only after
        a full run."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "part"}
        data["summary"] = {} if self.status == "invalid" else self.summary.as_dict()
        if self.tenants is None:
            del data["tenants"]
        else:
            data["tenants"] = {name: row.as_dict(TENANT_KEYS) for name, row in self.tenants.items()}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Outcome:
        values = dict(data)
        summary = values.pop("summary", None)
        tenants = values.pop("tenants", None)
        return cls(
            **values,
            summary=OutcomeSummary(**(summary or {})),
            tenants=None
            if tenants is None
            else {name: OutcomeSummary(**row) for name, row in tenants.items()},
        )

    @property
    def worst_ratio(self) -> float | None:
        """The largest observed / allowed ratio of any SLO term (None when nothing was judged)."""
        return max(self.ratios.values()) if self.ratios else None
