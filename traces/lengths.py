"""Token-length distributions for synthetic traffic, and fitting them to a real trace.

Every distribution is a pydantic model with `sample(rng, n) -> int64 array` and the smallest
value it can produce (`minimum_tokens`), so a prompt distribution that could yield 0 is refused.
"""
from __future__ import annotations

from typing import Annotated, Literal, Union

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveFloat, model_validator

# Dense in the tail, where serving cost and latency outliers live.
FIT_PROBABILITIES = (0.0, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55,
                     0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.975, 0.99, 0.995, 0.999, 1.0)


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
    def _ordered(self) -> "UniformLength":
        if self.high < self.low:
            raise ValueError(f"uniform length high={self.high} < low={self.low}; expected low ≤ high")
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
    def _valid_table(self) -> "EmpiricalLength":
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
    def _known(self) -> "PresetLength":
        from traces.fitted import FITTED_LENGTHS

        if self.name not in FITTED_LENGTHS:
            raise ValueError(f"unknown length preset {self.name!r}; expected one of {sorted(FITTED_LENGTHS)}")
        return self

    def resolve(self) -> EmpiricalLength:
        from traces.fitted import fitted_length

        return fitted_length(self.name)

    @property
    def minimum_tokens(self) -> int:
        return self.resolve().minimum_tokens

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.resolve().sample(rng, n)


LengthSpec = Annotated[
    Union[FixedLength, UniformLength, LognormalLength, EmpiricalLength, PresetLength],
    Field(discriminator="kind"),
]


def fit_empirical(values: np.ndarray, provenance: str = "",
                  probabilities: tuple[float, ...] = FIT_PROBABILITIES) -> EmpiricalLength:
    quantiles = np.quantile(np.asarray(values, dtype=np.float64), probabilities)
    return EmpiricalLength(probabilities=tuple(probabilities),
                           quantiles=tuple(round(float(q), 3) for q in quantiles), provenance=provenance)


def fit_lognormal(values: np.ndarray) -> LognormalLength:
    """Maximum-likelihood lognormal of the positive values: median exp(mean log x), sigma = std log x."""
    positive = np.asarray(values, dtype=np.float64)
    positive = positive[positive > 0]
    if len(positive) == 0:
        raise ValueError("cannot fit a lognormal: no positive lengths")
    logs = np.log(positive)
    return LognormalLength(median_tokens=round(float(np.exp(logs.mean())), 3),
                           sigma=round(float(logs.std()), 4), min_tokens=int(positive.min()),
                           max_tokens=int(positive.max()))


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
    raise ValueError(f"length {text!r} not understood; expected fixed:N, uniform:LOW:HIGH, "
                     f"lognormal:MEDIAN:SIGMA, a preset name, or a JSON object")
