"""Each system's own step times in DistServe's chatbot anchor: calibrations built from the whole-step
models DistServe's artifact fitted on its A100 measurements of vLLM and of DistServe itself (OPT-13B),
so that the anchor compares the two systems as the paper ran them, not two layouts of one engine.

Source: github.com/LLMServe/DistServe (Apache-2.0) @ 82831f1, the artifact's simulator
(`simdistserve/estimators/profile_data/profiler-a100-80g.{vllm,distserve}.json`, `max_num_tokens.csv`,
`base/worker.py`); the figures, with their sources, in `benchmarks/data/distserve_step_profiles.csv`.
Its models, in milliseconds (a prefill step is prefill-only in both systems there):

- prefill step: a + b·Σ prompt tokens + c·Σ prompt tokens²;
- decode step: a + b·Σ (context + 1) + c·batch, one (a, b, c) below batch 95 and one from it;
- both, every step: the Ray hop, 2 ms + 0.0001 ms per context token in the step.

As our cost terms: `prefill_step` a, `prefill_token` b − c (c·n² = 2c·n(n+1)/2 − c·n, and our
`prefill_attention_pair` counts n(n+1)/2 pairs for an uncached prompt), `prefill_attention_pair` 2c,
exactly; the two decode sets as one (`decode_step`, `decode_context_token`, `decode_sequence`) fitted
by relative least squares over the batches and contexts the instance's KV pool holds (its error on
that grid recorded in the calibration); the Ray hop as `step` 2 ms and 0.1 µs per prefill and per
decode context token. OPT-13B is run as Llama-2-13B, its shape (40 layers, hidden 5120, multi-head
attention: the same KV bytes per token; 12.9 vs 13.0 B parameters); the KV pool is ours for that
shape (58,704 tokens on one A100 at 0.95 of memory against the artifact's 66,144 for OPT-13B).
"""

import csv
import tempfile
from functools import cache
from pathlib import Path

import numpy as np

from benchmarks.goodput_search import WHOLE_STEP_PROFILE
from simulator.calibration.aic_terms import cost_term
from simulator.calibration.fitting import nnls
from simulator.calibration.roofline import roofline_calibration
from simulator.calibration.schema import CostModelFit, FitError, Provenance
from simulator.hardware.catalog import get_hardware
from simulator.model_spec import ModelSpec

DATA = Path(__file__).resolve().parent / "data" / "distserve_step_profiles.csv"
ENGINES = ("vllm", "distserve")  # the artifact's names: vLLM 0.2 behind Ray, DistServe's own engine
MODEL = "opt-13b"
PROXY = "llama-2-13b"  # OPT-13B's shape in our model catalog
MS = 1e-3


def _rows() -> list[dict]:
    with DATA.open() as f:
        return list(csv.DictReader(f))


def _row(rows: list[dict], engine: str, tp: int, phase: str, batch_from: int | None = None) -> dict:
    for row in rows:
        if (
            row["engine"] in (engine, "both")
            and row["model"] == MODEL
            and row["phase"] == phase
            and row["tensor_parallel"] in (str(tp), "")
            and (batch_from is None or int(row["batch_from"]) == batch_from)
        ):
            return row
    raise ValueError(
        f"{DATA.name}: no {phase!r} row for engine {engine!r} at TP{tp}; expected engine in "
        f"{ENGINES}, TP in 1, 2, 4"
    )


def artifact_kv_tokens(tensor_parallel: int) -> int:
    """The artifact's KV pool for OPT-13B on `tensor_parallel` A100s (its `max_num_tokens.csv`, pp 1)."""
    row = _row(_rows(), "vllm", tensor_parallel, "max_num_tokens")
    return int(float(row["a_ms"]))  # (the data file keeps the count in its first value column)


def artifact_decode_ms(rows: list[dict], engine: str, tp: int, batch: int, context: int) -> float:
    """The artifact's decode step (without the Ray hop), `context` = Σ (context + 1) over the batch."""
    small = _row(rows, engine, tp, "decode", 1)
    row = (
        small
        if batch < int(small["batch_below"])
        else _row(rows, engine, tp, "decode", int(small["batch_below"]))
    )
    return float(row["a_ms"]) + float(row["b_ms"]) * context + float(row["c_ms"]) * batch


def _decode_fit(
    rows: list[dict], engine: str, tp: int, max_tokens: int
) -> tuple[np.ndarray, FitError]:
    """(a, b, c) in seconds of one decode set over the grid the pool holds, and its error there."""
    grid = [
        (batch, batch * length)
        for batch in (1, 2, 4, 8, 16, 32, 48, 64, 80, 94, 95, 112, 128, 160, 192, 256)
        for length in (64, 128, 256, 512, 768, 1024, 1536, 2048)
        if batch * length <= max_tokens
    ]
    x = np.array([[1.0, context, batch] for batch, context in grid])
    y = np.array([artifact_decode_ms(rows, engine, tp, b, t) for b, t in grid]) * MS
    coefficients = nnls(x / y[:, None], np.ones(len(y)))  # relative error, every term ≥ 0
    error = np.abs(x @ coefficients / y - 1)
    return coefficients, FitError(
        target="the artifact's decode step (two sets, split at batch 95)",
        num_points=len(grid),
        mape_train=float(error.mean()),
        max_ape=float(error.max()),
        note="batches 1-256 x mean contexts 64-2048 that fit the artifact's KV pool",
    )


