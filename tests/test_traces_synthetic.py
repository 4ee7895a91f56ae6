"""Synthetic arrivals and lengths, checked statistically on large samples."""

import numpy as np
import pytest
from pydantic import ValidationError

from traces.arrivals import (
    ConstantArrivals,
    DiurnalArrivals,
    GammaArrivals,
    PoissonArrivals,
    SpikeArrivals,
    mean_rate_per_s,
)
from traces.lengths import (
    EmpiricalLength,
    FixedLength,
    LognormalLength,
    PresetLength,
    UniformLength,
    fit_empirical,
    parse_length,
)
from traces.stats import interarrival_cv
from traces.synthetic import SyntheticTraceSpec, spike_trace, synthesize


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("rate", [0.7, 40.0, 900.0])
def test_poisson_rate_within_two_percent(rate):
    duration_s = 200_000 / rate
    times = PoissonArrivals(rate_per_s=rate).sample(rng(41), duration_s)
    assert len(times) / duration_s == pytest.approx(rate, rel=0.02)
    assert interarrival_cv(times) == pytest.approx(1.0, rel=0.02)
    assert times.min() >= 0 and times.max() < duration_s and np.all(np.diff(times) >= 0)


@pytest.mark.parametrize("cv", [0.3, 1.0, 2.5, 4.0])
def test_gamma_cv_within_five_percent(cv):
    times = GammaArrivals(rate_per_s=20.0, cv=cv).sample(rng(42), 20_000.0)
    assert interarrival_cv(times) == pytest.approx(cv, rel=0.05)
    assert len(times) / 20_000.0 == pytest.approx(20.0, rel=0.05)


def test_constant_arrivals_are_evenly_spaced():
    times = ConstantArrivals(rate_per_s=4.0).sample(rng(43), 10.0)
    assert times.tolist() == [i / 4 for i in range(40)]


def test_spike_windows_at_the_right_rates():
    spike = SpikeArrivals(
        base=PoissonArrivals(rate_per_s=200.0),
        multiplier=10.0,
        start_s=300.0,
        ramp_up_s=60.0,
        hold_s=120.0,
        ramp_down_s=60.0,
    )
    times = spike.sample(rng(44), 900.0)

    def rate(a: float, b: float) -> float:
        return ((times >= a) & (times < b)).sum() / (b - a)

    assert rate(0, 300) == pytest.approx(200.0, rel=0.02)
    assert rate(360, 480) == pytest.approx(2000.0, rel=0.02)
    assert rate(540, 900) == pytest.approx(200.0, rel=0.02)
    assert rate(300, 360) == pytest.approx(1100.0, rel=0.02)  # linear ramp: mean of 200 and 2000
    assert rate(330, 345) == pytest.approx(spike.rate_at(np.array([337.5]))[0], rel=0.05)
    assert mean_rate_per_s(spike, 900.0) == pytest.approx(len(times) / 900.0, rel=0.02)


def test_spike_leaves_the_base_process_alone_outside_the_surge():
    base = GammaArrivals(rate_per_s=50.0, cv=3.0)
    times = SpikeArrivals(base=base, multiplier=5.0, start_s=5_000.0, hold_s=100.0).sample(
        rng(45), 10_000.0
    )
    before = times[times < 5_000.0]
    assert interarrival_cv(before) == pytest.approx(3.0, rel=0.1)
    assert ((times >= 5_000) & (times < 5_100)).sum() / 100 == pytest.approx(250.0, rel=0.15)


