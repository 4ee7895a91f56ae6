"""An engine profile's error on published measurements, and the error band a plan reads from it.

`surgeplan validate --published` replays public measurements of a serving stack; each profile stores
the result per published set, GPU and split (fit or held out), every tensor-parallel degree pooled
and per degree (`ProfileError`, written by `profile_fit`). The planner re-checks its answer with every
step `held_out`'s error slower and faster: the held-out rows of the plan's own degree on its GPU where
there are at least `DEGREE_MIN_ROWS` of them (a TP8 group errs more than a TP2 one on the same GPU,
up to 2x: docs/measured/real-gpus.md); else those of its class, one GPU or a tensor-parallel group
(their errors differ about twofold), on its GPU, else on every GPU; without rows of its class, the
pooled rows of its GPU, else of every GPU. Apart from the profile
because it is the validation's record, read by the planner, `calibrations show` and the dashboard.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

# the classes of tensor-parallel degree the band and the published summary tell apart
TP_CLASSES: dict[str, Callable[[int], bool]] = {
    "TP1": lambda tensor_parallel: tensor_parallel == 1,
    "TP>1": lambda tensor_parallel: tensor_parallel > 1,
}
# a degree's own rows on a GPU are read alone from this many on: a median of fewer moves with a row or
# two (the published sets hold 9-36 rows per GPU and degree)
DEGREE_MIN_ROWS = 12


def tp_class(tensor_parallel: int) -> str:
    """'TP1' for one GPU, 'TP>1' for a tensor-parallel group."""
    return next(name for name, member in TP_CLASSES.items() if member(tensor_parallel))


class ProfileError(BaseModel):
    """The profile's error on published measurements (`surgeplan validate --published`): fractions."""

    model_config = ConfigDict(extra="forbid")

    source: str
    gpu: str
    split: Literal["fit", "held_out"]
    num_rows: int = Field(ge=0)
    median_abs_error: float = Field(ge=0)
    bias: float = Field(gt=0, description="geometric mean of simulated / measured")
    within_10pct: float = Field(ge=0, le=1)
    tensor_parallel: int | None = Field(
        None,
        ge=1,
        description="the rows of runs at this tensor-parallel degree only; None: every degree pooled",
    )


def held_out(
    errors: list[ProfileError], gpu: str | None = None, tensor_parallel: int | None = None
) -> tuple[float | None, str]:
    """(median |error| on held-out published rows, each set's weighed by its rows; which rows, in
    words) for a plan on `gpu` at `tensor_parallel` (see the module's docstring for the order)."""
    rows = [e for e in errors if e.split == "held_out" and e.num_rows]
    if tensor_parallel is not None and tensor_parallel > 1:
        degree = [e for e in rows if e.tensor_parallel == tensor_parallel and e.gpu == gpu]
        if sum(e.num_rows for e in degree) >= DEGREE_MIN_ROWS:
            return _row_weighted(degree), f"TP{tensor_parallel} runs on {gpu}"
    if tensor_parallel is not None:
        wanted = tp_class(tensor_parallel)
        same = [e for e in rows if e.tensor_parallel and tp_class(e.tensor_parallel) == wanted]
        mine = [e for e in same if e.gpu == gpu]
        if same:
            runs = "tensor-parallel runs" if wanted == "TP>1" else "single-GPU runs"
            return _row_weighted(mine or same), f"{runs} on {gpu if mine else 'every GPU'}"
    pooled = [e for e in rows if e.tensor_parallel is None]
    mine = [e for e in pooled if e.gpu == gpu]
    if not pooled:
        return None, "no published rows"
    return _row_weighted(mine or pooled), f"runs on {gpu if mine else 'every GPU'}"


def _row_weighted(errors: list[ProfileError]) -> float:
    """The median |errors| of published sets averaged, each weighed by its rows."""
    weights = np.array([e.num_rows for e in errors], dtype=float)
    return float(np.average([e.median_abs_error for e in errors], weights=weights))


__all__ = ["DEGREE_MIN_ROWS", "TP_CLASSES", "ProfileError", "held_out", "tp_class"]
