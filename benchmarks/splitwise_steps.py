"""Splitwise's anchor on Splitwise's own measured step times: calibrations of Llama-2-70B at TP8 on a
DGX-A100 and a DGX-H100 fitted on the characterization the authors' simulator runs on, so the anchor can
be replayed with the steps Splitwise's results rest on instead of our Vidur / roofline ones.

Source: github.com/Mutinifni/splitwise-sim (MIT) @ 8f99e7d, `data/perf_model.csv` (its `db` performance
model); the medians per shape, with their source, in `benchmarks/data/splitwise_perf_model_llama2_70b_tp8.csv`.
What was measured: a prompt phase (`prompt_time`) at prompt sizes 128-8,192 (one request) and at 2-64
requests of 512 tokens (fitted up to 8,192 tokens a step, the anchor's budget), and a token phase (`token_time`, per token) at batch 1-64; the token time does
not move with the context (1-8k tokens at batch 1). Their simulator interpolates a step's time over the
step's batched tokens (a mixed step: 1.1 x the prompt time of all its tokens).

As our cost terms, fitted together by non-negative least squares on relative error over both phases:
`step` (every step's floor), `prefill_step` (a prompt step's extra), `token_above_knee` (every batched
token, as their interpolation counts a mixed step's decodes, and no fewer than the knee: their prompt
time is flat from 128 to 512 tokens; the knee chosen from `KNEES` by the fit's error),
`prefill_attention_pair` and `decode_sequence` (a decoding sequence's extra). A mixed step then costs its prompt time at all its tokens plus the decodes'
extra, where theirs adds 10%. The fit's error on their points is recorded in each calibration.
"""

import csv
from pathlib import Path

import numpy as np

from benchmarks.splitwise_notebook_slo import median_line, on_line
from engine.core.step_shape import StepShape
from simulator.calibration.aic_terms import cost_term
from simulator.calibration.cost_model import feature_value
from simulator.calibration.fitting import nnls
from simulator.calibration.roofline import roofline_calibration
from simulator.calibration.schema import CostModelFit, FitError, Provenance
from simulator.hardware.catalog import get_hardware
from simulator.model_spec import ModelSpec

DATA = Path(__file__).resolve().parent / "data" / "splitwise_perf_model_llama2_70b_tp8.csv"
HARDWARE = {"A100-80GB": "a100-80gb", "H100-80GB": "h100-80gb"}  # ours -> the data's names
MODEL, TP = "llama-2-70b", 8
# prompt steps fitted up to the anchor's step budget (`splitwise_anchor`: 8,192 tokens a step); their
# 16-64 x 512-token prompt batches (8k-32k tokens, up to 1.7x a single prompt of as many tokens) are
# beyond any step the anchor runs
MAX_STEP_TOKENS = 8192
FEATURES = ("step", "prefill_step", "token_above_knee", "prefill_attention_pair", "decode_sequence")
BOUNDS = {"step": "latency", "prefill_step": "latency", "token_above_knee": "compute"}
KNEES = (
    1,
    128,
    256,
    384,
    512,
    768,
    1024,
)  # tokens below which a step's linear layers cost the same
BOUNDS |= {"prefill_attention_pair": "compute", "decode_sequence": "memory"}


