"""Fit our cost model's linear-layer and all-reduce terms on the public Vidur operator tables
(`../shared/calibration/vidur/`, see its SOURCES.md), and complete them with first-principles
attention, LM-head and host terms (the all-reduce table and its fit: `vidur_all_reduce`). Only the
fitted figures are shipped, never the tables."""

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.calibration.fitting import (
    GEMM_TILES,
    affine_design,
    cross_validated_errors,
    fit_relative,
    linear_design,
    octave_weights,
    roofline_candidates,
)
from simulator.calibration.roofline import (
    attention_terms,
    host_terms,
    lm_head_terms,
)
from simulator.calibration.schema import (
    Calibration,
    CostModelFit,
    CostTerm,
    DeviceInfo,
    FitError,
    Provenance,
)
from simulator.calibration.vidur_all_reduce import all_reduce_terms
from simulator.hardware.catalog import get_hardware
from simulator.hardware.spec import HardwareSpec
from simulator.model_spec import ModelSpec

VIDUR_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "calibration" / "vidur"
VIDUR_SOURCE = (
    "microsoft/vidur data/profiling @ 7d47513363ec447a741ac5e47241580b47724fbf (MIT), MLSys 2024"
)
# Per-layer operators of mlp.csv (times are for ONE layer); `emb` runs once per step.
PER_LAYER_OPS = (
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
)
GPU_DIRS = {"A100-80GB": "a100", "H100-80GB": "h100", "A40": "a40"}
_CODELLAMA_34B = {
    "hidden_size": 8192,
    "intermediate_size": 22016,
    "num_hidden_layers": 48,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 32000,
    "max_position_embeddings": 16384,
    "dtype": "float16",
    "model_type": "llama",
}
# our model name -> (table folder, preset name or HF config dict)
VIDUR_MODELS: dict[str, tuple[str, str | dict]] = {
    "llama-2-7b": ("meta-llama/Llama-2-7b-hf", "llama-2-7b"),
    "llama-2-70b": ("meta-llama/Llama-2-70b-hf", "llama-2-70b"),
    "llama-3-8b": ("meta-llama/Meta-Llama-3-8B", "llama-3-8b"),
    "llama-3-70b": ("meta-llama/Meta-Llama-3-70B", "llama-3-70b"),
    "codellama-34b": ("codellama/CodeLlama-34b-Instruct-hf", _CODELLAMA_34B),
}
# The constant part of a layer's time is its weight read (memory-bound); the parts that grow with
# tokens are GEMM FLOPs (compute-bound). These bounds decide how a derivation for other GPUs scales them.
_LINEAR_TERMS = (
    ("linear layers: weight-read floor", "step", "memory"),
    ("linear layers: per token", "token", "compute"),
    ("linear layers: max(tokens, knee) × compute", "token_above_knee", "compute"),
)
_MIN_CHECKED_TOKENS = 64
_SMALL_TOKENS = (
    128  # decode-sized steps: the rows a uniform fit outvotes (benchmarks/small_batch_linear.py)
)


@dataclass(frozen=True)
class OpTable:
    """One mlp.csv restricted to one tensor-parallel degree, medians in seconds."""

    path: Path
    num_tokens: np.ndarray  # [rows]
    per_layer_s: np.ndarray  # [rows]: sum of PER_LAYER_OPS present in the table
    embedding_s: np.ndarray  # [rows]
    attributes: dict[str, str]


def model_spec(name: str) -> ModelSpec:
    if name not in VIDUR_MODELS:
        raise ValueError(
            f"model {name!r} has no public table; expected one of {sorted(VIDUR_MODELS)}"
        )
    source = VIDUR_MODELS[name][1]
    if isinstance(source, str):
        return ModelSpec.from_preset(source, dtype="float16")  # the tables were measured in fp16
    return ModelSpec.from_hf_config(source, name=name)


