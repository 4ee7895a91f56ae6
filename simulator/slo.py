"""`SLO`: a scenario's latency and abandon targets, and the one verdict on a run against them.

Every judge of a run reads it from here: the simulation summary's `meets_slo` and `slo_attainment`,
the planner's ratios and binding term, and the planner's early-stop watcher, which applies the same
per-request test (`late`) to requests as they end. Each term is judged as observed / allowed: above
1 it is missed, and the term with the largest ratio is the binding one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

# The ratio of a term missed without any finite measure (no first token at all, nothing allowed):
# finite, so outcomes stay valid JSON.
NEVER = 1e9
# The SLO's terms, in the order ratios list them; `goodput` only when a goodput share is required.
TERMS = ("slo_ttft", "slo_tpot", "timeouts", "goodput")


class _Record(Protocol):  # what the SLO reads of a request: the replay client's `RequestRecord`
    ok: bool
    ttft_s: float | None
    tpot_s: float | None


class _Summary(Protocol):  # what the SLO reads of a run's summary (`simulator.summary.SimSummary`)
    ttft_p99_s: float | None
    tpot_p99_s: float | None
    abandon_rate: float
    slo_attainment: float
    in_flight: int


def ratio(observed: float, allowed: float) -> float:
    """observed / allowed; with nothing allowed, NEVER if anything was observed, else 0."""
    if allowed > 0:
        return observed / allowed
    return NEVER if observed > 0 else 0.0


class SLO(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ttft_p99_s: float = Field(2.0, gt=0, description="P99 time to first token")
    tpot_p99_s: float = Field(0.2, gt=0, description="P99 time per output token after the first")
    max_abandon_rate: float = Field(
        0.01, ge=0, le=1, description="share of requests timed out or rejected"
    )

    # ---- one request ---------------------------------------------------------------------------
    def late(self, ttft_s: float | None, tpot_s: float | None) -> tuple[bool, bool]:
        """(TTFT over its target, TPOT over its target) for one finished request; None is never
        late."""
        return (
            ttft_s is not None and ttft_s > self.ttft_p99_s,
            tpot_s is not None and tpot_s > self.tpot_p99_s,
        )

    def attainment(self, records: Iterable[_Record]) -> float:
        """The share of requests that finished within both the TTFT and TPOT targets (1 with
        none)."""
        records = list(records)
        within = sum(1 for r in records if r.ok and not any(self.late(r.ttft_s, r.tpot_s)))
        return within / len(records) if records else 1.0

    # ---- one run -------------------------------------------------------------------------------
    def ratios(self, summary: _Summary, goodput_share: float | None = None) -> dict[str, float]:
        """Each term as observed / allowed (> 1: missed): a run with no first token at all misses
        TTFT, one with requests still in flight at the horizon misses `timeouts`; `goodput` (the
        share of requests outside the targets against 1 - `goodput_share`) only when a share is
        required."""
        ttft, tpot = summary.ttft_p99_s, summary.tpot_p99_s
        ratios = {
            "slo_ttft": NEVER if ttft is None else ttft / self.ttft_p99_s,
            "slo_tpot": 0.0 if tpot is None else tpot / self.tpot_p99_s,
            "timeouts": NEVER
            if summary.in_flight
            else ratio(summary.abandon_rate, self.max_abandon_rate),
        }
        if goodput_share is not None:
            ratios["goodput"] = ratio(1.0 - summary.slo_attainment, 1.0 - goodput_share)
        return ratios

    @staticmethod
    def missed(ratios: dict[str, float]) -> list[str]:
        """The terms missed (ratio > 1), in the ratios' order."""
        return [term for term, value in ratios.items() if value > 1.0]

    def verdict(self, summary: _Summary, goodput_share: float | None = None) -> bool:
        """True when the run meets every term (the summary's `meets_slo`)."""
        return not self.missed(self.ratios(summary, goodput_share))

    @staticmethod
    def binding(ratios: dict[str, float], among: Iterable[str] | None = None) -> str | None:
        """The term closest to (or furthest past) its limit: the largest ratio, among `among` when
        given; None when there is no ratio."""
        terms = list(ratios) if among is None else list(among)
        return max(terms, key=lambda term: ratios.get(term, 0.0)) if terms else None

    # ---- early stop ----------------------------------------------------------------------------
    def miss_limits(
        self, total_requests: int, goodput_share: float | None = None
    ) -> dict[str, float]:
        """Per term, how many requests may fail it before the miss is certain whatever the requests
        still open do: for a P99, 1% of all requests (+2, for the percentile's interpolation); for
        the abandon rate and goodput, the share they allow of all requests."""
        p99_limit = 0.01 * total_requests + 2
        limits = {
            "slo_ttft": p99_limit,
            "slo_tpot": p99_limit,
            "timeouts": self.max_abandon_rate * total_requests,
        }
        if goodput_share is not None:
            limits["goodput"] = (1.0 - goodput_share) * total_requests
        return limits
