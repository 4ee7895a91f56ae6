"""The calibration file: what was timed (or fitted, or derived), on what (`device_info`), and the
cost-model terms that came out of it. Every number carries its label: `measured`, `fitted` or
`derived`."""

import datetime as dt
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticUndefined

from engine.core.config import CacheConfig, SchedulerConfig, WeightDtype, setting
from engine.core.step_shape import StepShape
from simulator.calibration.all_reduce_curve import AllReduceCurve
from simulator.calibration.device_info import DeviceInfo, SoftwareInfo
from simulator.model_spec import ModelSpec

SCHEMA_VERSION = 1
SHIPPED_DIR = Path(__file__).parent / "calibrations"

Label = Literal["measured", "fitted", "derived"]
# What limits a term: tells a derivation for other hardware which ratio to scale it by.
Bound = Literal["host", "memory", "compute", "latency", "network"]
# What a term's `seconds_per_unit` multiplies (see simulator.calibration.cost_model.feature_value).
Feature = Literal[
    "step",
    "gemm_step",
    "gemv_extra_token",
    "sequence",
    "token",
    "token_above_knee",
    "token_above_spill",
    "prefill_attention_pair",
    "decode_context_token",
    "decode_step",
    "decode_sequence",
    "prefill_step",
    "prefill_token",
    "all_reduce_curve",
]
PointKind = Literal["prefill", "prefill_cached", "decode", "mixed"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CostTerm(_Strict):
    name: str
    feature: Feature
    seconds_per_unit: float = Field(ge=0)
    bound: Bound
    label: Label
    note: str = ""


class FitError(_Strict):
    """How well the terms reproduce what they were fitted on (fractions, not percent)."""

    target: str = Field(description="the quantity fitted, e.g. 'engine step time'")
    num_points: int = Field(ge=0)
    mape_train: float = Field(ge=0)
    mape_cross_validated: float | None = Field(default=None, ge=0)
    max_ape: float = Field(ge=0)
    folds: int = Field(default=0, ge=0)
    note: str = ""


class DtypeTerms(_Strict):
    """Terms fitted on another dtype's measured kernels, as the model-dtype ones they replace (by
    name): decode attention for a KV cache in that dtype (`kv_cache_dtype`, `kv_cache.py`)."""

    replaces: list[str] = Field(min_length=1, description="names of the terms these replace")
    terms: list[CostTerm] = Field(min_length=1)
    fit_errors: list[FitError] = []

    def swapped_into(self, terms: list[CostTerm], owner: str) -> list[CostTerm]:
        """`terms` with the ones these replace swapped for these; `owner` names them in the error."""
        missing = set(self.replaces) - {term.name for term in terms}
        if missing:
            raise ValueError(f"{owner} replace {sorted(missing)}, terms it does not have")
        return self.terms + [term for term in terms if term.name not in self.replaces]


class WeightDtypeTerms(DtypeTerms):
    """The linear layers' terms for weights stored in another dtype (fp8), fitted on its measured
    GEMMs, with their own knee and tile; what `weight_dtype` selects (`weight_dtype.py`)."""

    knee_tokens: float = Field(ge=0)
    knee_label: Label
    tile_tokens: int = Field(default=1, ge=1)


class CostModelFit(_Strict):
    """The terms of the step-time model and the token count where linear layers turn compute-bound."""

    knee_tokens: float = Field(ge=0)
    knee_label: Label
    tile_tokens: int = Field(
        default=1, ge=1, description="GEMM tile: above the knee, tokens count in whole tiles"
    )
    spill_tokens: float | None = Field(
        default=None,
        ge=0,
        description="tokens beyond which activations spill "
        "out of cache and each token costs more; None: never",
    )
    gemm_switch_tokens: int = Field(
        default=2,
        ge=2,
        description="from this many tokens on, linear layers run "
        "matrix-matrix kernels; below it, one matrix-vector pass per token",
    )
    terms: list[CostTerm]
    fit_errors: list[FitError] = []
    weight_dtype_terms: dict[WeightDtype, WeightDtypeTerms] = Field(
        default_factory=dict,
        description="linear-layer terms per weight_dtype other than the model's, fitted on that "
        "dtype's measured GEMMs (fp8); a weight_dtype missing here is refused, never guessed",
    )
    all_reduce_curve: AllReduceCurve | None = Field(
        default=None,
        description="the measured all-reduce times a term of feature 'all_reduce_curve' reads "
        "(aiconfigurator's tables); None: no such term",
    )
    kv_cache_dtype_terms: dict[str, DtypeTerms] = Field(
        default_factory=dict,
        description="decode terms per KV-cache dtype fitted on its measured kernels (fp8); another "
        "dtype's KV read is scaled by its bytes (derived)",
    )

    def with_floor_moved(self, memory_ratio: float, compute_ratio: float) -> "CostModelFit":
        """The fit with its knee moved for memory-bound terms scaled by `memory_ratio` and
        compute-bound ones by `compute_ratio`: below the knee the linear layers' time (compute time
        per token x knee) is the weight-read floor, so it must follow the memory-bound scale, and a
        roofline's knee sits where the scaled floor meets the scaled compute time. The GEMM tile
        shrinks with it so that, as in the fit, the floor and not a partial tile rules small batches.
        Only the knee and tile change: scaling the terms is the caller's."""
        knee = self.knee_tokens * memory_ratio / compute_ratio
        tile = self.tile_tokens
        while tile > max(1.0, knee):
            tile //= 2
        return self.model_copy(update={"knee_tokens": knee, "tile_tokens": tile})


class ShapeRecord(_Strict):
    prefill_chunks: list[tuple[int, int]] = []
    decode_context_lens: list[int] = []

    @classmethod
    def of(cls, shape: StepShape) -> "ShapeRecord":
        return cls(
            prefill_chunks=list(shape.prefill_chunks),
            decode_context_lens=list(shape.decode_context_lens),
        )

    def to_shape(self) -> StepShape:
        return StepShape(
            prefill_chunks=tuple(tuple(chunk) for chunk in self.prefill_chunks),
            decode_context_lens=tuple(self.decode_context_lens),
        )


class StepSample(_Strict):
    """One timed `engine.step()`: its shape and where its wall time went."""

    shape: ShapeRecord
    total_s: float = Field(ge=0)
    schedule_s: float = Field(ge=0)
    prepare_s: float = Field(ge=0)
    forward_s: float = Field(ge=0)
    sample_s: float = Field(ge=0)
    cpu_s: float | None = Field(
        default=None, ge=0, description="process CPU time of the step, all threads"
    )

    @property
    def host_s(self) -> float:
        return max(0.0, self.total_s - self.forward_s)


class ProfilePoint(_Strict):
    """Repeats of one grid point; the representative shape is that of the median repeat."""

    kind: PointKind
    label: Label = "measured"
    shape: ShapeRecord
    samples: list[StepSample] = Field(min_length=1)

    @property
    def totals(self) -> list[float]:
        return [sample.total_s for sample in self.samples]

    @property
    def median_total_s(self) -> float:
        return _median(self.totals)

    @property
    def min_total_s(self) -> float:
        return min(self.totals)

    def statistic_s(self, statistic: str) -> float:
        """The repeats summarised as `median` wall time (default), `min` wall time, or `cpu`: the
        median process CPU time, which other jobs on a shared host cannot inflate (meaningful for a
        single-threaded CPU engine only)."""
        if statistic == "median":
            return self.median_total_s
        if statistic == "min":
            return self.min_total_s
        if statistic == "cpu" and all(sample.cpu_s is not None for sample in self.samples):
            return _median([sample.cpu_s for sample in self.samples])
        raise ValueError(
            f"statistic {statistic!r} is unknown or unrecorded; expected 'median', 'min' or 'cpu'"
        )

    @property
    def median_forward_s(self) -> float:
        return _median([sample.forward_s for sample in self.samples])

    @property
    def median_host_s(self) -> float:
        return _median([sample.host_s for sample in self.samples])

    @property
    def spread(self) -> float:
        """(max - min) / median of the repeats: how noisy this point is."""
        totals = self.totals
        return (max(totals) - min(totals)) / max(self.median_total_s, 1e-12)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


class EngineSettings(_Strict):
    """The engine settings the points were measured under (definitions from `engine.core.config`)."""

    block_size: int = setting(CacheConfig, "block_size", default=PydanticUndefined)
    max_num_seqs: int = setting(SchedulerConfig, "max_num_seqs", default=PydanticUndefined)
    max_num_batched_tokens: int = setting(
        SchedulerConfig, "max_num_batched_tokens", default=PydanticUndefined
    )
    max_model_len: int = setting(SchedulerConfig, "max_model_len", default=PydanticUndefined)
    enable_prefix_caching: bool = setting(CacheConfig, "enable_prefix_caching", default=False)
    load_format: str = "dummy"


class Provenance(_Strict):
    source: str
    method: str
    notes: list[str] = []
    # The serving stack whose kernels were timed (vllm / sglang / trtllm) and its version, so an
    # engine profile can be matched to the calibration; and the source database's mode.
    backend: str | None = None
    backend_version: str | None = None
    database_mode: str | None = None


class Calibration(_Strict):
    schema_version: int = SCHEMA_VERSION
    name: str
    label: Label
    created_at: str = Field(
        default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    )
    device: DeviceInfo
    software: SoftwareInfo | None = None
    model: ModelSpec
    dtype: str
    block_size: int = Field(default=16, ge=1)
    engine: EngineSettings | None = None
    points: list[ProfilePoint] = []
    cost_model: CostModelFit | None = None
    provenance: Provenance

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.model_dump_json(indent=1) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Calibration":
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise ValueError(f"{path}: cannot read calibration JSON ({error})") from error
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(
                f"{path}: schema_version is {data.get('schema_version')!r}; expected {SCHEMA_VERSION}"
            )
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            raise ValueError(f"{path}: not a valid calibration: {error}") from error


def shipped_calibration_paths() -> list[Path]:
    return sorted(SHIPPED_DIR.glob("*.json"))


def load_shipped(name: str) -> Calibration:
    """A shipped calibration by file stem or by its `name` field."""
    for path in shipped_calibration_paths():
        if path.stem == name:
            return Calibration.load(path)
    for path in shipped_calibration_paths():
        calibration = Calibration.load(path)
        if calibration.name == name:
            return calibration
    names = [path.stem for path in shipped_calibration_paths()]
    raise ValueError(
        f"calibration {name!r} is not shipped; expected one of {names} or a path to a JSON file"
    )


def resolve_calibration(name_or_path: str | Path) -> Calibration:
    path = Path(name_or_path)
    if path.suffix == ".json" or path.exists():
        return Calibration.load(path)
    return load_shipped(str(name_or_path))