def mlp_table_path(model: str, gpu: str, vidur_dir: Path = VIDUR_DIR) -> Path:
    if gpu not in GPU_DIRS:
        raise ValueError(f"GPU {gpu!r} has no public tables; expected one of {sorted(GPU_DIRS)}")
    return Path(vidur_dir) / "compute" / GPU_DIRS[gpu] / VIDUR_MODELS[model][0] / "mlp.csv"


def read_mlp_table(path: Path, tensor_parallel: int) -> OpTable:
    path = Path(path)
    if not path.exists():
        raise ValueError(
            f"{path}: no such table; expected the Vidur profiling copy described in SOURCES.md"
        )
    with path.open() as handle:
        rows = [
            row
            for row in csv.DictReader(handle)
            if int(row["num_tensor_parallel_workers"]) == tensor_parallel
        ]
    if not rows:
        raise ValueError(
            f"{path}: no rows with num_tensor_parallel_workers={tensor_parallel}; expected 1, 2, 4 or 8"
        )
    ops = [op for op in PER_LAYER_OPS if f"time_stats.{op}.median" in rows[0]]
    per_layer = [sum(_ms(row, op) for op in ops) for row in rows]
    return OpTable(
        path=path,
        num_tokens=np.array([int(row["num_tokens"]) for row in rows], dtype=float),
        per_layer_s=np.array(per_layer),
        embedding_s=np.array([_ms(row, "emb") for row in rows]),
        attributes={
            key: rows[0][key] for key in ("n_head", "n_kv_head", "n_embd", "n_expanded_embd")
        },
    )


def _ms(row: dict, op: str) -> float:
    return float(row[f"time_stats.{op}.median"]) / 1e3


def _check_model_matches(table: OpTable, model: ModelSpec) -> None:
    expected = {
        "n_head": model.num_attention_heads,
        "n_kv_head": model.num_kv_heads,
        "n_embd": model.hidden_size,
        "n_expanded_embd": model.intermediate_size,
    }
    wrong = {
        key: table.attributes[key]
        for key, value in expected.items()
        if int(table.attributes[key]) != value
    }
    if wrong:
        raise ValueError(f"{table.path}: {wrong} do not match {model.name} ({expected})")


@dataclass(frozen=True)
class LinearFit:
    knee: float
    tile: int
    per_layer_coefficients: np.ndarray  # [3] seconds: fixed, per token, per max(tokens, knee)
    embedding_coefficients: np.ndarray  # [2] seconds: fixed, per token
    error: FitError

    def per_layer_s(self, tokens: np.ndarray) -> np.ndarray:
        return linear_design((self.knee, self.tile), tokens) @ self.per_layer_coefficients


def fit_linear_table(
    table: OpTable, folds: int = 5, seed: int = 0, by_octave: bool = True
) -> LinearFit:
    """Fit the linear layers on every row of `table`. `by_octave` weights rows so that every octave
    of token count counts alike (`fitting.octave_weights`): uniformly weighted, the ~10 rows of 1–64
    tokens are outvoted by ~250 larger ones and the per-token term makes a 70B decode step at TP8 on
    the A100 rise 39% from 1 to 64 sequences where the table rises 9%."""
    candidates = roofline_candidates(table.num_tokens.max(), GEMM_TILES, count=60)
    shares = octave_weights(table.num_tokens) if by_octave else None
    fit = fit_relative(
        linear_design, table.num_tokens, table.per_layer_s, candidates, row_weights=shares
    )
    held_out = cross_validated_errors(
        linear_design,
        table.num_tokens,
        table.per_layer_s,
        candidates,
        folds,
        seed,
        row_weights=shares,
    )
    embedding = fit_relative(affine_design, table.num_tokens, table.embedding_s, [(0.0,)])
    checked = table.num_tokens >= _MIN_CHECKED_TOKENS
    small = table.num_tokens <= _SMALL_TOKENS
    weighting = "rows weighted so every octave of tokens counts alike" if by_octave else "uniform"
    error = FitError(
        target=f"per-layer operator time (public table, ≥{_MIN_CHECKED_TOKENS} tokens)",
        num_points=int(checked.sum()),
        mape_train=float(fit.relative_errors[checked].mean()),
        max_ape=float(fit.relative_errors[checked].max()),
        mape_cross_validated=float(held_out[checked].mean()),
        folds=folds,
        note=f"{table.path.relative_to(table.path.parents[4])}; all {len(table.num_tokens)} rows "
        f"({weighting}): train MAPE {fit.mape:.3f}; ≤{_SMALL_TOKENS} tokens ({int(small.sum())} "
        f"rows): train MAPE {fit.relative_errors[small].mean():.3f}, held-out "
        f"{held_out[small].mean():.3f}; max error sits at wave-quantisation steps",
    )
    return LinearFit(
        fit.params[0], int(fit.params[1]), fit.coefficients, embedding.coefficients, error
    )


