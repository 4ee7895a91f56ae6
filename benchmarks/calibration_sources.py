"""Two public sources of measured GPU kernel times, side by side: the calibrations fitted on
aiconfigurator's database (each table's held-out error), the efficiencies its measurements imply
(what our roofline assumes beside what it measured), and, where Vidur's tables cover the same GPU,
their disagreement per term kind on reference steps. Reads only the shipped calibrations.

    .venv/bin/python benchmarks/calibration_sources.py \
        [--json benchmarks/results/calibration_sources.json] [--markdown]
"""

import argparse
import datetime as dt
import json
import statistics
import sys
from pathlib import Path

# Run as a script (not imported by a test), the repo root, not benchmarks/, goes first on the path.
if not __package__:
    sys.path[:1] = [str(Path(__file__).resolve().parents[1])]

from engine.core.step_shape import StepShape  # noqa: E402
from simulator.calibration.compare import disagreement  # noqa: E402
from simulator.calibration.cost_model import CostModel  # noqa: E402
from simulator.calibration.roofline import (  # noqa: E402
    DEFAULT_EFFICIENCIES,
    Efficiencies,
    roofline_calibration,
)
from simulator.calibration.schema import Calibration, load_shipped  # noqa: E402
from simulator.calibration.shipped import calibration_for, load_all_shipped, measured_support  # noqa: E402
from simulator.hardware.catalog import get_hardware  # noqa: E402
from simulator.model_spec import ModelSpec  # noqa: E402

# (Vidur-side calibration, the aiconfigurator one of the same model, GPU and TP)
PAIRS = [
    ("llama-2-7b@A100-80GB-tp1", "llama-2-7b@A100-80GB-tp1-aic-vllm"),
    ("llama-3-8b@A100-80GB-tp1", "llama-3-8b@A100-80GB-tp1-aic-vllm"),
    ("llama-3-70b@A100-80GB-tp4", "llama-3-70b@A100-80GB-tp4-aic-vllm"),
    ("llama-3-70b@A100-80GB-tp8", "llama-3-70b@A100-80GB-tp8-aic-vllm"),
    ("llama-2-7b@H100-80GB-tp1", "llama-2-7b@H100-80GB-tp1-aic-vllm"),
    ("llama-2-7b@H200-141GB-tp1", "llama-2-7b@H200-141GB-tp1-aic-vllm"),
]


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def fitted_table(calibrations: list[Calibration]) -> list[dict]:
    rows = []
    print(
        "(a) calibrations fitted on aiconfigurator's tables: held-out error (5-fold) of the "
        "whole-step check and of each table's fit"
    )
    print(
        f"{'calibration':44s} {'backend':18s} {'step':>7s} {'GEMM':>7s} {'decode':>7s} "
        f"{'prefill':>7s} {'LM head':>7s} {'all-red.':>7s}"
    )
    for calibration in calibrations:
        errors = [error.mape_cross_validated for error in calibration.cost_model.fit_errors]
        backend = f"{calibration.provenance.backend} {calibration.provenance.backend_version}"
        cells = [_pct(error) for error in errors] + ["—"] * (6 - len(errors))
        print(f"{calibration.name:44s} {backend:18s} " + " ".join(f"{cell:>7s}" for cell in cells))
        rows.append({"name": calibration.name, "backend": backend, "held_out_mape": errors})
    return rows


