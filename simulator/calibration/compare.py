"""Where two calibrations of one model on one GPU disagree, term by term: each is asked for the
time its terms of one kind (linear layers, decode attention, prefill attention, LM head, all-reduce,
host) contribute to the same reference steps. Used to set Vidur's tables beside aiconfigurator's."""

from dataclasses import dataclass

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import CostModel
from simulator.calibration.schema import Calibration

REFERENCE_STEPS: dict[str, StepShape] = {
    "decode b1 c512": StepShape(decode_context_lens=(512,)),
    "decode b32 c1024": StepShape(decode_context_lens=(1024,) * 32),
    "decode b128 c2048": StepShape(decode_context_lens=(2048,) * 128),
    "prefill 512": StepShape(prefill_chunks=((512, 0),)),
    "prefill 2048": StepShape(prefill_chunks=((2048, 0),)),
    "mixed 256+16": StepShape(prefill_chunks=((256, 0),), decode_context_lens=(512,) * 16),
}
# Term kinds, matched on the start of a term's name; the first match wins.
KINDS = (
    ("linear layers", ("linear layers", "embedding", "elementwise")),
    ("decode attention", ("decode attention",)),
    ("prefill attention", ("prefill attention",)),
    ("LM head", ("LM head",)),
    ("all-reduce", ("tensor-parallel all-reduce",)),
    ("host", ("host",)),
)


def term_kind(name: str) -> str:
    for kind, prefixes in KINDS:
        if name.startswith(prefixes):
            return kind
    return "other"


def seconds_by_kind(calibration: Calibration, shape: StepShape) -> dict[str, float]:
    parts: dict[str, float] = {}
    for name, seconds in CostModel.from_calibration(calibration).explain(shape).items():
        parts[term_kind(name)] = parts.get(term_kind(name), 0.0) + seconds
    return parts


@dataclass(frozen=True)
class Disagreement:
    step: str
    kind: str  # a term kind, or "step total"
    first_s: float
    second_s: float

    @property
    def ratio(self) -> float | None:
        """second / first; None where the first has no such time."""
        return self.second_s / self.first_s if self.first_s > 0 else None


def disagreement(
    first: Calibration, second: Calibration, steps: dict[str, StepShape] = REFERENCE_STEPS
) -> list[Disagreement]:
    """Every (reference step, term kind) with time in either calibration, then each step's total."""
    if (first.model.name, first.device.tensor_parallel) != (
        second.model.name,
        second.device.tensor_parallel,
    ):
        raise ValueError(
            f"{first.name} and {second.name} are not the same model at the same TP; "
            "expected a pair "
            "that differs only in its source"
        )
    rows = []
    for label, shape in steps.items():
        a, b = seconds_by_kind(first, shape), seconds_by_kind(second, shape)
        for kind in [kind for kind, _ in KINDS] + ["other"]:
            if a.get(kind, 0.0) or b.get(kind, 0.0):
                rows.append(Disagreement(label, kind, a.get(kind, 0.0), b.get(kind, 0.0)))
        rows.append(Disagreement(label, "step total", sum(a.values()), sum(b.values())))
    return rows