def linear_terms(model: ModelSpec, fit: LinearFit, source: str) -> list[CostTerm]:
    terms = [
        CostTerm(
            name=name,
            feature=feature,
            bound=bound,
            label="fitted",
            note=f"{source} × {model.num_layers} layers",
            seconds_per_unit=float(value) * model.num_layers,
        )
        for (name, feature, bound), value in zip(_LINEAR_TERMS, fit.per_layer_coefficients)
    ]
    fixed, per_token = fit.embedding_coefficients
    terms += [
        CostTerm(
            name="embedding lookup",
            feature="step",
            bound="latency",
            label="fitted",
            seconds_per_unit=float(fixed),
            note=source,
        ),
        CostTerm(
            name="embedding lookup",
            feature="token",
            bound="memory",
            label="fitted",
            seconds_per_unit=float(per_token),
            note=source,
        ),
    ]
    return terms


def vidur_calibration(
    model_name: str, gpu: str, tensor_parallel: int, vidur_dir: Path = VIDUR_DIR
) -> Calibration:
    """A `fitted` calibration: linear layers and all-reduce fitted on the public tables, attention,
    LM head and host overhead derived from first principles (see simulator.calibration.roofline)."""
    model = model_spec(model_name)
    hardware: HardwareSpec = get_hardware(gpu)
    table = read_mlp_table(mlp_table_path(model_name, gpu, vidur_dir), tensor_parallel)
    _check_model_matches(table, model)
    fit = fit_linear_table(table)
    terms = linear_terms(
        model, fit, source=f"fitted on {GPU_DIRS[gpu]}/{VIDUR_MODELS[model_name][0]}/mlp.csv"
    )
    errors = [fit.error]
    if tensor_parallel > 1:
        reduce_terms, reduce_error = all_reduce_terms(
            model, gpu, tensor_parallel, int(table.num_tokens.max()), vidur_dir
        )
        terms += reduce_terms
        errors.append(reduce_error)
    terms += attention_terms(model, hardware, tensor_parallel) + lm_head_terms(
        model, hardware, tensor_parallel
    )
    terms += host_terms()
    return Calibration(
        name=f"{model_name}@{gpu}-tp{tensor_parallel}",
        label="fitted",
        model=model,
        dtype=model.dtype,
        device=DeviceInfo.of_catalog(hardware, tensor_parallel),
        cost_model=CostModelFit(
            knee_tokens=fit.knee,
            knee_label="fitted",
            tile_tokens=fit.tile,
            terms=terms,
            fit_errors=errors,
        ),
        provenance=Provenance(
            source=VIDUR_SOURCE,
            method="vidur operator tables + first-principles attention",
            notes=[
                "linear layers, embedding and all-reduce: fitted (non-negative least squares, "
                "relative error)",
                "linear layers: rows weighted so every octave of token count counts alike, so "
                "the few decode-sized rows (1-64 tokens) shape the small-batch floor "
                "(benchmarks/small_batch_linear.py)",
                "attention, LM head, host overhead: derived (see term notes)",
            ],
        ),
    )
