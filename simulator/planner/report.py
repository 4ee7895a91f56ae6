"""The plan's answer as typed structs: `PlanReport` and its parts, one dataclass per block of
`plan.json` (`surgeplan plan --json`), each field named with its unit.

`to_json()` writes the JSON keys the answer always had (a block's dataclass field is its key, in the
same order), so saved plans and scripts reading the CLI's JSON keep working; `PlanReport.from_json`
reads them back (a file written before a block existed reads with that block None). Code reads
attributes (`report.recommendation.cost_per_hour_usd`): a renamed field fails where it is read, not
on a page. Figures a block does not have for a row (a GPU that does not fit has no cost) are None.

Mappings keyed by data stay dicts: the calibration's facts (`calibration`: name, label, fit error),
the measured KV quality row, SLO ratios per term, a fleet's batch grid, and the two scenarios (each
a complete scenario's JSON, re-checkable with `surgeplan simulate`).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any


@dataclass(kw_only=True)
class TrafficFacts:
    """The traffic planned for: its size, and its mean and peak rate (peak over `peak_window_s`)."""

    requests: int
    duration_s: float
    mean_rate_per_s: float
    peak_rate_per_s: float
    peak_window_s: float


@dataclass(kw_only=True)
class PlanSLO:
    """The SLO the plan holds the fleet to, and the goodput share it asks of every candidate."""

    ttft_p99_s: float
    tpot_p99_s: float
    max_abandon_rate: float
    goodput_share: float | None = None


@dataclass(kw_only=True)
class GpuRow:
    """One candidate GPU type (at its tensor-parallel degree): its cheapest fleet when it `meets`,
    else why not (`status` `exceeds_max_fleet`, `does_not_fit`, ..., with `reason`)."""

    gpu: str
    tensor_parallel: int
    replicas: int | None = None
    gpus: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    kv_cache_dtype: str | None = None
    calibration: dict | None = None
    kv_blocks_per_replica: int | None = None
    price_usd_per_gpu_hour: float | None = None
    batch_grid: list[dict] | None = None
    status: str
    reason: str | None = None
    cost_per_hour_usd: float | None = None
    cost_per_request_usd: float | None = None
    cost_per_million_output_tokens_usd: float | None = None
    gpu_hours: float | None = None
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None
    abandon_rate: float | None = None
    checked_by: str | None = None
    binding_constraint: str | None = None
    binding_checked_by: str | None = None
    headroom: float | None = None
    headroom_term: str | None = None
    slo_ratios: dict[str, float] | None = None


@dataclass(kw_only=True)
class Recommendation:
    """The cheapest fleet that holds the SLO, in one `sentence` and in figures."""

    gpu: str
    tensor_parallel: int
    replicas: int
    gpus: int
    max_num_seqs: int
    max_num_batched_tokens: int
    cost_per_hour_usd: float
    cost_per_request_usd: float | None = None
    cost_per_million_output_tokens_usd: float | None = None
    gpu_hours: float | None = None
    binding_constraint: str | None = None
    headroom: float | None = None
    headroom_term: str | None = None
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None
    abandon_rate: float | None = None
    calibration: dict | None = None
    one_fewer_misses: bool | None = None
    checked_by: str | None = None  # what simulated the answer: the full fleet, a sample, a share
    binding_checked_by: str | None = None
    replicas_if_slower: int | None = None
    sentence: str = ""


@dataclass(kw_only=True)
class Verdict:
    """How the fleet one replica smaller fared: what it misses, by how much."""

    status: str
    reasons: list[str]
    binding: str | None = None
    ratios: dict[str, float] = field(default_factory=dict)
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None
    early_stop_s: float | None = None


@dataclass(kw_only=True)
class Uncertainty:
    """The answer re-checked with step times `step_time_error` slower and faster."""

    step_time_error: float
    source: str
    replicas_if_slower: int | None = None
    replicas_if_faster: int | None = None
    text: str = ""


@dataclass(kw_only=True)
class FleetSummary:
    """A comparison's fleet (the traditional server, a KV cache dtype, the SLO-aware batch size): the
    fewest replicas that hold the SLO (None: none up to `searched_up_to`), its cost and P99s."""

    replicas: int | None
    gpus: int | None
    searched_up_to: int
    policy: str
    batch_controller: str
    max_num_seqs: int
    max_num_batched_tokens: int
    cost_per_hour_usd: float | None = None
    cost_per_request_usd: float | None = None
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None
    status: str = "misses"
    reasons: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class KvCacheRow(FleetSummary):
    """ "Does FP8 KV help?": the fleet with this KV cache dtype beside its measured quality cost."""

    kv_cache_dtype: str
    kv_blocks_per_replica: int | None = None
    quality: dict | None = None


@dataclass(kw_only=True)
class BestFixed:
    """The recommendation's figures the SLO-aware batch size is compared with."""

    replicas: int | None = None
    gpus: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    cost_per_request_usd: float | None = None
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None


