"""The public Azure LLM inference traces (2023) in ../shared/traces, and the figures fitted to them."""

from pathlib import Path

import numpy as np
import pytest

from traces import load_trace
from traces.fitted import FITTED_LENGTHS
from traces.lengths import fit_trace_lengths, fitted_length, fitted_lognormal
from traces.stats import compute_stats

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"
EXPECTED = {"code": (8819, 3435.9), "conv": (19366, 3501.7)}

pytestmark = pytest.mark.skipif(
    not SHARED.is_dir(), reason="../shared/traces is not beside the checkout"
)


def azure(kind: str):
    return load_trace(SHARED / f"AzureLLMInferenceTrace_{kind}.csv")


@pytest.mark.parametrize("kind", ["code", "conv"])
def test_counts_and_spans(kind):
    trace = azure(kind)
    requests, span_s = EXPECTED[kind]
    assert len(trace) == requests
    assert round(trace.duration_s, 1) == span_s
    assert trace.arrival_s[0] == 0.0
    assert trace.load_report.rows_skipped == 0 and trace.load_report.format == "azure"
    assert trace.hash_ids is None and not trace.failed.any()


def test_row_values_and_exact_sub_microsecond_times():
    code = azure("code")
    # First rows of the file: 18:17:03.9799600,4808,10 and 18:17:04.0319600,3180,8.
    assert code.prompt_tokens[:2].tolist() == [4808, 3180]
    assert code.output_tokens[:2].tolist() == [10, 8]
    assert code.arrival_s[1] == pytest.approx(0.052, abs=1e-12)
    assert code.source_line[:2].tolist() == [2, 3]


@pytest.mark.parametrize(
    "kind, prompt_mean, output_mean, rate",
    [("code", 2047.8, 27.9, 2.57), ("conv", 1154.7, 211.1, 5.53)],
)
def test_statistics_match_the_published_summary(kind, prompt_mean, output_mean, rate):
    stats = compute_stats(azure(kind))
    assert round(stats.prompt_tokens.mean, 1) == prompt_mean
    assert round(stats.output_tokens.mean, 1) == output_mean
    assert round(stats.mean_rate_per_s, 2) == rate
    assert stats.interarrival_cv > 1.0  # production traffic is burstier than Poisson


@pytest.mark.parametrize("kind", ["code", "conv"])
def test_shipped_fits_are_what_the_files_give(kind):
    fits = fit_trace_lengths(azure(kind))
    for column in ("prompt", "output"):
        name = f"azure-{kind}-{column}"
        assert fits[column]["empirical"].quantiles == fitted_length(name).quantiles
        assert (
            fits[column]["lognormal_median_sigma"] == FITTED_LENGTHS[name]["lognormal_median_sigma"]
        )
        assert "sha256" in fitted_length(name).provenance


@pytest.mark.parametrize("name", sorted(n for n in FITTED_LENGTHS if n.startswith("azure-")))
def test_sampling_a_fit_reproduces_the_trace_quantiles(name):
    kind, column = name.split("-")[1:]
    real = getattr(azure(kind), f"{column}_tokens")
    drawn = fitted_length(name).sample(np.random.default_rng(31), 200_000)
    for q in (0.25, 0.5, 0.75, 0.9):
        assert np.quantile(drawn, q) == pytest.approx(np.quantile(real, q), rel=0.05, abs=2)
    lognormal = fitted_lognormal(name).sample(np.random.default_rng(32), 200_000)
    assert np.median(lognormal) == pytest.approx(np.exp(np.log(real).mean()), rel=0.05)