def test_spikes_compose_with_diurnal_and_with_each_other():
    diurnal = DiurnalArrivals(mean_rate_per_s=100.0, amplitude=0.8, period_s=1000.0)
    times = diurnal.sample(rng(46), 10_000.0)
    peak = np.isin(((times % 1000) // 125).astype(int), [1, 2])  # phase 45°-135°: near the peak
    trough = np.isin(((times % 1000) // 125).astype(int), [5, 6])
    assert peak.sum() / trough.sum() == pytest.approx(
        (1 + 0.8 * 0.9003) / (1 - 0.8 * 0.9003), rel=0.05
    )
    twice = SpikeArrivals(
        base=SpikeArrivals(
            base=PoissonArrivals(rate_per_s=100.0), multiplier=3.0, start_s=100.0, hold_s=200.0
        ),
        multiplier=2.0,
        start_s=200.0,
        hold_s=200.0,
    )
    times = twice.sample(rng(47), 500.0)
    counts = np.histogram(times, bins=[0, 100, 200, 300, 400, 500])[0] / 100
    assert counts == pytest.approx([100, 300, 600, 200, 100], rel=0.05)


def test_same_seed_same_trace_and_streams_are_independent():
    spec = SyntheticTraceSpec(
        arrivals=GammaArrivals(rate_per_s=30.0, cv=2.0), duration_s=300.0, seed=7
    )
    assert synthesize(spec) == synthesize(spec)
    other_seed = synthesize(spec.model_copy(update={"seed": 8}))
    assert not np.array_equal(other_seed.arrival_s[:100], synthesize(spec).arrival_s[:100])
    other_lengths = synthesize(spec.model_copy(update={"prompt": FixedLength(tokens=5)}))
    assert np.array_equal(other_lengths.arrival_s, synthesize(spec).arrival_s)
    assert set(other_lengths.prompt_tokens.tolist()) == {5}


def test_spec_round_trips_through_json_and_records_provenance():
    spec = SyntheticTraceSpec(
        arrivals=SpikeArrivals(
            base=DiurnalArrivals(mean_rate_per_s=5.0, period_s=600.0),
            multiplier=4.0,
            start_s=60.0,
            ramp_up_s=10.0,
            hold_s=30.0,
            ramp_down_s=10.0,
        ),
        prompt=LognormalLength(median_tokens=900, sigma=0.8),
        output=UniformLength(low=10, high=20),
        duration_s=400.0,
        seed=3,
        max_requests=500,
    )
    again = SyntheticTraceSpec.model_validate_json(spec.model_dump_json())
    assert again == spec
    trace = synthesize(again)
    assert len(trace) <= 500 and spec.model_dump_json() in trace.provenance[0]


def test_prompts_that_could_be_empty_are_refused():
    with pytest.raises(ValidationError, match="≥ 1 token"):
        SyntheticTraceSpec(
            arrivals=PoissonArrivals(rate_per_s=1.0),
            duration_s=10.0,
            prompt=UniformLength(low=0, high=5),
        )


def test_length_distributions():
    assert set(UniformLength(low=3, high=6).sample(rng(48), 10_000).tolist()) == {3, 4, 5, 6}
    lognormal = LognormalLength(median_tokens=500, sigma=1.0, max_tokens=4000).sample(
        rng(49), 200_000
    )
    assert np.median(lognormal) == pytest.approx(500, rel=0.02)
    assert lognormal.max() == 4000 and lognormal.min() >= 1
    values = rng(50).gamma(2.0, 300.0, 100_000)
    fitted = fit_empirical(values)
    drawn = fitted.sample(rng(51), 200_000)
    for q in (0.1, 0.5, 0.9, 0.99):
        assert np.quantile(drawn, q) == pytest.approx(np.quantile(values, q), rel=0.03)
    with pytest.raises(ValidationError):
        EmpiricalLength(probabilities=(0.0, 0.5), quantiles=(1.0, 2.0))


def test_parse_length_options():
    assert parse_length("fixed:128") == FixedLength(tokens=128)
    assert parse_length("uniform:1:9") == UniformLength(low=1, high=9)
    assert parse_length("lognormal:700:0.9") == LognormalLength(median_tokens=700, sigma=0.9)
    assert parse_length("azure-code-output") == PresetLength(name="azure-code-output")
    assert parse_length('{"kind": "fixed", "tokens": 3}') == FixedLength(tokens=3)
    for bad in ("fixed", "uniform:9:1", "gaussian:1:2", "azure-nope"):
        with pytest.raises(ValueError, match="length"):
            parse_length(bad)


def test_spike_trace_shortcut():
    trace = spike_trace(50.0, 10.0, 600.0, start_s=200.0, hold_s=100.0, seed=5)
    inside = ((trace.arrival_s >= 200) & (trace.arrival_s < 300)).sum() / 100
    assert inside == pytest.approx(500.0, rel=0.1)
    assert trace.prompt_tokens.min() >= 1
