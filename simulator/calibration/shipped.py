"""The calibrations shipped in simulator/calibration/calibrations/: which ones, how they are rebuilt from the
public tables, and how the simulator picks the best one for a (model, GPU, TP) — measured first,
then fitted, then derived, and a roofline estimate when nothing else exists."""

from pathlib import Path

from rich.progress import track

from simulator.calibration.carry_hardware import derive_for_hardware
from simulator.calibration.plausibility import check_plausible
from simulator.calibration.roofline import roofline_calibration
from simulator.calibration.schema import SHIPPED_DIR, Calibration, shipped_calibration_paths
from simulator.calibration.vidur_import import VIDUR_DIR, model_spec, vidur_calibration
from simulator.calibration.weight_dtype import supports_weight_dtype
from simulator.hardware.catalog import get_hardware
from simulator.model_spec import ModelSpec

# (model, GPU, tensor parallel, backend) fitted on aiconfigurator's measured kernel tables: every GPU
# it measured, vLLM (the default engine profile's stack); SGLang and TRT-LLM where the planner's
# main GPUs are concerned. Llama-3-70B at the TP its weights need (TP8 on the 24 GB B60). Each also
# carries fp8-weight linear terms where the GPU's sweep measured fp8 GEMMs (not the A100).
_AIC_GPUS = (
    "A100-80GB",
    "H100-80GB",
    "H200-141GB",
    "L40S",
    "B200-180GB",
    "B300-288GB",
    "GB200-186GB",
    "GB300-288GB",
    "RTX-PRO-6000-96GB",
    "Arc-Pro-B60-24GB",
)
AIC_FITTED = tuple(
    (model, gpu, 1, "vllm") for gpu in _AIC_GPUS for model in ("llama-2-7b", "llama-3-8b")
)
AIC_FITTED += tuple(
    ("llama-3-70b", gpu, 8 if gpu == "Arc-Pro-B60-24GB" else 4, "vllm") for gpu in _AIC_GPUS
)
AIC_FITTED += tuple(
    ("llama-3-70b", gpu, 8, "vllm")
    for gpu in ("A100-80GB", "H100-80GB", "H200-141GB", "B200-180GB")
)
AIC_FITTED += tuple(
    (model, gpu, tp, backend)
    for backend in ("sglang", "trtllm")
    for gpu in ("H100-80GB", "H200-141GB", "B200-180GB")
    for model, tp in (("llama-2-7b", 1), ("llama-3-8b", 1), ("llama-3-70b", 4))
)
# Llama-3-70B at the other tensor-parallel degrees InferenceMAX served it at (its Llama-3.1-70B fp8 rows
# in aiconfigurator's silicon table, `aic-silicon-*-70b-more-tp`): vLLM on H100 at TP2, on H200 and
# B200 at TP1 / TP2; TensorRT-LLM on H200 and B200 at TP1 / TP2 / TP8
AIC_FITTED += (("llama-3-70b", "H100-80GB", 2, "vllm"),)
AIC_FITTED += tuple(
    ("llama-3-70b", gpu, tp, "vllm") for gpu in ("H200-141GB", "B200-180GB") for tp in (1, 2)
)
AIC_FITTED += tuple(
    ("llama-3-70b", gpu, tp, "trtllm") for gpu in ("H200-141GB", "B200-180GB") for tp in (1, 2, 8)
)
# Llama-2-70B with TensorRT-LLM's kernels in MLPerf Inference v4.1's FP8 layouts (NVIDIA's
# configs/llama2-70b: H100 TP2 × 4, H200 TP1 × 8; and H200 at H100's TP2), with the fp8 GEMM terms
# their weights need (benchmarks/kv_cache_plan.py (b))
AIC_FITTED += (
    ("llama-2-70b", "H100-80GB", 2, "trtllm"),
    ("llama-2-70b", "H200-141GB", 1, "trtllm"),
    ("llama-2-70b", "H200-141GB", 2, "trtllm"),
)

# (model, GPU, tensor parallel) fitted on the public tables.
FITTED = (
    ("llama-2-7b", "A100-80GB", 1),
    ("llama-2-7b", "H100-80GB", 1),
    ("llama-2-7b", "A40", 1),
    ("codellama-34b", "A100-80GB", 2),
    ("codellama-34b", "H100-80GB", 2),
    ("llama-2-70b", "A100-80GB", 4),
    ("llama-2-70b", "A100-80GB", 8),
    ("llama-2-70b", "H100-80GB", 4),
    ("llama-2-70b", "H100-80GB", 8),
    ("llama-3-8b", "A100-80GB", 1),
    ("llama-3-70b", "A100-80GB", 4),
    ("llama-3-70b", "A100-80GB", 8),
)
# (source, target): every fit on the source carried to the target by datasheet ratios (the same chip
# with other memory: H200, more HBM3e; A100-40GB, HBM2 at 1.56 TB/s instead of HBM2e at 2.04), which
# ranks above a roofline estimate
DERIVED = (("H100-80GB", "H200-141GB"), ("A100-80GB", "A100-40GB"))
# Catalog GPUs without any public table, plus the H200 for the model we would profile there.
ROOFLINE = tuple(
    (model, gpu, 1)
    for gpu in ("A100-40GB", "L40S", "L4", "A10G")
    for model in ("llama-2-7b", "llama-3-8b")
)
ROOFLINE += (("llama-3-8b", "H200-141GB", 1), ("llama-3-8b", "H100-80GB", 1))

