"""Statistics: windowed rates, burstiness, percentiles, prefix-block reuse."""

import numpy as np
import pytest

from traces import Trace
from traces.arrivals import PoissonArrivals, SpikeArrivals
from traces.stats import compute_stats, interarrival_cv, prefix_block_repeat_share, rate_per_window


def test_rate_per_window_counts_every_request():
    rng = np.random.default_rng(81)
    arrival = np.sort(rng.uniform(3.0, 1003.0, 5000))
    trace = Trace(arrival, np.ones(5000), np.ones(5000))
    starts, rates = rate_per_window(trace, 10.0)
    assert starts[0] == arrival[0] and np.allclose(np.diff(starts), 10.0)
    assert rates.sum() * 10.0 == pytest.approx(5000)
    expected = np.histogram(arrival, bins=np.append(starts, starts[-1] + 10.0))[0] / 10.0
    assert np.array_equal(rates, expected)


def test_spike_shows_in_peak_to_mean():
    times = SpikeArrivals(
        base=PoissonArrivals(rate_per_s=20.0), multiplier=10.0, start_s=600.0, hold_s=120.0
    ).sample(np.random.default_rng(82), 1800.0)
    trace = Trace(times, np.full(len(times), 100), np.full(len(times), 10))
    stats = compute_stats(trace, window_s=60.0)
    mean_rate = (20 * 1680 + 200 * 120) / 1800
    assert stats.mean_rate_per_s == pytest.approx(mean_rate, rel=0.03)
    assert stats.peak_rate_per_s == pytest.approx(200.0, rel=0.05)
    assert stats.peak_to_mean == pytest.approx(200.0 / mean_rate, rel=0.06)
    assert stats.empty_windows == 0


def test_interarrival_cv_known_cases():
    assert interarrival_cv(np.arange(100.0)) == 0.0
    exponential = np.cumsum(np.random.default_rng(83).exponential(1.0, 200_000))
    assert interarrival_cv(exponential) == pytest.approx(1.0, rel=0.01)
    assert interarrival_cv(np.array([1.0, 2.0])) is None


def test_percentiles_and_tenants():
    rng = np.random.default_rng(84)
    prompt = rng.integers(1, 10_000, 3000)
    trace = Trace(
        np.arange(3000.0),
        prompt,
        np.zeros(3000),
        tenant=np.where(prompt > 5000, "big", "small"),
        failed=prompt < 100,
    )
    stats = compute_stats(trace)
    assert stats.prompt_tokens.p90 == pytest.approx(np.percentile(prompt, 90))
    assert stats.prompt_tokens.max == prompt.max() and stats.prompt_tokens.min == prompt.min()
    assert stats.tenants == {
        "big": int((prompt > 5000).sum()),
        "small": int((prompt <= 5000).sum()),
    }
    assert stats.failed_requests == int((prompt < 100).sum())
    assert stats.prefix_block_repeat_share is None


def test_prefix_block_repeat_share():
    trace = Trace(
        [0.0, 1.0, 2.0],
        [30, 30, 30],
        [1, 1, 1],
        hash_ids=[[1, 2], [1, 3], [1, 2, 4]],
        hash_block_size=16,
    )
    # 7 blocks; 1 repeats twice and 2 once: 3 of 7 were seen before.
    assert prefix_block_repeat_share(trace) == pytest.approx(3 / 7)
    assert compute_stats(trace).prefix_block_repeat_share == pytest.approx(3 / 7)


def test_empty_and_single_request_traces():
    assert compute_stats(Trace([], [], [])).requests == 0
    single = compute_stats(Trace([5.0], [3], [2]))
    assert (
        single.duration_s == 0.0
        and single.mean_rate_per_s == 0.0
        and single.interarrival_cv is None
    )