@dataclass(kw_only=True)
class DynamicBatch(FleetSummary):
    """The SLO-aware batch size controller's fleet, beside the best fixed batch setting."""

    batch_target_tpot_s: float | None = None
    best_fixed: BestFixed | None = None


@dataclass(kw_only=True)
class Autoscaled:
    """The smallest warm pool (None: none holds the SLO) an autoscaler grows from, against the
    fixed fleet over the same run."""

    warm_pool: int | None
    max_replicas: int
    meets: bool
    replicas_peak: int | None = None
    cost_usd: float | None = None
    cost_per_hour_usd: float | None = None
    cost_per_request_usd: float | None = None
    ttft_p99_s: float | None = None
    fixed_cost_usd: float | None = None
    fixed_cost_per_request_usd: float | None = None
    saved_usd: float | None = None
    saved_share: float | None = None
    cold_start_s: float | None = None
    reasons: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class Simulations:
    """How much the search simulated: evaluations, fresh simulations, cache hits, on what backend."""

    evaluated: int
    simulated: int
    from_cache: int
    backend: str


@dataclass(kw_only=True)
class PlanReport:
    """The plan's whole answer (`plan.json`)."""

    recommendation: Recommendation
    recommended_scenario: dict
    one_fewer_scenario: dict | None
    one_fewer: Verdict | None
    per_gpu_type: list[GpuRow]
    traffic: TrafficFacts
    slo: PlanSLO
    replica_range: list[int]
    uncertainty: Uncertainty | None = None
    static_baseline: FleetSummary | None = None
    autoscaled: Autoscaled | None = None
    dynamic_batch: DynamicBatch | None = None
    kv_cache_dtypes: list[KvCacheRow] = field(default_factory=list)
    simulations: Simulations | None = None
    elapsed_s: float | None = None

    def to_json(self) -> dict:
        """The JSON object `plan.json` holds: the keys of the fields, nested blocks as objects."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> PlanReport:
        """A report from `to_json()`'s object (or a `plan.json` written by an earlier version)."""
        return _build(cls, data, "plan")


def _build(cls: type, data: Any, where: str) -> Any:
    """`data` (parsed JSON) as an instance of `cls`: dataclasses field by field, lists item by item;
    an unknown key is an error naming where it is and the keys accepted."""
    if not isinstance(data, dict):
        raise ValueError(
            f"{where} is {type(data).__name__}; expected a JSON object for {cls.__name__}"
        )
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {unknown}; expected keys among {sorted(names)} ({cls.__name__})"
        )
    return cls(**{key: _value(hints[key], value, f"{where}.{key}") for key, value in data.items()})


def _value(hint: Any, value: Any, where: str) -> Any:
    if value is None:
        return None
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        inner = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return _value(inner[0], value, where) if len(inner) == 1 else value
    if typing.get_origin(hint) is list:
        (item,) = typing.get_args(hint) or (Any,)
        return [_value(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, where)
    return value
