"""Engine profiles: the serving stack's own time per step, on top of the GPU calibration's kernel time.

A calibration is the kernel model of one GPU x model x TP (GEMMs, attention, communication). A serving
stack adds host work around those kernels: scheduling, input preparation, sampling, detokenisation,
output handling. It scales per step, per scheduled sequence, per prefill token and per output token,
and part of it overlaps the GPU (vLLM V1 schedules step n+1 while step n runs; V0 does not). With
`host_s` the host time of a step and `overlap` the share of it hidden under the GPU:

    step_s = max(gpu_s, overlap x host_s) + (1 - overlap) x host_s

Each term carries its label (`measured`, `fitted`, `derived`) and its source. Profiles are JSON files
in `simulator/calibration/profiles/`; `surgeplan calibrations profiles` lists them, and `surgeplan
validate --published` reports each one's error on public measurements it was and was not fitted on
(`errors`, written back by the fit; `profile_errors.py`, with the planner's band read from them). A
calibration measured on our own engine (`surgeplan profile`) already contains that engine's host
time, so the default profile for it is `surgeplan`, whose terms are only the systematic gap between
live and profiled steps.
The cost model that applies a profile to a calibration is `profiled_cost_model.py`; the host terms
and what each multiplies are `host_terms.py`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine.core.step_shape import StepShape
from simulator.calibration.fp8_small_batch import Fp8Reference
from simulator.calibration.host_terms import (
    HOST_FEATURES,
    NOT_PER_STEP,
    HostTerm,
    eager_units,
    units_of,
)
from simulator.calibration.profile_errors import ProfileError, held_out
from simulator.calibration.profiled_cost_model import host_seconds, wall_s
from simulator.calibration.schema import Calibration, Label
from simulator.calibration.stack_memory import StackMemory
from simulator.hardware.catalog import load_catalog

PROFILES_DIR = Path(__file__).parent / "profiles"
DEFAULT_PROFILE = "vllm-v1"
OWN_ENGINE_PROFILE = "surgeplan"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SourceEra(_Strict):
    """The kernel era one published source's stack ran, where it is not the one the profile stands
    for: on `tables_gpus` the kernel tables' own (recent) GEMMs rather than the profile's
    `kernel_era_scales`; on `older_gpus` the older GEMMs of `older_era_scales` although the profile
    stands for the tables (TensorRT-LLM 0.x against tables timed on 1.x); with why."""

    tables_gpus: list[str] = []
    older_gpus: list[str] = []
    source: str


class EngineProfile(_Strict):
    name: str
    engine: str = Field(description="the serving stack, e.g. 'vLLM'")
    versions: str = Field(description="the versions the profile stands for, e.g. '>= 0.8'")
    description: str = ""
    overlap: float = Field(ge=0, le=1, description="share of host time hidden under the GPU's time")
    overlap_label: Label
    overlap_source: str
    terms: list[HostTerm] = []
    kernel_scale: float = Field(
        1.0,
        gt=0,
        description="live kernel time / calibrated kernel time for the same "
        "shapes (1: the calibration's steps are the live engine's)",
    )
    kernel_scale_source: str = "none: the calibration's kernel time as it is"
    kernel_backend: str | None = Field(
        None,
        description="whose kernels the stack runs ('vllm', 'sglang', 'trtllm'): the simulator "
        "prefers a calibration measured on that backend's kernels, and applies `kernel_scale` and "
        "`kernel_scale_by_bound` only to calibrations of another backend's kernels",
    )
    kernel_scale_by_bound: dict[Literal["memory", "compute", "latency"], float] = Field(
        {},
        description="this stack's kernel time over the calibration's, per kind of kernel term "
        "(memory-bound, compute-bound, latency floors): a stack may stream KV and weights at a "
        "different share of peak bandwidth than it reaches of peak FLOPs (1 where absent)",
    )
    kernel_era_scales: dict[str, float] = Field(
        {},
        description="per GPU: this stack's linear-layer time over its own backend's kernel tables "
        "(a stack older than the tables runs older GEMMs; see `kernel_era`); applied only to "
        "calibrations of this backend's tables (a backend version named), 1 where absent",
    )
    kernel_era_source: str = "none: the tables' linear-layer time as it is"
    older_era_scales: dict[str, float] = Field(
        {},
        description="per GPU: an older stack's linear-layer time over this backend's kernel tables, "
        "for a profile that stands for the tables (derived like `kernel_era_scales`); applied only "
        "for published sources whose `source_eras` entry names the GPU in `older_gpus`",
    )
    older_era_source: str = "none: no older era"
    fp8_linear_scales: dict[str, float] = Field(
        {},
        description="per GPU: this stack's fp8 linear-layer time up to the knee (small batches) over "
        "its own backend's fp8 GEMM tables, each token beyond the knee at the tables' cost "
        "(`fp8_small_batch.SmallBatchFp8`: the tables' small-batch fp8 GEMMs are slower than the "
        "stack's served decode steps allow, their large-batch ones already near the chip's peak); "
        "fitted on published fp8 runs, applied only to calibrations of this backend's tables with "
        "fp8 weights, 1 where absent",
    )
    fp8_linear_source: str = "none: the tables' fp8 linear-layer time as it is"
    fp8_large_batch_scales: dict[str, float] = Field(
        {},
        description="per GPU: this stack's fp8 linear-layer time per token beyond the knee (prefill "
        "chunks, large batches) over its own backend's fp8 GEMM tables (`SmallBatchFp8`); fitted "
        "on published fp8 runs with first-token times, this GPU's own only (never carried to "
        "another GPU), applied like `fp8_linear_scales`, 1 where absent",
    )
    fp8_large_batch_source: str = "none: the tables' fp8 time beyond the knee as it is"
    graph_steps: Literal["every", "decode_only"] = Field(
        "every",
        description="the steps the stack replays as CUDA graphs, which skip the fixed cost per "
        "GEMM that aiconfigurator's tables pay and `fp8_linear_scales` takes off: every step, or "
        "decode_only (TensorRT-LLM's PyTorch executor and SGLang graph generation-only "
        "iterations; a step with a prompt in it runs eagerly, keeps the tables' time below the "
        "knee and pays the `eager_layer` term)",
    )
    graph_steps_source: str = "none: every step takes the fp8 small-batch scale"
    graph_max_tokens: int | None = Field(
        None,
        gt=0,
        description="the largest step, in scheduled tokens, the stack captures as a CUDA graph (a "
        "decode batch's tokens are its sequences): a larger step runs eagerly and pays the "
        "`eager_layer` term (SGLang 0.4 captures decode batches of 1-160; vLLM's capture list stops "
        "at 512 tokens); None: no such limit",
    )
    graph_max_tokens_source: str = "none: every step of any size replays a graph"
    graph_tokens_per_max_seq: int | None = Field(
        None,
        gt=0,
        description="where the stack sizes its capture list by the scheduler's max_num_seqs: the "
        "largest graph is min(this x max_num_seqs, graph_max_tokens) (vLLM 0.9-0.11: 2); None: "
        "graph_max_tokens whatever max_num_seqs",
    )
    fp8_linear_reference: dict[str, Fp8Reference] = Field(
        {},
        description="per GPU of `fp8_linear_scales`: the model and TP degree its scale was fitted "
        "at; at another model or degree the scale takes off the same seconds per layer of a small "
        "decode step (`fp8_small_batch.carried_fp8_shape`: the tables' fixed cost per GEMM, which "
        "the served steps do not pay); absent, the same ratio of times at every shape",
    )
    source_eras: dict[str, SourceEra] = Field(
        {},
        description="per published set: the GPUs on which its stack ran the tables' GEMMs, not "
        "the profile's era (two sources of one stack version can run GEMMs of different speed); "
        "chosen on the set's fit runs only",
    )
    kv_memory: StackMemory | None = Field(
        None,
        description="the stack's own KV-cache memory rule where it is not vLLM's (share of the "
        "whole GPU less weights and activations)",
    )
    errors: list[ProfileError] = []

    @model_validator(mode="after")
    def _scales_over_own_tables_name_them(self) -> EngineProfile:
        """Era and fp8 scales are over the stack's own backend's tables: without `kernel_backend`
        they would never apply (every calibration would count as another backend's)."""
        for field in (
            "kernel_era_scales",
            "older_era_scales",
            "fp8_linear_scales",
            "fp8_large_batch_scales",
        ):
            if getattr(self, field) and self.kernel_backend is None:
                raise ValueError(
                    f"profile {self.name!r} has {field} {getattr(self, field)} but no "
                    "kernel_backend; expected the backend whose kernel tables they are over "
                    "('vllm', 'sglang' or 'trtllm'): without it they never apply"
                )
        eager = sum(t.seconds_per_unit for t in self.terms if t.feature == "eager_layer")
        if eager > 0 and self.graph_steps == "every" and self.graph_max_tokens is None:
            raise ValueError(
                f"profile {self.name!r} has an eager_layer term ({eager * 1e3:.3g} ms a layer) but "
                "every step replays a CUDA graph; expected graph_steps 'decode_only' or a "
                "graph_max_tokens for the steps it runs eagerly"
            )
        unscaled = sorted(set(self.fp8_linear_reference) - set(self.fp8_linear_scales))
        if unscaled:
            raise ValueError(
                f"profile {self.name!r} has fp8_linear_reference for {unscaled} but no "
                f"fp8_linear_scales entry for them; expected references only for GPUs among "
                f"{sorted(self.fp8_linear_scales)}"
            )
        return self

    def graphed(self, max_num_seqs: int, graph_steps: str | None = None) -> EngineProfile:
        """The profile with its CUDA graphs as a server of `max_num_seqs` captures them (the largest
        graph by `graph_tokens_per_max_seq`) and, where the server's launch settings say,
        `graph_steps` in place of the profile's (vLLM's `cudagraph_mode FULL_DECODE_ONLY`)."""
        update: dict[str, object] = {}
        if self.graph_tokens_per_max_seq is not None:
            largest = self.graph_tokens_per_max_seq * max_num_seqs
            if self.graph_max_tokens is not None:
                largest = min(largest, self.graph_max_tokens)
            update["graph_max_tokens"], update["graph_tokens_per_max_seq"] = largest, None
        if graph_steps is not None and graph_steps != self.graph_steps:
            update["graph_steps"] = graph_steps
        return self.model_validate(self.model_dump() | update) if update else self

    def for_source(self, name: str, like: str | None = None) -> EngineProfile:
        """The profile as one published source's stack ran it: its `source_eras` entry applied, or,
        for a source declared of the same stack generation as another set (`like`), that set's."""
        chosen = self.source_eras.get(name) or self.source_eras.get(like or "")
        if chosen is None:
            return self
        scales = {
            gpu: scale
            for gpu, scale in self.kernel_era_scales.items()
            if gpu not in chosen.tables_gpus
        } | {
            gpu: self.older_era_scales[gpu]
            for gpu in chosen.older_gpus
            if gpu in self.older_era_scales
        }
        if scales == self.kernel_era_scales:
            return self
        return self.model_copy(update={"kernel_era_scales": scales})

    def fp8_linear_scale(self, gpu: str) -> tuple[float, str | None]:
        """(scale, the GPU it was fitted on) of `gpu`'s fp8 linear layers below the knee: its own
        `fp8_linear_scales` entry, else the one fitted on a GPU of the same kernel build target
        (`HardwareSpec.compute_capability`: H100 and H200 run the same sm_90 fp8 GEMMs, and their
        tables read the weights at a like share of each HBM's bandwidth), else (1.0, None). A
        carried scale is a ratio of the fitted GPU's times: `ProfiledCostModel.of_calibration` turns it
        into the carried GPU's own (`fp8_small_batch.with_carried_fp8`: the same share of the HBM
        peak), which needs both GPUs' calibrations of the model."""
        if gpu in self.fp8_linear_scales:
            return self.fp8_linear_scales[gpu], gpu
        catalog = load_catalog()
        target = catalog[gpu].compute_capability if gpu in catalog else None
        same = sorted(
            name
            for name in self.fp8_linear_scales
            if target and name in catalog and catalog[name].compute_capability == target
        )
        if len(same) == 1:  # two fitted GPUs of one target would need a rule to choose: none
            return self.fp8_linear_scales[same[0]], same[0]
        return 1.0, None

    def scales_kernels_of(self, calibration_backend: str | None) -> bool:
        """Whether `kernel_scale` (and per-bound scales) apply to a calibration of this backend's
        kernels (a calibration naming none is taken as vLLM's: Vidur and our profiles)."""
        if self.kernel_backend is None:
            return True
        return (calibration_backend or "vllm") != self.kernel_backend

    def host_s(self, shape: StepShape) -> float:
        """Host seconds of one step before overlap (the wake-up, per-request and eager-launch terms
        apart)."""
        return host_seconds(self.host_terms(), shape)

    def host_terms(self) -> tuple[tuple[Callable[[StepShape], float], float], ...]:
        """(units function, seconds per unit) of each per-step host term, in order (`wake`,
        `request` and `eager_layer` apart): what `host_s` adds up, read once by `ProfiledCostModel`
        so its per-step path does no lookup."""
        return tuple(
            (units_of(term.feature), term.seconds_per_unit)
            for term in self.terms
            if term.feature not in NOT_PER_STEP and term.feature != "eager_layer"
        )

    def launch_terms(
        self, num_layers: int | None = None
    ) -> tuple[tuple[Callable[[StepShape], float], float], ...]:
        """(units function, seconds per unit) of the `eager_layer` term, if any: the host launching
        each of the model's `num_layers` layers' kernels in a step run without a CUDA graph
        (`eager_units`). Not added to the host's time: the GPU runs each kernel as it is launched,
        so a step takes at least its launches (`wall_s`' floor), whatever the profile's overlap."""
        terms = []
        for term in self.terms:
            if term.feature != "eager_layer" or term.seconds_per_unit <= 0:
                continue
            if num_layers is None:
                raise ValueError(
                    f"profile {self.name!r} times each layer of an eager step "
                    f"({term.seconds_per_unit * 1e3:.3g} ms); expected the model's layer count "
                    "(num_layers) to time a step with it"
                )
            units = eager_units(self.graph_steps, self.graph_max_tokens, num_layers)
            terms.append((units, term.seconds_per_unit))
        return tuple(terms)

    @property
    def wake_s(self) -> float:
        return sum(term.seconds_per_unit for term in self.terms if term.feature == "wake")

    @property
    def request_s(self) -> float:
        """Seconds each request spends in the stack's API server before the scheduler sees it."""
        return sum(term.seconds_per_unit for term in self.terms if term.feature == "request")

    def offline(self) -> EngineProfile:
        """The profile as an offline run meets it (the engine fed directly, as `trtllm-bench`,
        `LLM.generate` or a C++ benchmark do): no API server, so no `request` term."""
        if not any(term.feature == "request" for term in self.terms):
            return self
        return self.model_copy(
            update={"terms": [term for term in self.terms if term.feature != "request"]}
        )

    def step_s(self, gpu_s: float, shape: StepShape, num_layers: int | None = None) -> float:
        """The step's wall time: the GPU's time (times `kernel_scale`) and the host's, with the
        overlapped share hidden, and at least its eager launches (`launch_terms`) of a model of
        `num_layers` layers."""
        launch_s = host_seconds(self.launch_terms(num_layers), shape)
        return wall_s(gpu_s, self.host_s(shape), self.overlap, self.kernel_scale, launch_s)

    def held_out_error(
        self, gpu: str | None = None, tensor_parallel: int | None = None
    ) -> float | None:
        """Median |error| on held-out published rows (`held_out`'s figure)."""
        return self.held_out(gpu, tensor_parallel)[0]

    def held_out(
        self, gpu: str | None = None, tensor_parallel: int | None = None
    ) -> tuple[float | None, str]:
        """(median |error| on held-out published rows, which rows) for a plan on `gpu` at
        `tensor_parallel` (`profile_errors.held_out`)."""
        return held_out(self.errors, gpu, tensor_parallel)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.model_dump_json(indent=1) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> EngineProfile:
        path = Path(path)
        try:
            return cls.model_validate(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError, ValidationError) as error:
            raise ValueError(f"{path}: not a valid engine profile ({error})") from error

    def with_terms(self, seconds: dict[str, float], label: Label, source: str) -> EngineProfile:
        """A copy with the named host terms set (others kept)."""
        terms = {term.feature: term for term in self.terms}
        for feature, value in seconds.items():
            terms[feature] = HostTerm(
                feature=feature, seconds_per_unit=float(value), label=label, source=source
            )
        return self.model_copy(update={"terms": [terms[f] for f in HOST_FEATURES if f in terms]})


def kernel_backend(profile: EngineProfile | None) -> str:
    """Whose kernels a serving stack runs: the calibration to prefer; vLLM's by default."""
    return (profile.kernel_backend if profile is not None else None) or "vllm"


def profile_names() -> list[str]:
    return sorted(path.stem for path in PROFILES_DIR.glob("*.json"))


def load_profile(name_or_path: str | Path) -> EngineProfile:
    """A shipped profile by name (`surgeplan calibrations profiles`) or a profile JSON file."""
    path = Path(name_or_path)
    if path.suffix == ".json" and path.exists():
        return EngineProfile.load(path)
    shipped = PROFILES_DIR / f"{name_or_path}.json"
    if not shipped.exists():
        raise ValueError(
            f"engine profile {str(name_or_path)!r} is unknown; expected one of {profile_names()} "
            "or a path to a profile JSON file"
        )
    return EngineProfile.load(shipped)


def default_profile_name(calibration: Calibration) -> str:
    """`surgeplan` for a calibration measured on our own engine (its steps already hold our host
    time), else `vllm-v1`."""
    own = (
        calibration.label == "measured" or calibration.device.kind == "cpu"
    )  # only our profiler measures
    return OWN_ENGINE_PROFILE if own else DEFAULT_PROFILE
