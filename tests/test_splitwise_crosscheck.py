"""The splitwise-sim cross-check's own parts: the notebooks' judge re-implemented
(`benchmarks/splitwise_notebook_slo.py`: reference times, slowdowns, limits, the grid search), the
requests and the trace it writes (`benchmarks/splitwise_requests.py`), the designs it asks for
(`benchmarks/splitwise_crosscheck.py`). The simulator itself is an external checkout, not run here."""

import csv
import math

import numpy as np
import pytest

from benchmarks import splitwise_crosscheck as xc
from benchmarks import splitwise_notebook_slo as judge
from benchmarks import splitwise_requests as requests_

HEADER = "model,hardware,tensor_parallel,prompt_size,batch_size,token_size,prompt_time,token_time\n"


def perf_csv(tmp_path, rows):
    path = tmp_path / "perf_model.csv"
    path.write_text(HEADER + "".join(f"{row}\n" for row in rows))
    return path


def test_reference_is_the_median_per_batch_token_count_interpolated_at_the_prompt_size(tmp_path):
    path = perf_csv(
        tmp_path,
        [
            # 512 batch tokens twice (512 x 1, 256 x 2): medians 100 ms prompt, 40 ms token
            "llama2-70b,a100-80gb,8,512,1,1,80,30",
            "llama2-70b,a100-80gb,8,256,2,1,120,50",
            "llama2-70b,a100-80gb,8,1024,1,1,200,60",
            "llama2-70b,a100-80gb,8,2048,1,1,400,70",
            "llama2-70b,h100-80gb,8,512,1,1,1,1",  # another GPU: not the reference
        ],
    )
    reference = judge.NotebookReference(path)
    prompt_s, token_s = reference.times(np.array([512, 768, 2048, 256, 3072]))
    # 768: halfway between 512 (0.100, 0.040) and 1024 (0.200, 0.060)
    # 256: the first segment extended (0.1 s and 0.02 s over 512 tokens): 0.100 - 0.050, 0.040 - 0.010
    # 3072: the last extended (slope 0.2 / 0.01 ms a token over 1024): 0.400 + 0.200, 0.070 + 0.010
    assert prompt_s == pytest.approx([0.100, 0.150, 0.400, 0.050, 0.600])
    assert token_s == pytest.approx([0.040, 0.050, 0.070, 0.030, 0.080])


def test_reference_refuses_a_file_without_the_reference_rows(tmp_path):
    path = perf_csv(tmp_path, ["llama2-70b,h100-80gb,8,512,1,1,80,30"])
    with pytest.raises(ValueError, match="0 batch-token counts .* expected at least 2"):
        judge.NotebookReference(path)
    bad = perf_csv(
        tmp_path,
        ["llama2-70b,a100-80gb,8,512,1,1,80,30", "llama2-70b,a100-80gb,8,1024,1,1,-5,30"],
    )
    with pytest.raises(ValueError, match=r"perf_model.csv:3: prompt_time -5.0.*expected times > 0"):
        judge.NotebookReference(bad)


def flat_reference(tmp_path):
    """Prompt 1 s and token 0.1 s whatever the prompt."""
    return judge.NotebookReference(
        perf_csv(
            tmp_path,
            ["llama2-70b,a100-80gb,8,512,1,1,1000,100", "llama2-70b,a100-80gb,8,1024,1,1,1000,100"],
        )
    )


def test_margins_are_slowdown_percentiles_over_splitwise_limits(tmp_path):
    reference = flat_reference(tmp_path)
    n = 101
    ttft = np.linspace(1.0, 3.0, n)  # slowdown 1..3: P50 2.0, P90 2.8, P99 2.98
    output = np.full(n, 11.0)
    e2e = ttft + 11 * 0.1  # time between tokens 0.1 s (over the 11 outputs): slowdown 1
    served = judge.Served(np.full(n, 600.0), output, ttft, e2e, offered=n)
    margins = judge.slo_margins(served, reference)
    assert margins["ttft_p50"] == pytest.approx(2.0 / 2)
    assert margins["ttft_p90"] == pytest.approx(2.8 / 3)
    assert margins["ttft_p99"] == pytest.approx(2.98 / 6)
    assert margins["tbt_p50"] == pytest.approx(1.0 / 1.25)
    # E2E over the reference's prompt + 10 token times (2 s): P50 (2.0 + 1.1) / 2
    assert margins["e2e_p50"] == pytest.approx(3.1 / 2 / 1.25)
    assert max(margins.values()) > 1  # the median E2E misses


def test_a_run_that_left_requests_unserved_misses_everything(tmp_path):
    served = judge.Served(np.ones(3), np.ones(3), np.ones(3), np.ones(3) * 2, offered=4)
    margins = judge.slo_margins(served, flat_reference(tmp_path))
    assert len(margins) == 9 and all(math.isinf(v) for v in margins.values())