def implied_efficiencies(calibrations: list[Calibration]) -> list[dict]:
    """Per GPU (Llama-3-8B, vLLM): GEMM FLOP/s, decode KV-read bandwidth and prefill attention
    FLOP/s as fractions of the datasheet peaks, and the decode-attention floor per layer."""
    rows = []
    print(
        "\n(b) what the measurements imply (Llama-3-8B, vLLM) against the roofline's assumptions "
        f"(matmul {DEFAULT_EFFICIENCIES.matmul:.0%}, "
        f"decode attention {DEFAULT_EFFICIENCIES.decode_attention_bandwidth:.0%}"
        f", prefill attention {DEFAULT_EFFICIENCIES.prefill_attention_compute:.0%})"
    )
    print(
        f"{'GPU':20s} {'GEMM/peak':>10s} {'decode KV/BW':>13s} {'prefill attn/peak':>18s} "
        f"{'decode floor/layer':>19s}"
    )
    for calibration in calibrations:
        if calibration.model.name != "llama-3-8b" or calibration.provenance.backend != "vllm":
            continue
        model, gpu = calibration.model, get_hardware(calibration.device.hardware)
        terms = {
            term.feature + ":" + term.name: term.seconds_per_unit
            for term in calibration.cost_model.terms
        }
        per_token = (
            terms["token_above_knee:linear layers: max(tokens, knee) × compute"]
            + terms["token:linear layers: per token"]
        )
        kv_read = terms["decode_context_token:decode attention (KV read)"]
        pair = terms["prefill_attention_pair:prefill attention (FLOPs)"]
        floor = terms["decode_step:decode attention: per-layer floor"] / model.num_layers
        row = {
            "gpu": gpu.name,
            "gemm_fraction_of_peak": model.linear_flops_per_token
            / per_token
            / gpu.bf16_dense_flops,
            "decode_fraction_of_bandwidth": model.kv_bytes_per_token_per_gpu(1)
            / kv_read
            / gpu.memory_bandwidth_bytes_per_s,
            "prefill_attention_fraction_of_peak": model.attention_flops_per_pair
            / pair
            / gpu.bf16_dense_flops,
            "decode_floor_per_layer_s": floor,
        }
        rows.append(row)
        print(
            f"{gpu.name:20s} {row['gemm_fraction_of_peak']:>10.0%} "
            f"{row['decode_fraction_of_bandwidth']:>13.0%} "
            f"{row['prefill_attention_fraction_of_peak']:>18.0%} {floor * 1e6:>16.1f} µs"
        )
    for key in (
        "gemm_fraction_of_peak",
        "decode_fraction_of_bandwidth",
        "prefill_attention_fraction_of_peak",
    ):
        print(f"  median {key}: {statistics.median(row[key] for row in rows):.2f}")
    print(
        "  median decode floor per layer: "
        f"{statistics.median(r['decode_floor_per_layer_s'] for r in rows) * 1e6:.1f} µs"
    )
    return rows


def disagreement_table() -> list[dict]:
    rows = []
    print(
        "\n(c) Vidur-based vs aiconfigurator calibrations, per term kind (ms; ratio = aic / Vidur)"
    )
    print(
        f"{'model @ GPU, TP':28s} {'step':18s} {'term':18s} {'Vidur':>8s} {'aic':>8s} {'ratio':>6s}"
    )
    for vidur_name, aic_name in PAIRS:
        vidur, aic = load_shipped(vidur_name), load_shipped(aic_name)
        for row in disagreement(vidur, aic):
            ratio = "—" if row.ratio is None else f"{row.ratio:.2f}"
            print(
                f"{vidur_name:28s} {row.step:18s} {row.kind:18s} {row.first_s * 1e3:8.3f} "
                f"{row.second_s * 1e3:8.3f} "
                f"{ratio:>6s}"
            )
            rows.append(
                {
                    "vidur": vidur_name,
                    "aic": aic_name,
                    "vidur_label": vidur.label,
                    "step": row.step,
                    "kind": row.kind,
                    "vidur_s": row.first_s,
                    "aic_s": row.second_s,
                    "ratio": row.ratio,
                }
            )
        default = calibration_for(
            vidur.model.name, vidur.device.hardware, vidur.device.tensor_parallel
        )
        print(
            f"  default: {default.name} ({measured_support(default)} kernel terms fitted on "
            "measurements; "
            f"Vidur {measured_support(vidur)}, aic {measured_support(aic)})"
        )
    return rows


