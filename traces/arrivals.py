"""Synthetic arrival processes: constant, Poisson, Gamma (burstiness by CV), diurnal and spike.

Every process is a pydantic model with `sample(rng, duration_s)` (sorted arrival times in
[0, duration_s)), `rate_at(t)` (its intended rate, requests/s) and `peak_rate_per_s`, so a spike
can be laid over any of them, spikes included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveFloat

GapDrawer = Callable[[np.random.Generator, int], np.ndarray]


def _renewal_times(
    rng: np.random.Generator, duration_s: float, rate_per_s: float, draw_gaps: GapDrawer
) -> np.ndarray:
    """Arrival times from i.i.d. gaps, drawn in vectorised chunks until `duration_s` is passed."""
    chunks: list[np.ndarray] = []
    start = 0.0
    expected = rate_per_s * duration_s
    while start < duration_s:
        size = int(expected * 1.05 + 10 * np.sqrt(expected) + 16)
        times = start + np.cumsum(draw_gaps(rng, size))
        chunks.append(times)
        start = float(times[-1])
        expected = rate_per_s * (duration_s - start)
    times = np.concatenate(chunks) if chunks else np.zeros(0)
    return times[times < duration_s]


def _thin(
    rng: np.random.Generator, candidates: np.ndarray, keep_probability: np.ndarray
) -> np.ndarray:
    return candidates[rng.random(len(candidates)) < keep_probability]


class _Arrivals(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _SteadyArrivals(_Arrivals):
    """Arrivals at one rate for the whole trace; the subclasses differ in how the gaps vary."""

    rate_per_s: PositiveFloat

    @property
    def peak_rate_per_s(self) -> float:
        return self.rate_per_s

    def rate_at(self, t: np.ndarray) -> np.ndarray:
        return np.full(np.shape(t), self.rate_per_s)


class ConstantArrivals(_SteadyArrivals):
    """Evenly spaced arrivals, the first at t = 0."""

    kind: Literal["constant"] = "constant"

    def sample(self, rng: np.random.Generator, duration_s: float) -> np.ndarray:
        return np.arange(int(np.ceil(duration_s * self.rate_per_s))) / self.rate_per_s


class PoissonArrivals(_SteadyArrivals):
    """Independent arrivals: exponential gaps (coefficient of variation 1)."""

    kind: Literal["poisson"] = "poisson"

    def sample(self, rng: np.random.Generator, duration_s: float) -> np.ndarray:
        scale = 1.0 / self.rate_per_s
        return _renewal_times(
            rng, duration_s, self.rate_per_s, lambda g, n: g.exponential(scale, n)
        )


class GammaArrivals(_SteadyArrivals):
    """Gamma-distributed gaps: `cv` > 1 is burstier than Poisson, < 1 more regular."""

    kind: Literal["gamma"] = "gamma"
    cv: PositiveFloat = Field(description="coefficient of variation of the inter-arrival gaps")

    def sample(self, rng: np.random.Generator, duration_s: float) -> np.ndarray:
        # Gamma(shape k, scale θ) has mean kθ and CV 1/sqrt(k).
        shape = 1.0 / self.cv**2
        scale = 1.0 / (self.rate_per_s * shape)
        return _renewal_times(
            rng, duration_s, self.rate_per_s, lambda g, n: g.gamma(shape, scale, n)
        )


class DiurnalArrivals(_Arrivals):
    """Poisson arrivals whose rate follows mean · (1 + amplitude · sin(2π (t − phase_s) / period_s))."""

    kind: Literal["diurnal"] = "diurnal"
    mean_rate_per_s: PositiveFloat
    amplitude: float = Field(default=0.5, ge=0.0, le=1.0)
    period_s: PositiveFloat = 86_400.0
    phase_s: float = 0.0

    @property
    def peak_rate_per_s(self) -> float:
        return self.mean_rate_per_s * (1.0 + self.amplitude)

    def rate_at(self, t: np.ndarray) -> np.ndarray:
        angle = 2.0 * np.pi * (np.asarray(t) - self.phase_s) / self.period_s
        return self.mean_rate_per_s * (1.0 + self.amplitude * np.sin(angle))

    def sample(self, rng: np.random.Generator, duration_s: float) -> np.ndarray:
        candidates = PoissonArrivals(rate_per_s=self.peak_rate_per_s).sample(rng, duration_s)
        return _thin(rng, candidates, self.rate_at(candidates) / self.peak_rate_per_s)


class SpikeArrivals(_Arrivals):
    """A surge laid over any `base` process: its rate is multiplied by a piecewise-linear factor
    rising from 1 to `multiplier` over `ramp_up_s` from `start_s`, held for `hold_s`, falling back
    to 1 over `ramp_down_s`.

    The base arrivals are kept as they are, and the extra rate base(t) · (factor(t) − 1) is added
    by thinning a Poisson process, so outside the spike the base process (constant, bursty Gamma,
    diurnal, another spike) is untouched, and inside it the rate is exactly base(t) · factor(t).
    """

    kind: Literal["spike"] = "spike"
    base: ArrivalSpec
    multiplier: float = Field(default=10.0, ge=1.0)
    start_s: NonNegativeFloat = 0.0
    ramp_up_s: NonNegativeFloat = 0.0
    hold_s: NonNegativeFloat = 60.0
    ramp_down_s: NonNegativeFloat = 0.0

    @property
    def end_s(self) -> float:
        return self.start_s + self.ramp_up_s + self.hold_s + self.ramp_down_s

    @property
    def peak_rate_per_s(self) -> float:
        return self.base.peak_rate_per_s * self.multiplier

    def factor_at(self, t: np.ndarray) -> np.ndarray:
        """The rate multiplier at each time (1 outside the spike)."""
        hold_start = self.start_s + self.ramp_up_s
        hold_end = hold_start + self.hold_s
        knots = [self.start_s, hold_start, hold_end, self.end_s]
        return np.interp(t, knots, [1.0, self.multiplier, self.multiplier, 1.0])

    def rate_at(self, t: np.ndarray) -> np.ndarray:
        return self.base.rate_at(t) * self.factor_at(t)

    def sample(self, rng: np.random.Generator, duration_s: float) -> np.ndarray:
        base_times = self.base.sample(rng, duration_s)
        extra_peak = self.base.peak_rate_per_s * (self.multiplier - 1.0)
        window_end = min(self.end_s, duration_s)
        if extra_peak <= 0 or window_end <= self.start_s:
            return base_times
        window = PoissonArrivals(rate_per_s=extra_peak).sample(rng, window_end - self.start_s)
        candidates = self.start_s + window
        extra_rate = self.base.rate_at(candidates) * (self.factor_at(candidates) - 1.0)
        extra = _thin(rng, candidates, extra_rate / extra_peak)
        return np.sort(np.concatenate((base_times, extra)), kind="stable")


ArrivalSpec = Annotated[
    ConstantArrivals | PoissonArrivals | GammaArrivals | DiurnalArrivals | SpikeArrivals,
    Field(discriminator="kind"),
]
SpikeArrivals.model_rebuild()


def mean_rate_per_s(arrivals: ArrivalSpec, duration_s: float, resolution_s: float = 1.0) -> float:
    """The intended mean rate over [0, duration_s), integrated numerically from `rate_at`."""
    grid = np.linspace(0.0, duration_s, max(2, int(duration_s / resolution_s) + 1))
    return float(np.trapezoid(arrivals.rate_at(grid), grid) / duration_s)
