"""The calibrations shipped in simulator/calibration/calibrations/: which ones, how they are rebuilt from the
public tables, and how the simulator picks the best one for a (model, GPU, TP) — measured first,
then fitted, then derived, and a roofline estimate when nothing else exists."""
from pathlib import Path

from rich.progress import track

from simulator.calibration.schema import SHIPPED_DIR, Calibration, shipped_calibration_paths
from simulator.hardware import get_hardware
from simulator.model_spec import ModelSpec
from simulator.calibration.roofline import derive_for_hardware, roofline_calibration
from simulator.calibration.vidur_import import VIDUR_DIR, model_spec, vidur_calibration

# (model, GPU, tensor parallel) fitted on the public tables.
FITTED = (
    ("llama-2-7b", "A100-80GB", 1), ("llama-2-7b", "H100-80GB", 1), ("llama-2-7b", "A40", 1),
    ("codellama-34b", "A100-80GB", 2), ("codellama-34b", "H100-80GB", 2),
    ("llama-2-70b", "A100-80GB", 4), ("llama-2-70b", "A100-80GB", 8),
    ("llama-2-70b", "H100-80GB", 4), ("llama-2-70b", "H100-80GB", 8),
    ("llama-3-8b", "A100-80GB", 1), ("llama-3-70b", "A100-80GB", 4), ("llama-3-70b", "A100-80GB", 8),
)
# Every H100 fit is carried to the H200 by datasheet ratios.
DERIVED = (("H100-80GB", "H200-141GB"),)
# Catalog GPUs without any public table, plus the H200 for the model we would profile there.
ROOFLINE = tuple((model, gpu, 1) for gpu in ("A100-40GB", "L40S", "L4", "A10G")
                 for model in ("llama-2-7b", "llama-3-8b"))
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
        built += [derive_for_hardware(calibration, get_hardware(source), get_hardware(target))
                  for calibration in list(built) if calibration.device.hardware == source]
    for model, gpu, tensor_parallel in ROOFLINE:
        built.append(roofline_calibration(_any_model_spec(model), get_hardware(gpu), tensor_parallel))
    return [calibration.save(Path(out_dir) / f"{file_stem(calibration)}.json") for calibration in built]


def _any_model_spec(name: str) -> ModelSpec:
    try:
        return model_spec(name)
    except ValueError:
        return ModelSpec.from_preset(name)


def load_all_shipped() -> list[Calibration]:
    return [Calibration.load(path) for path in shipped_calibration_paths()]


def calibration_for(model: str, hardware: str, tensor_parallel: int = 1,
                    candidates: list[Calibration] | None = None) -> Calibration:
    """The most trustworthy calibration for this model on this hardware at this TP degree;
    a roofline estimate from the catalog when none is shipped."""
    gpu = get_hardware(hardware)
    candidates = load_all_shipped() if candidates is None else candidates
    matching = [calibration for calibration in candidates
                if calibration.model.name == model and calibration.device.hardware == gpu.name
                and calibration.device.tensor_parallel == tensor_parallel and calibration.cost_model is not None]
    if matching:
        return min(matching, key=lambda calibration: (_RANK[calibration.label], calibration.provenance.method == "roofline"))
    return roofline_calibration(_any_model_spec(model), gpu, tensor_parallel)
