"""`ProfiledCostModel`: a GPU cost model plus an engine profile, what a simulated replica times its
steps with, and the step-time rule it applies (the host's time, its overlapped share hidden under the
GPU's). Apart from `engine_profile.py` (the profile's data: terms, errors, files, which one to pick)
because this is the timing model on the simulator's per-step path; the profile's own `step_s` reads
the same rule from here."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.core.step_shape import StepShape
from simulator.calibration.fp8_small_batch import SmallBatchFp8, has_fp8_linear, with_carried_fp8
from simulator.calibration.kernel_era import scale_linear_layers
from simulator.calibration.schema import Calibration

if TYPE_CHECKING:
    from simulator.calibration.engine_profile import EngineProfile


def wall_s(
    gpu_s: float, host_s: float, overlap: float, kernel_scale: float, launch_s: float = 0.0
) -> float:
    """A step's wall time: the GPU's time (times `kernel_scale`) and the host's, the overlapped
    share of the host's hidden; at least `launch_s`, the host launching an eager step's kernels one
    by one (the GPU runs each as it comes, so the launches are a floor, not an addition)."""
    hidden = overlap * host_s
    return max(gpu_s * kernel_scale, hidden, launch_s) + (host_s - hidden)


def host_seconds(
    terms: tuple[tuple[Callable[[StepShape], float], float], ...], shape: StepShape
) -> float:
    seconds = 0.0
    for units, seconds_per_unit in terms:
        seconds += seconds_per_unit * units(shape)
    return seconds


def _scaled_by_bound(fit, scales: Mapping[Any, float]):
    """The kernel model with each term's time times its bound's scale (host terms untouched) and
    the knee moved so that the linear layers' weight-read floor, whose time the fit counts as
    compute time per token x knee, follows the memory-bound scale (as carrying a calibration to
    other hardware does): built once per replica, so the per-step path is unchanged."""
    terms = [
        term.model_copy(
            update={"seconds_per_unit": term.seconds_per_unit * scales.get(term.bound, 1.0)}
        )
        for term in fit.terms
    ]
    moved = fit.with_floor_moved(scales.get("memory", 1.0), scales.get("compute", 1.0))
    return moved.model_copy(update={"terms": terms})


def calibration_table(calibration: Calibration) -> tuple[str, str | None]:
    """(GPU, kernel-table version) of a calibration: what `ProfiledCostModel` weighs the era by."""
    return (
        calibration.device.hardware or calibration.device.name,
        calibration.provenance.backend_version,
    )


class ProfiledCostModel:
    """The GPU cost model plus an engine profile: what a simulated replica times its steps with. Same
    interface as `CostModel` (`step_time`, `decode_stretch_times`); a decode stretch keeps its sequences,
    so its host time is the same every step and each step's total is exact."""

    def __init__(
        self,
        gpu,
        profile: EngineProfile,
        scale: float = 1.0,
        calibration_backend: str | None = None,
        calibration_table: tuple[str, str | None] | None = None,
        num_layers: int | None = None,
    ):
        """`calibration_table`: (GPU, backend version) of the calibration, for the era scale;
        `num_layers`: the model's, for a profile timing each layer of an eager step."""
        if not scale > 0:
            raise ValueError(
                f"step-time scale {scale!r}; expected a positive number (1.04: 4% slower)"
            )
        # what `__reduce__` rebuilds it from (pickling, e.g. to Ray actors; the compiled build's class
        # cannot be pickled otherwise)
        self._args = (gpu, profile, scale, calibration_backend, calibration_table, num_layers)
        self.stated_profile = profile  # as named, before the calibration's backend was weighed
        if not profile.scales_kernels_of(calibration_backend):
            # the calibration measured this stack's own kernels: its time as it is
            profile = profile.model_copy(update={"kernel_scale": 1.0, "kernel_scale_by_bound": {}})
            gpu_name, version = calibration_table or (None, None)
            era = profile.kernel_era_scales.get(gpu_name or "", 1.0)
            if version is not None and era != 1.0 and hasattr(gpu, "fit"):
                gpu = type(gpu)(scale_linear_layers(gpu.fit, era))
            fp8, _ = profile.fp8_linear_scale(gpu_name or "")
            large = profile.fp8_large_batch_scales.get(gpu_name or "", 1.0)  # its own GPU's only
            if (
                version is not None
                and (fp8, large) != (1.0, 1.0)
                and hasattr(gpu, "fit")
                and has_fp8_linear(gpu.fit)
            ):
                # last: over the era-scaled model
                gpu = SmallBatchFp8(
                    gpu,
                    fp8,
                    large,
                    profile.graph_steps == "decode_only",
                    profile.graph_max_tokens,
                )
        elif profile.kernel_scale_by_bound and hasattr(gpu, "fit"):
            gpu = type(gpu)(_scaled_by_bound(gpu.fit, profile.kernel_scale_by_bound))
        self.gpu = gpu
        self.profile = profile
        self.scale = scale  # every step that many times as long (the planner's error band)
        self.fit = gpu.fit
        self.wake_s = profile.wake_s * scale  # the replica adds it to its first step after idleness
        # each request's time in the API server before the scheduler sees it (the cluster delays it)
        self.front_end_s = profile.request_s * scale
        # the profile's per-step figures, read once (the profile is not changed after this)
        self._host_terms = profile.host_terms()
        self._launch_terms = profile.launch_terms(num_layers)
        self._overlap, self._kernel_scale = profile.overlap, profile.kernel_scale

    def __reduce__(self):
        return (ProfiledCostModel, self._args)

    @classmethod
    def of_calibration(
        cls, calibration: Calibration, profile: EngineProfile, scale: float = 1.0, gpu=None
    ) -> ProfiledCostModel:
        """`profile` over `calibration`'s GPU model (`gpu`, when already built from it), weighing
        the calibration's backend and kernel-table era."""
        from simulator.calibration.cost_model import CostModel

        if profile.kernel_backend is not None and not profile.scales_kernels_of(
            calibration.provenance.backend
        ):
            profile = with_carried_fp8(profile, calibration)  # its own share of the HBM peak
        return cls(
            gpu if gpu is not None else CostModel.from_calibration(calibration),
            profile,
            scale,
            calibration_backend=calibration.provenance.backend,
            calibration_table=calibration_table(calibration),
            num_layers=calibration.model.num_layers,
        )

    @property
    def knee_tokens(self) -> float:
        return self.gpu.knee_tokens

    def step_time(self, shape: StepShape) -> float:
        """`profile.step_s(gpu.step_time(shape), shape) * scale`, with the host terms read once."""
        if shape.is_empty:
            return 0.0
        host = host_seconds(self._host_terms, shape)
        launch = host_seconds(self._launch_terms, shape)
        gpu_s = self.gpu.step_time(shape)
        return wall_s(gpu_s, host, self._overlap, self._kernel_scale, launch) * self.scale

    def decode_stretch_times(self, shape: StepShape, num_steps: int) -> list[float]:
        host = host_seconds(self._host_terms, shape)
        launch = host_seconds(self._launch_terms, shape)  # a stretch keeps its batch: every step
        overlap, scale, kernel = self._overlap, self.scale, self._kernel_scale
        return [
            wall_s(gpu_s, host, overlap, kernel, launch) * scale
            for gpu_s in self.gpu.decode_stretch_times(shape, num_steps)
        ]

    def step_times(self, shapes: Sequence[StepShape]) -> np.ndarray:
        return np.array([self.step_time(shape) for shape in shapes])

    def explain(self, shape: StepShape) -> dict[str, float]:
        parts = dict(self.gpu.explain(shape))
        gpu_s = sum(parts.values(), 0.0)  # (a float start: mypyc types a bare sum() as an int)
        parts[f"serving stack ({self.profile.name}, after overlap)"] = self.step_time(shape) - gpu_s
        return parts

    def fit_error(self, target_prefix: str = ""):
        return self.gpu.fit_error(target_prefix)