ROOFLINE_BEFORE = Efficiencies(
    matmul=0.65, decode_attention_bandwidth=0.70, prefill_attention_compute=0.50
)
BIAS_STEPS = {
    "decode b1 c512": StepShape(decode_context_lens=(512,)),
    "decode b128 c2048": StepShape(decode_context_lens=(2048,) * 128),
    "prefill 512": StepShape(prefill_chunks=((512, 0),)),
    "prefill 2048": StepShape(prefill_chunks=((2048, 0),)),
    "prefill 8192": StepShape(prefill_chunks=((8192, 0),)),
}


def roofline_bias() -> list[dict]:
    """The datasheet roofline, with the efficiencies it assumed before and those measured now,
    against the aiconfigurator fit of the same GPU (vLLM): the prefill bias of the cross-check."""
    rows = []
    print("\n(d) roofline / aiconfigurator step time, before (matmul 65%, decode attention 70%,")
    print("    prefill attention 50%, no decode floor) and after (measured efficiencies and a")
    print("    10 µs decode-attention floor per layer)")
    print(f"{'model @ GPU':26s} {'step':18s} {'aic ms':>8s} {'before':>7s} {'after':>7s}")
    for model, gpu in (
        ("llama-3-8b", "A100-80GB"),
        ("llama-3-8b", "H100-80GB"),
        ("llama-3-8b", "H200-141GB"),
        ("llama-2-7b", "L40S"),
    ):
        aic = CostModel.from_calibration(load_shipped(f"{model}@{gpu}-tp1-aic-vllm"))
        spec, hardware = ModelSpec.from_preset(model, dtype="bfloat16"), get_hardware(gpu)
        # the old roofline had no decode floor: take that term out of its attention terms
        before = roofline_calibration(spec, hardware, 1, ROOFLINE_BEFORE)
        terms = [t for t in before.cost_model.terms if t.feature != "decode_step"]
        before = CostModel(before.cost_model.model_copy(update={"terms": terms}))
        after = CostModel.from_calibration(roofline_calibration(spec, hardware, 1))
        for name, shape in BIAS_STEPS.items():
            measured = aic.step_time(shape)
            row = {
                "model": model,
                "gpu": gpu,
                "step": name,
                "aic_s": measured,
                "before": before.step_time(shape) / measured,
                "after": after.step_time(shape) / measured,
            }
            rows.append(row)
            print(
                f"{model + ' @ ' + gpu:26s} {name:18s} {measured * 1e3:8.2f} {row['before']:7.2f} "
                f"{row['after']:7.2f}"
            )
    return rows


def markdown_table() -> str:
    """Every shipped calibration: label, source, backend, the held-out error of its first fit."""
    lines = [
        "| calibration | label | source | backend | fit error (held-out / train) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for calibration in sorted(
        load_all_shipped(), key=lambda c: (c.device.hardware or "", c.model.name, c.name)
    ):
        provenance, errors = calibration.provenance, calibration.cost_model.fit_errors
        source = (
            "aiconfigurator " + provenance.database_mode
            if provenance.database_mode
            else "Vidur tables"
            if provenance.method.startswith("vidur")
            else provenance.method.replace("derived from", "Vidur, derived from")
        )
        backend = (
            f"{provenance.backend} {provenance.backend_version}" if provenance.backend else "—"
        )
        error = (
            f"{_pct(errors[0].mape_cross_validated)} / {_pct(errors[0].mape_train)} "
            f"({errors[0].target})"
            if errors
            else "none (datasheet roofline)"
        )
        if errors and calibration.label == "derived":
            error += ", of its source"
        lines.append(
            f"| `{calibration.name}` | {calibration.label} | {source} | {backend} | {error} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the tables here")
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="print the table of every calibration (docs/measured/gpu-types.md)",
    )
    args = parser.parse_args()
    if args.markdown:
        print(markdown_table())
        return
    print(f"# {dt.date.today()} | shipped calibrations only (no GPU, no aiconfigurator needed)")
    aic = sorted(
        (c for c in load_all_shipped() if c.provenance.method == "aiconfigurator kernel tables"),
        key=lambda c: c.name,
    )
    result = {
        "fitted": fitted_table(aic),
        "efficiencies": implied_efficiencies(aic),
        "disagreement": disagreement_table(),
        "roofline_bias": roofline_bias(),
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
