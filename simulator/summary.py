"""The simulation's summary as typed structs: `RequestSummary` (what a run's requests did, also kept
per tenant) and `SimSummary` (that, plus the KV, SLO and cost figures only a simulation knows).

Every field carries its unit in its name, and its name is the JSON key it is written under
(`as_dict()`), so files and the planner's outcomes keep the keys they always had while code reads
attributes: a renamed field fails where it is read, not on a page.

How to add a field (e.g. `kv_transfer_bytes`):
1. declare it here, in `SimSummary` (or `RequestSummary` if a tenant's row should have it too), with
   its unit in the name and a default (`kv_transfer_bytes: int = 0`, or `None` where "not measured"
   must differ from zero), so code that builds a summary without it still runs; fields are
   keyword-only, so where it goes in the class is free (its place is its place in the JSON);
2. fill it in `simulator.result.summarize` (the one builder);
3. if the planner should carry it in its outcomes, add it to `OutcomeSummary` in
   `simulator.planner.outcome` too (and bump `OUTCOME_VERSION` there).
A group of figures that belongs together (a run's cpu and wall time, hit rates per KV tier) can be
one field holding its own small dataclass: `as_dict()` writes it as a nested JSON object.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from simulator.slo import SLO
from traces.replay import RequestRecord
from traces.replay_summary import flat_summary


@dataclass(kw_only=True)
class RequestSummary:
    """What a run's requests did (`traces.replay_summary.flat_summary`, shared with live replays)
    and how they fared against the SLO. Seconds; None when no request had the value."""

    requests: int
    completed: int
    timed_out: int
    rejected: int
    failed: int
    in_flight: int
    retries: int
    duration_s: float
    throughput_rps: float
    output_tokens_per_s: float
    ttft_mean_s: float | None
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    tpot_mean_s: float | None
    tpot_p50_s: float | None
    tpot_p99_s: float | None
    e2e_mean_s: float | None
    e2e_p50_s: float | None
    e2e_p99_s: float | None
    queue_mean_s: float | None
    queue_p99_s: float | None
    preemptions: int
    abandon_rate: float = 0.0  # share of requests timed out or rejected
    slo_attainment: float = 1.0  # share finished within both the TTFT and TPOT targets

    @classmethod
    def of(
        cls, records: list[RequestRecord], end_s: float, slo: SLO, **fields: Any
    ) -> RequestSummary:
        """The summary of `records` over a run that ended at `end_s`, with `fields` (a subclass's
        own)."""
        flat = flat_summary(records, end_s)
        abandoned = flat["timed_out"] + flat["rejected"]
        return cls(
            **flat,
            abandon_rate=abandoned / len(records) if records else 0.0,
            slo_attainment=slo.attainment(records),
            **fields,
        )

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The JSON keys, in order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    def as_dict(self) -> dict[str, Any]:
        """The JSON object: one key per field, nested dataclasses as objects."""
        return dataclasses.asdict(self)

    # Transitional: code written against the old dict (other branches, notebooks) still reads
    # `summary["ttft_p99_s"]`; new code reads attributes. An unknown key is a KeyError as before.
    def __getitem__(self, key: str) -> Any:
        if key not in self._names():
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self._names() else default

    _NAMES: ClassVar[dict[type, frozenset[str]]] = {}

    @classmethod
    def _names(cls) -> frozenset[str]:
        if cls not in RequestSummary._NAMES:
            RequestSummary._NAMES[cls] = frozenset(cls.keys())
        return RequestSummary._NAMES[cls]


@dataclass(kw_only=True)
class SimSummary(RequestSummary):
    """A simulated run: its requests (as a live replay's), KV use, the SLO verdict, fleet and
    cost."""

    kv_utilization: float | None  # tokens stored / token slots reserved, time-weighted
    kv_usage_peak: float  # highest share of KV blocks in use in any window
    block_allocations: int
    prefix_hit_rate: float  # prompt blocks found cached / looked up
    meets_slo: bool
    replicas_peak: int
    gpu_hours: float
    cost_usd: float
    cost_per_request_usd: float | None
    cost_per_million_output_tokens_usd: float | None
    simulated_s: float  # the simulated clock at the end
    # (the CPU and wall time a run took are not results: `SimResult.run`)
    # KV tiers (engine.core.host_tier): prompt tokens served from the GPU prefix cache / from host memory
    prefix_hit_rate_gpu: float = 0.0
    prefix_hit_rate_cpu: float = 0.0
    cpu_kv_loaded_blocks: int = 0
    cpu_kv_stored_blocks: int = 0
    # prefill-to-decode KV transfers of a disaggregated cluster (0 / None when co-located)
    kv_transfer_bytes: int = 0
    kv_transfers: int = 0
    kv_transfer_mean_s: float | None = None
    kv_transfer_p99_s: float | None = None
    kv_transfer_wait_mean_s: float | None = None
    prefill_gpus_peak: int | None = None
    # Splitwise's mixed pool (simulator.cluster.mixed_pool; 0 when off): requests served whole on a
    # decode replica, requests decoded on their prefill replica, machines moved into the mixed pool
    mixed_pool_whole_requests: int = 0
    mixed_pool_kept_requests: int = 0
    mixed_pool_moves: int = 0
    decode_gpus_peak: int | None = None
