"""Token-length distributions for synthetic traffic, and fitting them to a real trace.

Every distribution is a pydantic model with `sample(rng, n) -> int64 array` and the smallest
value it can produce (`minimum_tokens`), so a prompt distribution that could yield 0 is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveFloat, model_validator

from traces.fitted import FIT_PROBABILITIES, FITTED_LENGTHS

if TYPE_CHECKING:
    from traces.trace import Trace


class _Length(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FixedLength(_Length):
    kind: Literal["fixed"] = "fixed"
    tokens: NonNegativeInt

    @property
    def minimum_tokens(self) -> int:
        return self.tokens

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.tokens, dtype=np.int64)


class UniformLength(_Length):
    """Whole numbers from `low` to `high`, both included, equally likely."""

    kind: Literal["uniform"] = "uniform"
    low: NonNegativeInt
    high: NonNegativeInt

    @model_validator(mode="after")
    def _ordered(self) -> UniformLength:
        if self.high < self.low:
            raise ValueError(
                f"uniform length high={self.high} < low={self.low}; expected low ≤ high"
            )
        return self

    @property
    def minimum_tokens(self) -> int:
        return self.low

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.integers(self.low, self.high, size=n, endpoint=True, dtype=np.int64)


class LognormalLength(_Length):
    """exp(Normal(log median, sigma)), rounded and clipped to [min_tokens, max_tokens]."""

    kind: Literal["lognormal"] = "lognormal"
    median_tokens: PositiveFloat
    sigma: float = Field(ge=0.0)
    min_tokens: NonNegativeInt = 1
    max_tokens: NonNegativeInt | None = None

    @property
    def minimum_tokens(self) -> int:
        return self.min_tokens

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        values = np.rint(rng.lognormal(np.log(self.median_tokens), self.sigma, n))
        return np.clip(values, self.min_tokens, self.max_tokens).astype(np.int64)


class EmpiricalLength(_Length):
    """Inverse-CDF sampling from quantiles of a real trace, interpolated linearly between them."""

    kind: Literal["empirical"] = "empirical"
    probabilities: tuple[float, ...]
    quantiles: tuple[float, ...]
    provenance: str = ""

    @model_validator(mode="after")
    def _valid_table(self) -> EmpiricalLength:
        probs, values = np.asarray(self.probabilities), np.asarray(self.quantiles)
        if len(probs) != len(values) or len(probs) < 2:
            raise ValueError("empirical length needs ≥ 2 probabilities and as many quantiles")
        if probs[0] != 0.0 or probs[-1] != 1.0 or np.any(np.diff(probs) <= 0):
            raise ValueError("empirical probabilities must rise strictly from 0 to 1")
        if np.any(np.diff(values) < 0) or values[0] < 0:
            raise ValueError("empirical quantiles must be ≥ 0 and non-decreasing")
        return self

    @property
    def minimum_tokens(self) -> int:
        return int(np.rint(self.quantiles[0]))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        values = np.interp(rng.random(n), self.probabilities, self.quantiles)
        return np.rint(values).astype(np.int64)


class PresetLength(_Length):
    """A fitted distribution shipped with surgeplan (see `traces.fitted`), by name."""

    kind: Literal["preset"] = "preset"
    name: str

    @model_validator(mode="after")
    def _known(self) -> PresetLength:
        if self.name not in FITTED_LENGTHS:
            raise ValueError(
                f"unknown length preset {self.name!r}; expected one of {sorted(FITTED_LENGTHS)}"
            )
        return self

    def resolve(self) -> EmpiricalLength:
        return fitted_length(self.name)

    @property
    def minimum_tokens(self) -> int:
        return self.resolve().minimum_tokens

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.resolve().sample(rng, n)


LengthSpec = Annotated[
    FixedLength | UniformLength | LognormalLength | EmpiricalLength | PresetLength,
    Field(discriminator="kind"),
]


def fit_empirical(
    values: np.ndarray, provenance: str = "", probabilities: tuple[float, ...] = FIT_PROBABILITIES
) -> EmpiricalLength:
    quantiles = np.quantile(np.asarray(values, dtype=np.float64), probabilities)
    return EmpiricalLength(
        probabilities=tuple(probabilities),
        quantiles=tuple(round(float(q), 3) for q in quantiles),
        provenance=provenance,
    )


def fit_lognormal(values: np.ndarray) -> LognormalLength:
    """Maximum-likelihood lognormal of the positive values: median exp(mean log x), sigma = std log x."""
    positive = np.asarray(values, dtype=np.float64)
    positive = positive[positive > 0]
    if len(positive) == 0:
        raise ValueError("cannot fit a lognormal: no positive lengths")
    logs = np.log(positive)
    return LognormalLength(
        median_tokens=round(float(np.exp(logs.mean())), 3),
        sigma=round(float(logs.std()), 4),
        min_tokens=int(positive.min()),
        max_tokens=int(positive.max()),
    )


def parse_length(text: str) -> LengthSpec:
    """A length distribution from a short option: `fixed:N`, `uniform:LOW:HIGH`,
    `lognormal:MEDIAN:SIGMA`, a preset name such as `azure-conv-prompt`, or a JSON object."""
    from pydantic import TypeAdapter

    kind, _, rest = text.partition(":")
    args = rest.split(":") if rest else []
    try:
        if text.lstrip().startswith("{"):
            return TypeAdapter(LengthSpec).validate_json(text)
        if kind == "fixed" and len(args) == 1:
            return FixedLength(tokens=int(args[0]))
        if kind == "uniform" and len(args) == 2:
            return UniformLength(low=int(args[0]), high=int(args[1]))
        if kind == "lognormal" and len(args) == 2:
            return LognormalLength(median_tokens=float(args[0]), sigma=float(args[1]))
        if not args:
            return PresetLength(name=text)
    except ValueError as error:
        raise ValueError(f"length {text!r}: {error}") from None
    raise ValueError(
        f"length {text!r} not understood; expected fixed:N, uniform:LOW:HIGH, "
        f"lognormal:MEDIAN:SIGMA, a preset name, or a JSON object"
    )


def fitted_length(name: str) -> EmpiricalLength:
    """A length distribution shipped in `traces.fitted`, by name (e.g. `azure-conv-prompt`)."""
    if name not in FITTED_LENGTHS:
        raise KeyError(f"unknown fitted length {name!r}; expected one of {sorted(FITTED_LENGTHS)}")
    table = FITTED_LENGTHS[name]
    return EmpiricalLength(
        probabilities=FIT_PROBABILITIES,
        quantiles=table["quantiles"],
        provenance=table["provenance"],
    )


def fitted_lognormal(name: str) -> LognormalLength:
    empirical = fitted_length(name)
    median, sigma = FITTED_LENGTHS[name]["lognormal_median_sigma"]
    return LognormalLength(
        median_tokens=median,
        sigma=sigma,
        min_tokens=int(empirical.quantiles[0]),
        max_tokens=int(empirical.quantiles[-1]),
    )


def fit_trace_lengths(trace: Trace) -> dict[str, dict]:
    """The same figures as FITTED_LENGTHS, computed from any trace (keys `prompt` and `output`)."""
    fits = {}
    for column in ("prompt", "output"):
        values = getattr(trace, f"{column}_tokens")
        lognormal = fit_lognormal(values)
        fits[column] = {
            "empirical": fit_empirical(values, provenance=f"{trace.name} {column}_tokens"),
            "lognormal_median_sigma": (lognormal.median_tokens, lognormal.sigma),
        }
    return fits
