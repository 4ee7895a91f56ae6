"""How much slower an older serving stack's linear-layer kernels are than the kernel tables' own.

aiconfigurator's vLLM tables time the GEMMs of a recent vLLM (0.14-0.24: recent torch and cuBLAS).
A stack of 2024 (vLLM <= 0.6, the `vllm-v0` profile) ran the GEMMs of its own era, and Vidur's
public operator profiles (the `*_on_<gpu>-tp<N>.json` calibrations, Vidur's tables of 2024) time
exactly those. Where both sources time the same layer shapes on the same GPU, the ratio of their
linear-layer time at decode steps (batch 1-64: the weights read once per step, what decode-heavy
serving is bound by) is this GPU's era factor: derived from two public kernel datasets, never from
a serving measurement. On H100 the recent GEMMs read the weights ~18% faster; on A100 ~4%.

Only the bf16 linear layers are scaled: fp8 ones (`weight_dtype` fp8) keep the tables' time, since
the factor comes from bf16 GEMMs and no 2024 profile timed fp8 GEMMs; attention, the LM head,
all-reduce and elementwise terms keep the tables' time (the stack's CUDA-graph all-reduce is the same
custom kernel; Vidur's is NCCL).
"""

from __future__ import annotations

import math

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import CostModel
from simulator.calibration.schema import Calibration, CostModelFit

LINEAR_PREFIX = "linear layers"
# the terms a calibration's fp8 weights put in place of the linear layers (`weight_dtype`,
# `aic_terms.linear_terms`)
FP8_LINEAR_PREFIX = f"{LINEAR_PREFIX} (fp8)"
# decode steps the factor is measured on: batch x context (the linear layers see only the batch)
ERA_SHAPES = tuple(StepShape((), (512,) * batch) for batch in (1, 8, 32, 64))


def linear_s(model, shape: StepShape, fp8: bool | None = None) -> float:
    """Seconds of a step's linear layers in `model.explain`: all of them (`fp8` None), only the
    fp8-weight terms (True) or only the model-dtype ones (False)."""
    return sum(
        seconds
        for name, seconds in model.explain(shape).items()
        if name.startswith(LINEAR_PREFIX)
        and (fp8 is None or name.startswith(FP8_LINEAR_PREFIX) == fp8)
    )


def _layer_shapes(calibration: Calibration) -> tuple:
    """What fixes one layer's GEMMs on one GPU (two models with the same are timed alike)."""
    model = calibration.model
    return (
        model.hidden_size,
        model.intermediate_size,
        model.num_attention_heads,
        model.num_kv_heads,
        model.head_dim,
        model.num_layers,
        calibration.device.tensor_parallel,
    )


def era_pairs(
    calibrations: list[Calibration], gpu: str, backend: str = "vllm"
) -> list[tuple[Calibration, Calibration]]:
    """(older-era, table) pairs on `gpu` with the same layer shapes: Vidur's profiles (no backend
    named, not roofline) against `backend`'s kernel tables (a backend version named)."""
    older = [
        c
        for c in calibrations
        if c.device.hardware == gpu
        and c.provenance.backend is None
        and c.provenance.method != "roofline"
        and c.label != "measured"
        and c.cost_model is not None
    ]
    tables = [
        c
        for c in calibrations
        if c.device.hardware == gpu
        and c.provenance.backend == backend
        and c.provenance.backend_version is not None
        and c.cost_model is not None
    ]
    return [(a, b) for a in older for b in tables if _layer_shapes(a) == _layer_shapes(b)]


def era_factor(calibrations: list[Calibration], gpu: str, backend: str = "vllm") -> float | None:
    """Geometric mean over pairs and decode shapes of older-era / table linear-layer time."""
    logs = []
    for older, table in era_pairs(calibrations, gpu, backend):
        a, b = CostModel.from_calibration(older), CostModel.from_calibration(table)
        logs += [math.log(linear_s(a, s) / linear_s(b, s)) for s in ERA_SHAPES]
    return math.exp(sum(logs) / len(logs)) if logs else None


def era_source(calibrations: list[Calibration], gpu: str, backend: str = "vllm") -> str:
    pairs = era_pairs(calibrations, gpu, backend)
    names = ", ".join(f"{a.name} / {b.name}" for a, b in pairs)
    return (
        "derived: linear-layer time of Vidur's 2024 operator profiles over aiconfigurator's "
        f"{backend} GEMM tables, same layer shapes, decode batch 1-64 (geometric mean; {names})"
    )


def scale_linear_layers(fit: CostModelFit, factor: float) -> CostModelFit:
    """The kernel model with its bf16 linear-layer terms `factor` times as long (the rest, fp8
    linear layers included, untouched: the factor is derived from bf16 GEMMs, and no 2024
    operator profile timed fp8 ones, so there is no older fp8 era to derive)."""
    terms = [
        term.model_copy(update={"seconds_per_unit": term.seconds_per_unit * factor})
        if term.name.startswith(LINEAR_PREFIX) and not term.name.startswith(FP8_LINEAR_PREFIX)
        else term
        for term in fit.terms
    ]
    return fit.model_copy(update={"terms": terms})


__all__ = [
    "ERA_SHAPES",
    "FP8_LINEAR_PREFIX",
    "era_factor",
    "era_pairs",
    "era_source",
    "linear_s",
    "scale_linear_layers",
]