def measured_points(gpu: str, as_simulated: bool = False) -> list[tuple[StepShape, float]]:
    """(our step shape, their median seconds) for every measured shape on `gpu`: a prompt step of
    `batch_size` prompts of `prompt_size`, and a token step of `batch_size` decodes (one token each, at
    the context the prompt leaves); `as_simulated`: token steps as splitwise-sim times them
    (`_interpolated_token_s`), not as measured."""
    if gpu not in HARDWARE:
        raise ValueError(f"gpu {gpu!r}: no Splitwise measurement; expected one of {list(HARDWARE)}")
    with DATA.open() as f:
        rows = [row for row in csv.DictReader(f) if row["hardware"] == HARDWARE[gpu]]
    points, decodes = [], {}
    for row in rows:
        size, batch = int(row["prompt_size"]), int(row["batch_size"])
        if size * batch <= MAX_STEP_TOKENS:
            prompt = StepShape(((size, 0),) * batch, ())
            points.append((prompt, float(row["prompt_time_ms_median"]) * 1e-3))
        decodes.setdefault(batch, []).append((size, float(row["token_time_ms_median"]) * 1e-3))
    for batch, seen in decodes.items():  # one token point per batch size: the median over contexts
        size, seconds = sorted(seen, key=lambda pair: pair[1])[len(seen) // 2]
        if (
            as_simulated
        ):  # splitwise-sim's lookup: the token time of the rows of `batch` tokens in all
            seconds = _interpolated_token_s(rows, batch)
        points.append((StepShape((), (size + 1,) * batch), seconds))
    return points


def _interpolated_token_s(rows: list[dict], num_decodes: int) -> float:
    """The token step splitwise-sim's `db` model times for `num_decodes` decodes: its token-time
    interpolator (`DatabasePerformanceModel.init_predictor`) is indexed by the characterization's
    prompt_size x batch_size but queried with the step's batched tokens, one per decode, so a decode
    batch reads the token time of a single prompt of as many tokens (linear, extrapolated below the
    smallest; medians of our per-shape medians here, of its raw rows there)."""
    by_tokens: dict[int, list[float]] = {}
    for row in rows:
        tokens = int(row["prompt_size"]) * int(row["batch_size"])
        by_tokens.setdefault(tokens, []).append(float(row["token_time_ms_median"]) * 1e-3)
    return float(on_line(*median_line(by_tokens), num_decodes))


def _fit(points, fit: CostModelFit) -> tuple[np.ndarray, np.ndarray]:
    """(coefficients of FEATURES, relative error per point) under `fit`'s knee."""
    seconds = np.array([s for _, s in points])
    design = np.array([[feature_value(f, shape, fit) for f in FEATURES] for shape, _ in points])
    weights = 1.0 / seconds  # relative error
    coefficients = nnls(design * weights[:, None], seconds * weights)
    return coefficients, np.abs(design @ coefficients / seconds - 1)


def measured_calibration(gpu: str, as_simulated: bool = False):
    """Llama-2-70B at TP8 on `gpu`, timed as Splitwise measured it (`as_simulated`: its token steps as
    splitwise-sim's `db` model times them, nearly flat in the batch)."""
    points = measured_points(gpu, as_simulated)
    base = roofline_calibration(ModelSpec.from_preset(MODEL), get_hardware(gpu), TP)
    fits = [
        base.cost_model.model_copy(update={"knee_tokens": float(k), "tile_tokens": 1})
        for k in KNEES
    ]
    fit = min(fits, key=lambda candidate: _fit(points, candidate)[1].mean())
    coefficients, error = _fit(points, fit)
    source = f"{DATA.name}: {HARDWARE[gpu]}, TP{TP}"
    name = "whole step (Splitwise's characterization)"
    terms = [
        cost_term(name, feature, BOUNDS[feature], value, source)
        for feature, value in zip(FEATURES, coefficients)
    ]
    return base.model_copy(
        update={
            "name": f"{MODEL}@{gpu}-tp{TP}-splitwise-" + ("sim" if as_simulated else "measured"),
            "label": "fitted",
            "cost_model": fit.model_copy(
                update={
                    "terms": terms,
                    "fit_errors": [
                        FitError(
                            target="Splitwise's measured prompt and token steps (medians)",
                            num_points=len(points),
                            mape_train=float(error.mean()),
                            max_ape=float(error.max()),
                        )
                    ],
                }
            ),
            "provenance": Provenance(
                source="github.com/Mutinifni/splitwise-sim (MIT) @ 8f99e7d, data/perf_model.csv",
                method="whole-step times fitted as our cost terms (benchmarks/splitwise_steps.py)",
                notes=[f"Splitwise's characterization of Llama-2-70B, TP{TP}, {HARDWARE[gpu]}"],
            ),
        }
    )


def measured_calibrations(directory: Path, as_simulated: bool = False) -> dict[str, str]:
    """GPU -> the saved calibration file, for `splitwise_anchor.run`."""
    kind = "sim" if as_simulated else "measured"
    return {
        gpu: str(
            measured_calibration(gpu, as_simulated).save(
                directory / f"{MODEL}-{gpu}-tp{TP}-splitwise-{kind}.json"
            )
        )
        for gpu in HARDWARE
    }