def artifact_calibration(engine: str, tensor_parallel: int):
    """The calibration of `engine` ('vllm' or 'distserve') at this TP degree on an A100-80GB."""
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r} is unknown; expected one of {ENGINES}")
    rows = _rows()
    prefill = _row(rows, engine, tensor_parallel, "prefill")
    ray = _row(rows, engine, tensor_parallel, "ray_overhead")
    max_tokens = artifact_kv_tokens(tensor_parallel)
    (a, b, c), decode_error = _decode_fit(rows, engine, tensor_parallel, max_tokens)
    ray_s, ray_per_token_s = float(ray["a_ms"]) * MS, float(ray["b_ms"]) * MS
    pa, pb, pc = (float(prefill[key]) * MS for key in ("a_ms", "b_ms", "c_ms"))
    where = f"{DATA.name}: {engine} TP{tensor_parallel}"
    terms = [
        cost_term(
            "prefill step (artifact's fit)", "prefill_step", "latency", pa, where, "measured"
        ),
        cost_term(
            "prefill step (artifact's fit)", "prefill_token", "compute", pb - pc, where, "measured"
        ),
        cost_term(
            "prefill step (artifact's fit)",
            "prefill_attention_pair",
            "compute",
            2 * pc,
            where,
            "measured",
        ),
        cost_term(
            "decode step (artifact's fit, one set)", "decode_step", "memory", a, where, "fitted"
        ),
        cost_term(
            "decode step (artifact's fit, one set)",
            "decode_context_token",
            "memory",
            b,
            where,
            "fitted",
        ),
        cost_term(
            "decode step (artifact's fit, one set)",
            "decode_sequence",
            "compute",
            c,
            where,
            "fitted",
        ),
        cost_term("Ray hop (artifact's simulator)", "step", "host", ray_s, where, "derived"),
        cost_term(
            "Ray hop (artifact's simulator)",
            "prefill_token",
            "host",
            ray_per_token_s,
            where,
            "derived",
        ),
        cost_term(
            "Ray hop (artifact's simulator)",
            "decode_context_token",
            "host",
            ray_per_token_s,
            where,
            "derived",
        ),
    ]
    model = ModelSpec.from_preset(PROXY)
    base = roofline_calibration(model, get_hardware("A100-80GB"), tensor_parallel)
    return base.model_copy(
        update={
            "name": f"{PROXY}@A100-80GB-tp{tensor_parallel}-distserve-artifact-{engine}",
            "label": "fitted",
            "cost_model": CostModelFit(
                knee_tokens=0.0, knee_label="derived", terms=terms, fit_errors=[decode_error]
            ),
            "provenance": Provenance(
                source=prefill["source"],
                method="DistServe's artifact's whole-step fits, as our cost terms "
                "(benchmarks/distserve_steps.py)",
                notes=[
                    f"measured on {MODEL} (A100-80GB); run as {PROXY}, its shape",
                    f"the artifact's KV pool at TP{tensor_parallel}: {max_tokens} tokens",
                ],
                backend=engine,
            ),
        }
    )


@cache
def calibration_file(engine: str, tensor_parallel: int) -> str:
    """`artifact_calibration` saved where a scenario's `calibration` field can name it (this process's
    temporary folder: the data file is the source, the JSON a by-product)."""
    folder = Path(tempfile.mkdtemp(prefix="distserve-steps-"))
    path = folder / f"{engine}-tp{tensor_parallel}.json"
    artifact_calibration(engine, tensor_parallel).save(path)
    return str(path)


def with_artifact_steps(scenario, engine: str):
    """`scenario` (a layout's fixed fleet, `simulator.planner.split.layout_scenario`) timed by `engine`'s
    artifact calibrations: the co-located replicas', or each pool's at its TP degree."""
    update: dict = {"engine_profile": str(WHOLE_STEP_PROFILE)}
    split = scenario.cluster.disaggregation
    if split is None:
        hardware = scenario.hardware
        update["hardware"] = hardware.model_copy(
            update={"calibration": calibration_file(engine, hardware.tensor_parallel)}
        )
    else:
        tp = scenario.hardware.tensor_parallel
        pools = {
            name: getattr(split, name).model_copy(
                update={
                    "calibration": calibration_file(
                        engine, getattr(split, f"{name}_tensor_parallel") or tp
                    )
                }
            )
            for name in ("prefill", "decode")
        }
        update["cluster"] = scenario.cluster.model_copy(
            update={"disaggregation": split.model_copy(update=pools)}
        )
    return scenario.model_copy(update=update)
