"""A calibration fitted on the steps of a real workload (`surgeplan profile --from-steps FILE`), not
only on the profiling grid: the engine recorded each step's shape and time while it served traffic
(`simulator.calibration.live_run.StepLog`), and the cost model is fitted on those.

The fitted time is the step's busy time (start to next start while the engine stays busy), so the
engine loop's overhead between steps is part of it; steps that ended in idleness use `step()`'s own
time. Each step is a single noisy sample, so the fit minimises absolute (seconds), not relative,
error: relative least squares favours each shape's fast draws and under-predicted the workload's
total busy time by 7% on `cpu-small` (on the very steps it was fitted on). Large logs are subsampled evenly to `max_points` (the fit searches hundreds of shape parameters).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from engine.core.step_shape import StepShape
from simulator.calibration.cost_fit import GPU_TILES, fit_cost_model
from simulator.calibration.schema import (
    Calibration,
    DeviceInfo,
    EngineSettings,
    Provenance,
    ShapeRecord,
)
from simulator.hardware.catalog import local_cpu
from simulator.model_spec import ModelSpec


def load_steps(path: str | Path) -> tuple[dict, list[StepShape], np.ndarray]:
    """(header, shapes, seconds) of a step log; a bad file is named with what was expected."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        steps = data["steps"]
        shapes = [ShapeRecord.model_validate(step["shape"]).to_shape() for step in steps]
        seconds = np.array(
            [step["busy_s"] if step.get("busy_s") else step["step_s"] for step in steps],
            dtype=float,
        )
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"{path}: not a step log ({error}); expected the JSON that `surgeplan validate "
            '--save-steps` writes: {"model", "engine", "steps": [{"shape", "step_s", "busy_s"}]}'
        ) from None
    keep = [i for i, shape in enumerate(shapes) if not shape.is_empty and seconds[i] > 0]
    return data, [shapes[i] for i in keep], seconds[keep]


def calibration_from_steps(path: str | Path, max_points: int = 600, seed: int = 0) -> Calibration:
    header, shapes, seconds = load_steps(path)
    if len(shapes) < 8:
        raise ValueError(
            f"{path}: {len(shapes)} steps that did work; expected at least 8 to fit a cost model"
        )
    if len(shapes) > max_points:
        chosen = np.sort(np.random.default_rng(seed).choice(len(shapes), max_points, replace=False))
        shapes, seconds = [shapes[i] for i in chosen], seconds[chosen]
    device = str(header.get("device", "cpu"))
    on_cpu = device.startswith("cpu")
    fit = fit_cost_model(
        shapes,
        seconds.tolist(),
        target=f"busy step time on a live workload ({Path(path).name})",
        tiles=(1,) if on_cpu else GPU_TILES,
        objective="absolute",
    )
    model = header["model"]
    engine = EngineSettings.model_validate(header["engine"])
    return Calibration(
        name=f"{model}@{device}-steps",
        label="measured",
        device=DeviceInfo(
            name=device,
            kind="cpu" if on_cpu else "cuda",
            memory_bytes=local_cpu().memory_bytes if on_cpu else 0,
            hardware="local-cpu" if on_cpu else None,
        ),
        model=ModelSpec.from_preset(model, dtype="float32" if on_cpu else "float16"),
        dtype="float32" if on_cpu else "float16",
        block_size=engine.block_size,
        engine=engine,
        cost_model=fit,
        provenance=Provenance(
            source=str(path),
            method="cost model fitted on the steps of a live workload",
            notes=[f"{len(shapes)} steps used"],
        ),
    )