def test_the_grid_search_reads_throughput_as_the_notebooks_do():
    capacity = 137  # holds up to here
    asked = []

    def holds(rate):
        asked.append(rate)
        return {"ttft_p99": rate / capacity}

    best, tried = judge.highest_grid_rate(holds, coarse=40, fine=10, top=400)
    assert best == 130
    assert asked == [40, 80, 120, 160, 130, 140]
    assert set(tried) == set(asked)


def test_designs_parse_and_map_to_its_scripts_overrides():
    assert xc.parse_design("base:40") == ("base", 40, 0)
    assert xc.parse_design("ha:25:15") == ("ha", 25, 15)
    for bad in ("ha:25", "aa:3:3", "base:0", "hh:0:4"):
        with pytest.raises(ValueError, match="--design"):
            xc.parse_design(bad)
    ha = xc.sim_overrides(("ha", 25, 15))
    assert "cluster.servers.0.count=15" in ha and "cluster.servers.1.count=25" in ha
    assert "applications.0.scheduler=mixed_pool" in ha
    hh = xc.sim_overrides(("hh", 3, 1))
    assert "cluster.servers.1.count=4" in hh and "start_state.token.num_instances=1" in hh
    base = xc.sim_overrides(("base", 40, 0))
    assert "start_state=baseline" in base and "applications.0.scheduler=token_jsq" in base
    # ours with vLLM V0's steps is the same fleet on their side
    assert xc.parse_design("basev0:40") == ("basev0", 40, 0)
    assert xc.sim_overrides(("basev0", 40, 0)) == base
    assert xc.BASELINE_STEPS["basev0"] == {"mixed_steps": False}


def test_trace_is_written_in_its_format(tmp_path):
    requests = requests_.Requests(np.array([0.5, 1.25]), np.array([100, 7]), np.array([3, 1]))
    path = tmp_path / "t.csv"
    requests_.write_trace(path, requests)
    rows = list(csv.DictReader(path.open()))
    assert rows[1] == {
        "request_id": "1",
        "request_type": "2",
        "application_id": "0",
        "arrival_timestamp": "1.250000",
        "batch_size": "1",
        "prompt_size": "7",
        "token_size": "1",
    }


@pytest.mark.skipif(
    not (requests_.TRACES / requests_.AZURE["conv"]).is_file(), reason="needs ../shared/traces"
)
def test_requests_are_drawn_from_the_azure_trace_at_the_rate():
    requests = requests_.splitwise_requests("conv", rate=50.0, duration_s=60.0, seed=1)
    assert 2700 < len(requests.arrival_s) < 3300  # 3,000 expected
    assert np.all(np.diff(requests.arrival_s) >= 0) and requests.arrival_s[-1] < 60.0
    assert requests.prompt_tokens.max() <= 14050 and requests.output_tokens.min() >= 1
    assert 900 < requests.prompt_tokens.mean() < 1400  # the trace's mean 1,155


def test_the_line_matches_interpolation_inside_and_extends_its_end_segments():
    rng = np.random.default_rng()
    xs = np.sort(rng.choice(np.arange(1, 10_000), size=6, replace=False)).astype(float)
    ys = rng.uniform(0.01, 2.0, size=6)
    inside = rng.uniform(xs[0], xs[-1], size=50)
    assert judge.on_line(xs, ys, inside) == pytest.approx(np.interp(inside, xs, ys))
    for end, (a, b) in (
        (xs[0] - rng.uniform(1, 500), (0, 1)),
        (xs[-1] + rng.uniform(1, 500), (-2, -1)),
    ):
        slope = (ys[b] - ys[a]) / (xs[b] - xs[a])
        assert float(judge.on_line(xs, ys, end)) == pytest.approx(ys[a] + slope * (end - xs[a]))
    groups = {int(x): list(rng.uniform(0, 1, size=3)) for x in xs}
    line_x, line_y = judge.median_line(groups)
    assert list(line_x) == sorted(groups)
    assert line_y == pytest.approx([np.median(groups[int(x)]) for x in line_x])


def test_the_grid_search_finds_the_grid_floor_of_any_capacity():
    rng = np.random.default_rng()
    for capacity in rng.uniform(0, 395, size=20):
        best, tried = judge.highest_grid_rate(
            lambda rate, c=capacity: {"e2e_p50": rate / c}, coarse=40, fine=10, top=400
        )
        # holds strictly below the limit, as the notebooks' `<`
        assert best == (int(np.ceil(capacity / 10)) - 1) * 10, capacity
        assert len(tried) <= 400 // 40 + 3