_RANK = {"measured": 0, "fitted": 1, "derived": 2}


def file_stem(calibration: Calibration) -> str:
    """A portable file name: lower case, no '@'."""
    return calibration.name.replace("@", "_on_").lower()


def build_shipped(out_dir: Path = SHIPPED_DIR, vidur_dir: Path = VIDUR_DIR) -> list[Path]:
    """Rebuild every fitted, derived and roofline calibration from the public tables and datasheets."""
    built: list[Calibration] = []
    for model, gpu, tensor_parallel in track(FITTED, description="fitting public tables"):
        built.append(vidur_calibration(model, gpu, tensor_parallel, vidur_dir))
    for source, target in DERIVED:
        built += [
            derive_for_hardware(calibration, get_hardware(source), get_hardware(target))
            for calibration in list(built)
            if calibration.device.hardware == source
        ]
    for model, gpu, tensor_parallel in ROOFLINE:
        built.append(
            roofline_calibration(_any_model_spec(model), get_hardware(gpu), tensor_parallel)
        )
    checked = [check_plausible(calibration) for calibration in built]  # all before any is written
    return [
        calibration.save(Path(out_dir) / f"{file_stem(calibration)}.json")
        for calibration in checked
    ]


def build_aic(
    out_dir: Path = SHIPPED_DIR, root: Path | None = None, combos: tuple = AIC_FITTED
) -> list[Path]:
    """Rebuild the calibrations fitted on aiconfigurator's installed database (or a folder laid
    out like it): needs `pip install 'surgeplan[aic]'`, no network."""
    from simulator.calibration.aic_import import aic_calibration

    paths = []
    for model, gpu, tensor_parallel, backend in track(
        combos, description="fitting aiconfigurator tables"
    ):
        calibration = aic_calibration(model, gpu, tensor_parallel, backend, root)
        paths.append(calibration.save(Path(out_dir) / f"{file_stem(calibration)}.json"))
    return paths


def _any_model_spec(name: str) -> ModelSpec:
    try:
        return model_spec(name)
    except ValueError:
        return ModelSpec.from_preset(name)


def load_all_shipped() -> list[Calibration]:
    return [Calibration.load(path) for path in shipped_calibration_paths()]


def measured_support(calibration: Calibration) -> int:
    """How many distinct GPU-kernel terms were fitted on measurements rather than derived: what makes
    one public source better supported than another for the same GPU (host time is not counted)."""
    terms = calibration.cost_model.terms if calibration.cost_model else []
    return len({term.name for term in terms if term.label != "derived" and term.bound != "host"})


def calibration_rank(calibration: Calibration, backend: str = "vllm") -> tuple:
    """Sort key, best first: measured, then fitted, then derived; roofline last; the requested
    serving backend (a calibration that names none, e.g. Vidur's, is not passed over for it); the
    most terms fitted on measurements."""
    return (
        _RANK[calibration.label],
        calibration.provenance.method == "roofline",
        (calibration.provenance.backend or backend) != backend,
        -measured_support(calibration),
    )


def calibration_for(
    model: str,
    hardware: str,
    tensor_parallel: int = 1,
    candidates: list[Calibration] | None = None,
    backend: str = "vllm",
    weight_dtype: str = "auto",
) -> Calibration:
    """The most trustworthy calibration for this model on this hardware at this TP degree (see
    `calibration_rank`), among those with linear-layer terms for `weight_dtype` when any has them
    (fp8: fitted on measured fp8 GEMMs; otherwise the best one, which `weight_dtype_calibration`
    then refuses by name); a roofline estimate from the catalog when none is shipped."""
    gpu = get_hardware(hardware)
    candidates = load_all_shipped() if candidates is None else candidates
    matching = [
        calibration
        for calibration in candidates
        if calibration.model.name == model
        and calibration.device.hardware == gpu.name
        and calibration.device.tensor_parallel == tensor_parallel
        and calibration.cost_model is not None
    ]
    supporting = [c for c in matching if supports_weight_dtype(c, weight_dtype)]
    matching = supporting or matching
    if matching:
        return min(matching, key=lambda calibration: calibration_rank(calibration, backend))
    return roofline_calibration(_any_model_spec(model), gpu, tensor_parallel)
