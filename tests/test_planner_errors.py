"""Bad input gets a clear message that says what to change, never a traceback: an SLO no fleet can meet,
a model that fits no candidate GPU, a spike whose peak needs more replicas than the range, a bad field
or an unknown GPU in the plan file; the CLI prints `error: ...` and exits 2."""

import pytest
import yaml
from test_planner_helpers import QUICK, quick_settings, spike_scenario
from typer.testing import CliRunner

from simulator.planner.recommend import plan
from simulator.planner.spec import PlanError, PlanSettings, load_plan
from surgeplan_cli import app


def test_slo_no_fleet_can_meet():
    scenario = spike_scenario(
        duration_s=40, slo={"tpot_p99_s": 0.001}
    )  # faster than one decode step
    with pytest.raises(
        PlanError,
        match=r"no fleet of any size can meet the SLO.*idle replica misses it.*TPOT.*"
        r"expected a looser slo",
    ):
        plan(scenario, quick_settings(max_replicas=2), workers=1, progress=False)


def test_model_fits_no_candidate():
    settings = quick_settings(
        candidates=[{"gpu": "L4", "tensor_parallel": 1}, {"gpu": "A10G", "tensor_parallel": 1}]
    )
    with pytest.raises(
        PlanError,
        match=r"llama-2-70b fits none of the candidate GPUs \(L4: .*does not fit.*A10G:.*"
        r"expected a larger tensor_parallel",
    ):
        plan(spike_scenario(model={"name": "llama-2-70b"}), settings, workers=1, progress=False)


def test_spike_beyond_the_largest_fleet():
    scenario = spike_scenario(rate_per_s=6.0, multiplier=10.0, duration_s=90)
    with pytest.raises(
        PlanError,
        match=r"traffic's peak \(\d+\.\d requests/s.*needs more than 1 replica:.*"
        r"expected a larger plan.max_replicas",
    ):
        plan(scenario, quick_settings(max_replicas=1), workers=1, progress=False)


def test_tensor_parallel_found_where_the_model_fits():
    settings = quick_settings(
        candidates=[{"gpu": "A100-80GB"}], max_replicas=2, confirm="recommendation"
    )
    scenario = spike_scenario(
        rate_per_s=0.2, multiplier=2.0, duration_s=40, model={"name": "llama-2-70b"}
    )
    result = plan(scenario, settings, workers=1, progress=False)
    assert result.report.recommendation.tensor_parallel in (2, 4)
    assert (
        result.report.recommendation.gpus
        == result.report.recommendation.replicas * result.report.recommendation.tensor_parallel
    )


@pytest.mark.parametrize(
    "plan_section, message",
    [
        ({"max_replicas": 0}, r"plan.max_replicas: Input should be greater than or equal to 1"),
        (
            {"candidates": [{"gpu": "MI300X"}]},
            r"plan.candidates\[0\].gpu: hardware 'MI300X' is unknown; expected one of",
        ),
        (
            {"batch": {"max_num_seqs": [0]}},
            r"plan.batch: .*max_num_seqs.*greater than or equal to 1",
        ),
        (
            {"min_replicas": 5, "max_replicas": 2},
            r"min_replicas=5 > max_replicas=2; expected min ≤ max",
        ),
    ],
)
def test_cli_names_the_bad_field(tmp_path, plan_section, message):
    path = tmp_path / "plan.yaml"
    path.write_text(
        yaml.safe_dump(
            spike_scenario(duration_s=30).model_dump(mode="json") | {"plan": QUICK | plan_section}
        )
    )
    result = CliRunner().invoke(app, ["plan", str(path), "--workers", "1"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    import re

    assert re.search(r"error: .*" + message, result.output.replace("\n", " ")), result.output


def test_cli_reports_an_unmeetable_slo_as_an_error(tmp_path):
    path = tmp_path / "plan.yaml"
    data = spike_scenario(duration_s=30, slo={"ttft_p99_s": 0.0001}).model_dump(mode="json")
    path.write_text(yaml.safe_dump(data | {"plan": QUICK | {"max_replicas": 2}}))
    result = CliRunner().invoke(app, ["plan", str(path), "--workers", "1"])
    assert result.exit_code == 2 and result.output.startswith("error: no fleet of any size"), (
        result.output
    )


def test_plan_file_without_plan_section_searches_its_own_gpu(tmp_path):
    path = tmp_path / "scenario.yaml"
    spike_scenario(duration_s=30, hardware={"gpu": "H100-80GB"}).save(path)
    scenario, settings = load_plan(path)
    assert settings == PlanSettings() and [c.gpu for c in settings.candidate_list(scenario)] == [
        "H100-80GB"
    ]
