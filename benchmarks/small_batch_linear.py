"""Small decode batches in the Vidur-fitted calibrations: the model's per-step linear-layer time (linear
layers × layers + embedding) against Vidur's measured operator rows at 1–128 tokens, for the fit
weighted uniformly over the table's rows (before) and weighted so that every octave of token count
counts alike (after, what `surgeplan calibrations build` ships), with each fit's error on the rows
it saw and on rows it never saw (every other token count held out). No GPU: reads the public tables
in ../shared/calibration/vidur/ in place.

    .venv/bin/python benchmarks/small_batch_linear.py [--json benchmarks/results/small_batch_linear.json]
"""

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

import numpy as np

# Run as a script, this folder comes first on sys.path, and benchmarks/kernels.py would shadow the
# `kernels` package: put the repository root first instead.
sys.path[:1] = [str(Path(__file__).resolve().parents[1])]

from simulator.calibration.fitting import (  # noqa: E402
    GEMM_TILES,
    fit_relative,
    linear_design,
    octave_weights,
    roofline_candidates,
)
from simulator.calibration.shipped import FITTED  # noqa: E402
from simulator.calibration.vidur_import import (  # noqa: E402
    OpTable,
    fit_linear_table,
    mlp_table_path,
    model_spec,
    read_mlp_table,
)

TOKENS = (1, 2, 4, 8, 16, 32, 64, 128)
SMALL_TOKENS = 128


def _step_ms(per_layer_s: np.ndarray, embedding_s: np.ndarray, layers: int) -> np.ndarray:
    return (per_layer_s * layers + embedding_s) * 1e3


def every_other_held_out(table: OpTable, by_octave: bool) -> np.ndarray:
    """[rows] relative error of each odd-ranked token count under a fit on the even-ranked ones
    (NaN for the rows fitted on)."""
    order = np.argsort(table.num_tokens)
    train, test = order[::2], order[1::2]
    tokens, times = table.num_tokens, table.per_layer_s
    candidates = roofline_candidates(tokens.max(), GEMM_TILES, count=60)
    shares = octave_weights(tokens[train]) if by_octave else None
    fit = fit_relative(linear_design, tokens[train], times[train], candidates, row_weights=shares)
    errors = np.full(len(tokens), np.nan)
    predicted = linear_design(fit.params, tokens[test]) @ fit.coefficients
    errors[test] = np.abs(predicted - times[test]) / times[test]
    return errors


def compare(model: str, gpu: str, tensor_parallel: int) -> tuple[list[dict], list[dict]]:
    table = read_mlp_table(mlp_table_path(model, gpu), tensor_parallel)
    layers = model_spec(model).num_layers
    rows = [int(np.flatnonzero(table.num_tokens == tokens)[0]) for tokens in TOKENS]
    measured = _step_ms(table.per_layer_s[rows], table.embedding_s[rows], layers)
    name = f"{model}@{gpu}-tp{tensor_parallel}"
    by_tokens, summary = [], []
    fits = {}
    for label, by_octave in (("before", False), ("after", True)):
        fit = fit_linear_table(table, by_octave=by_octave)
        fixed, per_token = fit.embedding_coefficients
        embedding = fixed + np.array(TOKENS, float) * per_token
        fits[label] = _step_ms(fit.per_layer_s(np.array(TOKENS)), embedding, layers)
        fitted_errors = np.abs(fit.per_layer_s(table.num_tokens) / table.per_layer_s - 1)
        held = every_other_held_out(table, by_octave)
        small, large = table.num_tokens <= SMALL_TOKENS, table.num_tokens >= 64
        summary.append(
            {
                "calibration": name,
                "fit": label,
                "knee": fit.knee,
                "tile": fit.tile,
                "rise_1_to_64_model": float(fits[label][6] / fits[label][0] - 1),
                "rise_1_to_64_vidur": float(measured[6] / measured[0] - 1),
                "mape_le128_fit": float(fitted_errors[small].mean()),
                "mape_le128_held_out": float(np.nanmean(held[small])),
                "mape_ge64_fit": float(fitted_errors[large].mean()),
                "mape_ge64_held_out": float(np.nanmean(held[large])),
                "mape_all_held_out": float(np.nanmean(held)),
                "mape_ge64_5fold": fit.error.mape_cross_validated,
            }
        )
    for index, tokens in enumerate(TOKENS):
        by_tokens.append(
            {
                "calibration": name,
                "tokens": tokens,
                "vidur_ms": float(measured[index]),
                "before_ms": float(fits["before"][index]),
                "before_err": float(fits["before"][index] / measured[index] - 1),
                "after_ms": float(fits["after"][index]),
                "after_err": float(fits["after"][index] / measured[index] - 1),
            }
        )
    return by_tokens, summary


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n## {title}")
    print("| " + " | ".join(rows[0]) + " |")
    print("|" + "---|" * len(rows[0]))
    for row in rows:
        cells = [
            f"{v:+.1%}" if k.endswith("err") or k.startswith("rise") else v for k, v in row.items()
        ]
        cells = [f"{v:.3f}" if isinstance(v, float) else str(v) for v in cells]
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="save both tables here")
    args = parser.parse_args()
    by_tokens, summary = [], []
    for model, gpu, tensor_parallel in FITTED:
        rows, fits = compare(model, gpu, tensor_parallel)
        by_tokens += rows
        summary += fits
    print(f"# {dt.date.today()} | Vidur public tables (microsoft/vidur data/profiling), no GPU")
    print_table("per-step linear-layer time vs Vidur rows (ms; err = model / Vidur − 1)", by_tokens)
    print_table("fit quality, uniform (before) vs octave-weighted (after) (fractions)", summary)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"by_tokens": by_tokens, "summary": summary}, indent=1)
        )


if __name__ == "__main__":
    main()
