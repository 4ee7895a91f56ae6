"""What a plan is asked: a `Scenario` (traffic, model, SLO, prices, clients) plus the planner's own
settings — candidate GPUs and tensor-parallel degrees, the replica range, the batch-settings grid and
which comparisons to run.

A plan file is a scenario file with an optional top-level `plan:` section; without it the planner
searches the scenario's own GPU. The scenario part stays a plain `Scenario`, so every scenario the
planner writes back (`recommended_scenario`, `one_fewer_scenario`) re-runs with `surgeplan simulate`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine.core.config import KVCacheDtype, SchedulerConfig
from engine.settings_file import read_mapping
from simulator.errors import PlanError
from simulator.scenario import Scenario, describe_errors

PLAN_FILE = (
    "a scenario YAML or JSON file (a mapping of scenario fields), with an optional plan: section"
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Candidate(_Strict):
    gpu: str = Field(
        description="GPU from the hardware catalog (A100-80GB, H100-80GB, H200-141GB, L40S, ...)"
    )
    tensor_parallel: int | None = Field(
        None,
        ge=1,
        le=64,
        description="GPUs per replica (default: the "
        "smallest of 1, 2, 4, 8 at which the model fits)",
    )


class BatchGrid(_Strict):
    """The fixed batch settings searched at each fleet size; the engine's own field definitions."""

    max_num_seqs: list[int] = Field(
        [128, 256], min_length=1, description="values of the engine's max_num_seqs"
    )
    max_num_batched_tokens: list[int] = Field(
        [2048, 8192], min_length=1, description="values of the engine's max_num_batched_tokens"
    )
    kv_cache_dtype: list[KVCacheDtype] = Field(
        ["auto"],
        min_length=1,
        description="values of the engine's kv_cache_dtype (auto, fp8, fp8_e4m3, fp8_e5m2, int8)",
    )

    @model_validator(mode="after")
    def _bounds(self) -> BatchGrid:
        for name in ("max_num_seqs", "max_num_batched_tokens"):
            for value in getattr(self, name):  # each value through the engine's own bound
                try:
                    SchedulerConfig(**{name: value})
                except ValidationError as error:
                    raise ValueError(f"batch.{name}: {describe_errors(error)}") from None
        return self


class PlanSettings(_Strict):
    candidates: list[Candidate] = Field(
        default_factory=list,
        description="GPU types to compare (default: the scenario's own hardware)",
    )
    min_replicas: int = Field(1, ge=1, description="smallest fleet searched")
    max_replicas: int | None = Field(
        None,
        ge=1,
        le=10000,
        description="largest fleet searched (default: the "
        "scenario's autoscaler.max_replicas when enabled, else 64)",
    )
    batch: BatchGrid = BatchGrid()
    goodput_share: float | None = Field(
        None,
        gt=0,
        le=1,
        description="also require this share of requests to "
        "finish within both the TTFT and TPOT targets",
    )
    fast_pass: bool = Field(
        True,
        description="bracket each answer with one replica's share of the traffic "
        "before full-fleet simulations",
    )
    confirm: Literal["all", "recommendation"] = Field(
        "all",
        description="full-fleet confirmation and "
        "one-fewer check for every GPU type, or the winner only",
    )
    early_stop: bool = Field(
        True, description="stop a simulation as soon as its SLO miss is certain"
    )
    whole_fleet: bool = Field(
        True,
        description="confirm an answer found on a sample (fleets above 256 replicas) on its "
        "whole fleet, simulated in parts over the workers (round robin: its replicas are "
        "independent), stepping up while it misses",
    )
    uncertainty: bool = Field(
        True, description="re-check the answer with step times ± the calibration's error"
    )
    assumed_error: float = Field(
        0.3,
        gt=0,
        lt=1,
        description="relative step-time error assumed for a "
        "calibration with no measured error (roofline estimates)",
    )
    static_baseline: bool = Field(
        True, description="also size a traditional (static batching) server"
    )
    autoscaled: bool = Field(
        True, description="also size an autoscaled fleet: the warm pool that holds the SLO"
    )
    dynamic_batch: bool = Field(
        True, description="also size the fleet with the SLO-aware batch controller"
    )
    kv_cache_dtypes: list[KVCacheDtype] = Field(
        default_factory=list,
        description="also size the fleet with "
        "each of these KV cache dtypes (e.g. [auto, fp8, int8]: does "
        "FP8 KV help?), beside their measured quality cost",
    )
    batch_target_tpot_s: float | None = Field(
        None,
        gt=0,
        description="the SLO-aware batch controller's "
        "target time per output token (default: 0.8 x the SLO's P99 TPOT)",
    )

    @model_validator(mode="after")
    def _range(self) -> PlanSettings:
        if self.max_replicas is not None and self.min_replicas > self.max_replicas:
            raise ValueError(
                f"min_replicas={self.min_replicas} > max_replicas={self.max_replicas}; "
                "expected min ≤ max"
            )
        return self

    def replica_range(self, scenario: Scenario) -> tuple[int, int]:
        autoscaler = scenario.cluster.autoscaler
        high = self.max_replicas or (autoscaler.max_replicas if autoscaler.enabled else 64)
        if self.min_replicas > high:
            raise PlanError(
                f"plan.min_replicas={self.min_replicas} > the largest fleet searched ({high}); "
                "expected plan.max_replicas ≥ plan.min_replicas"
            )
        return self.min_replicas, high

    def candidate_list(self, scenario: Scenario) -> list[Candidate]:
        if self.candidates:
            return list(self.candidates)
        return [
            Candidate(gpu=scenario.hardware.gpu, tensor_parallel=scenario.hardware.tensor_parallel)
        ]


# The `answer` profile: the recommendation alone, confirmed on full fleets with one replica less, no
# comparisons (error bars, static baseline, autoscaled fleet, dynamic batch); the dashboard's first answer,
# the shipped-scenario test's and the planner benchmark's. `settings.model_copy(update=ANSWER_ONLY)`.
ANSWER_ONLY = dict(
    confirm="recommendation",
    uncertainty=False,
    static_baseline=False,
    autoscaled=False,
    dynamic_batch=False,
)


def load_plan(path: str | Path) -> tuple[Scenario, PlanSettings]:
    """A scenario file, with an optional `plan:` section; a bad field is named with its path."""
    path = Path(path)
    try:
        data = read_mapping(path, PLAN_FILE)
    except ValueError as error:
        raise PlanError(str(error)) from None
    plan_data = data.pop("plan", None) or {}
    try:
        settings = PlanSettings.model_validate(plan_data)
    except ValidationError as error:
        raise PlanError(f"{path}: {_describe_plan_errors(error)}") from None
    try:
        scenario = Scenario.from_file_data(data, path)
    except ValueError as error:
        raise PlanError(str(error)) from None
    return scenario, settings


def _describe_plan_errors(error: ValidationError) -> str:
    """`plan.max_replicas: Input should be ...` per bad field, as `describe_errors` does for the scenario."""
    lines = []
    for item in error.errors():
        where = ".".join(["plan", *(str(part) for part in item["loc"])])
        got = f" (got {item['input']!r})" if item["loc"] else ""
        lines.append(f"{where}: {item['msg'].removeprefix('Value error, ')}{got}")
    return "; ".join(lines)
