"""What a plan hands back: `surgeplan plan --json` (the recommendation, both scenarios complete, per-GPU
rows, baselines), the ledger as CSV and JSON with a reason for every rejection, the Pareto chart with
the recommendation marked, the ± calibration-error re-check, the static baseline and the autoscaled
fleet; early stopping never changes a verdict; the claims report's statistics."""

import csv
import json
import random

import pytest
import yaml
from test_planner_helpers import QUICK, spike_scenario
from typer.testing import CliRunner

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import CostModel, scaled_calibration
from simulator.calibration.shipped import calibration_for
from simulator.planner.claims_base import interval, reason, verdict
from simulator.planner.evaluate import evaluate_job, make_job
from simulator.planner.fleet import Batch, fleet_scenario
from simulator.planner.ledger import COLUMNS
from simulator.planner.pareto import pareto_front
from simulator.planner.report import GpuRow, PlanReport, Recommendation
from simulator.planner.uncertainty import error_of
from surgeplan_cli import app


@pytest.fixture(scope="module")
def cli_plan(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plan")
    path = folder / "plan.yaml"
    data = spike_scenario(rate_per_s=4.0, duration_s=90).model_dump(
        mode="json"
    )  # peak 20/s: 2+ replicas
    data["plan"] = QUICK | {
        "uncertainty": True,
        "static_baseline": True,
        "autoscaled": True,
        "candidates": [{"gpu": "A100-80GB"}, {"gpu": "H100-80GB"}],
    }
    path.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(
        app, ["plan", str(path), "--json", "--out", str(folder / "out"), "--workers", "1"]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.output), folder / "out"


def test_json_has_the_answer_and_both_scenarios(cli_plan):
    data, _ = cli_plan
    rec = data["recommendation"]
    for key in (
        "gpu",
        "tensor_parallel",
        "replicas",
        "gpus",
        "max_num_seqs",
        "max_num_batched_tokens",
        "cost_per_hour_usd",
        "cost_per_request_usd",
        "binding_constraint",
    ):
        assert rec[key] is not None, key
    for key in (
        "recommended_scenario",
        "one_fewer_scenario",
        "per_gpu_type",
        "static_baseline",
        "elapsed_s",
    ):
        assert key in data
    assert data["recommended_scenario"]["hardware"]["gpu"] == rec["gpu"]
    assert data["recommended_scenario"]["scheduler"]["max_num_seqs"] == rec["max_num_seqs"]
    assert data["one_fewer_scenario"]["cluster"]["replicas"] == rec["replicas"] - 1
    assert {row["gpu"] for row in data["per_gpu_type"]} == {"A100-80GB", "H100-80GB"}
    cheapest = min(
        (row for row in data["per_gpu_type"] if row["status"] == "meets"),
        key=lambda row: row["cost_per_hour_usd"],
    )
    assert cheapest["gpu"] == rec["gpu"]


def test_comparisons_are_reported(cli_plan):
    data, _ = cli_plan
    rec, static, scaled = data["recommendation"], data["static_baseline"], data["autoscaled"]
    assert static["policy"] == "static" and (
        static["replicas"] is None or static["replicas"] >= rec["replicas"]
    )
    error = data["uncertainty"]
    calibration = rec["calibration"]  # the band: the profile's held-out error, else the fit error
    held_out = calibration.get("held_out_error")
    assert error["step_time_error"] == pytest.approx(held_out or calibration["fit_error"])
    assert ("held-out error of the" in error["source"]) == bool(held_out)
    assert error["replicas_if_slower"] >= rec["replicas"] >= error["replicas_if_faster"]
    noun = "replica" if rec["replicas"] == 1 else "replicas"
    assert (
        f"{rec['replicas']} {noun}; " in error["text"] and "slower than calibrated" in error["text"]
    )
    assert 1 <= scaled["warm_pool"] <= rec["replicas"] and scaled["cold_start_s"] > 0


def test_ledger_and_chart_are_written(cli_plan):
    data, out = cli_plan
    rows = list(csv.DictReader((out / "ledger.csv").open()))
    assert rows and set(COLUMNS) <= set(rows[0])
    assert rows == [
        {k: ("" if v is None else str(v)) for k, v in row.items()}
        for row in json.loads((out / "ledger.json").read_text())
    ]
    missed = [row for row in rows if row["status"] == "misses"]
    assert missed and all(row["reason"] in ("slo_ttft", "slo_tpot", "timeouts") for row in missed)
    assert {row["phase"] for row in rows} >= {
        "share pass",
        "confirm",
        "one fewer",
        "static confirm",
        "autoscaled",
    }
    page = (out / "pareto.html").read_text()
    assert "recommendation" in page and "Pareto front" in page
    for name in ("recommended_scenario.yaml", "one_fewer_scenario.yaml", "plan.json"):
        assert (out / name).exists()


# The keys `plan.json` held before the report was typed (assemble's dicts): saved plans and scripts
# reading `surgeplan plan --json` rely on them.
PLAN_KEYS = {
    "recommendation", "recommended_scenario", "one_fewer_scenario", "one_fewer", "per_gpu_type",
    "traffic", "slo", "replica_range", "uncertainty", "static_baseline", "autoscaled",
    "dynamic_batch", "kv_cache_dtypes", "simulations", "elapsed_s",
}  # fmt: skip
BLOCK_KEYS = {
    "recommendation": {
        "gpu", "tensor_parallel", "replicas", "gpus", "max_num_seqs", "max_num_batched_tokens",
        "cost_per_hour_usd", "cost_per_request_usd", "cost_per_million_output_tokens_usd",
        "gpu_hours", "binding_constraint", "headroom", "headroom_term", "ttft_p99_s", "tpot_p99_s",
        "abandon_rate", "calibration", "one_fewer_misses", "checked_by", "binding_checked_by",
        "replicas_if_slower", "sentence",
    },
    "one_fewer": {"status", "reasons", "binding", "ratios", "ttft_p99_s", "tpot_p99_s", "early_stop_s"},
    "traffic": {"requests", "duration_s", "mean_rate_per_s", "peak_rate_per_s", "peak_window_s"},
    "uncertainty": {"step_time_error", "source", "replicas_if_slower", "replicas_if_faster", "text"},
    "static_baseline": {
        "replicas", "gpus", "searched_up_to", "policy", "batch_controller", "max_num_seqs",
        "max_num_batched_tokens", "cost_per_hour_usd", "cost_per_request_usd", "ttft_p99_s",
        "tpot_p99_s", "status", "reasons",
    },
    "autoscaled": {
        "warm_pool", "max_replicas", "meets", "replicas_peak", "cost_usd", "cost_per_hour_usd",
        "cost_per_request_usd", "ttft_p99_s", "fixed_cost_usd", "fixed_cost_per_request_usd",
        "saved_usd", "saved_share", "cold_start_s", "reasons",
    },
    "simulations": {"evaluated", "simulated", "from_cache", "backend"},
}  # fmt: skip
MEETS_ROW_KEYS = {
    "gpu", "tensor_parallel", "replicas", "gpus", "max_num_seqs", "max_num_batched_tokens",
    "kv_cache_dtype", "calibration", "kv_blocks_per_replica", "price_usd_per_gpu_hour",
    "batch_grid", "status", "cost_per_hour_usd", "cost_per_request_usd",
    "cost_per_million_output_tokens_usd", "gpu_hours", "ttft_p99_s", "tpot_p99_s", "abandon_rate",
    "checked_by", "binding_constraint", "binding_checked_by", "headroom", "headroom_term",
    "slo_ratios",
}  # fmt: skip


def test_plan_json_keeps_its_keys_and_reads_back_as_the_typed_report(cli_plan):
    data, out = cli_plan
    assert set(data) == PLAN_KEYS
    for block, keys in BLOCK_KEYS.items():
        assert set(data[block]) == keys, block
    assert {"ttft_p99_s", "tpot_p99_s", "max_abandon_rate", "goodput_share"} == set(data["slo"])
    assert MEETS_ROW_KEYS <= set(next(r for r in data["per_gpu_type"] if r["status"] == "meets"))
    report = PlanReport.from_json(data)
    assert isinstance(report.recommendation, Recommendation)
    assert all(isinstance(row, GpuRow) for row in report.per_gpu_type)
    assert report.recommendation.replicas == data["recommendation"]["replicas"]
    assert report.to_json() == data  # the round trip: JSON -> typed report -> the same JSON
    saved = json.loads((out / "plan.json").read_text())
    assert PlanReport.from_json(saved).to_json() == saved
    # a row of a GPU the model does not fit, as saved before the report was typed: five keys
    old_row = {"gpu": "T4", "tensor_parallel": 8, "status": "does_not_fit", "replicas": None}
    row = PlanReport.from_json(data | {"per_gpu_type": [old_row | {"reason": "too small"}]})
    assert row.per_gpu_type[0].reason == "too small" and row.per_gpu_type[0].gpus is None
    with pytest.raises(ValueError, match=r"plan\.recommendation: unknown key\(s\) \['ttft_s'\]"):
        PlanReport.from_json(data | {"recommendation": data["recommendation"] | {"ttft_s": 1.0}})


def test_cli_table_names_the_recommendation(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(
        yaml.safe_dump(spike_scenario(duration_s=60).model_dump(mode="json") | {"plan": QUICK})
    )
    result = CliRunner().invoke(app, ["plan", str(path), "--workers", "1", "--gpu", "H100-80GB:1"])
    assert result.exit_code == 0, result.output
    assert (
        "recommendation: " in result.output
        and "H100-80GB" in result.output
        and "binding constraint" in result.output
    )


@pytest.mark.parametrize("factor", [0.9, 1.04, 1.3])
def test_scaled_calibration_scales_every_step(factor):
    calibration = calibration_for("llama-2-7b", "A100-80GB", 1)
    plain, scaled = (
        CostModel.from_calibration(calibration),
        CostModel.from_calibration(scaled_calibration(calibration, factor)),
    )
    rng = random.Random(factor)
    for _ in range(20):
        shape = StepShape(
            ((rng.randint(1, 2000), rng.randint(0, 500)),),
            tuple(rng.randint(1, 3000) for _ in range(rng.randint(0, 40))),
        )
        assert scaled.step_time(shape) == pytest.approx(factor * plain.step_time(shape), rel=1e-12)


def test_error_of_uses_the_fit_error_or_says_it_is_assumed():
    assert error_of({"fit_error": 0.04, "label": "fitted"}, 0.3) == (
        0.04,
        "fitted calibration's held-out fit error",
    )
    error, source = error_of({"fit_error": None, "label": "derived", "method": "roofline"}, 0.3)
    assert error == 0.3 and source.startswith("assumed")


@pytest.mark.parametrize("replicas", [1, 2, 3])
def test_early_stop_never_changes_the_verdict(replicas):
    scenario = fleet_scenario(
        spike_scenario(rate_per_s=3.0, duration_s=90), "A100-80GB", 1, replicas, Batch(256, 2048)
    )
    quick, full = (
        evaluate_job(make_job(scenario)),
        evaluate_job(make_job(scenario, early_stop=False)),
    )
    assert quick.meets == full.meets
    assert set(quick.reasons) <= set(full.reasons)
    if not full.meets:  # it stops once the miss is certain; a miss within the P99's 2-request
        # cushion (`SLO.miss_limits`) is certain only at the end, and then both runs are the same run
        stopped = quick.early_stop_s is not None and quick.early_stop_s < full.summary.simulated_s
        assert stopped or quick.summary == full.summary


def test_pareto_front_keeps_only_undominated_points():
    points = [
        {"cost_per_hour_usd": c, "ttft_p99_s": t}
        for c, t in [(1, 5), (2, 3), (3, 4), (4, 1), (5, 1)]
    ]
    assert [(p["cost_per_hour_usd"], p["ttft_p99_s"]) for p in pareto_front(points)] == [
        (1, 5),
        (2, 3),
        (4, 1),
    ]


def test_claims_statistics():
    mean, low, high = interval([0.5, 0.52, 0.48, 0.5, 0.5])
    assert mean == pytest.approx(0.5) and low < 0.5 < high and high - low < 0.05
    assert verdict(0.45, 0.55, (0.4, 0.6), higher_is_better=False) == "confirms"
    assert verdict(0.2, 0.3, (0.4, 0.6), higher_is_better=False) == "below"
    assert verdict(0.8, 0.9, (0.4, 0.6), higher_is_better=False) == "above"
    assert verdict(5.0, 6.0, (2.0, 4.0), higher_is_better=True) == "above"
    # confirms only when the whole interval lies within the claim: 1.81x (1.53-2.09) against 2-4x does not
    assert verdict(1.53, 2.09, (2.0, 4.0)) == "inconclusive"
    assert "straddles" in reason(1.53, 2.09, (2.0, 4.0))
    assert "wholly below" in reason(1.2, 1.5, (2.0, 4.0)) and "worse" in reason(
        1.2, 1.5, (2.0, 4.0)
    )


def test_goodput_share_is_an_slo_term():
    scenario = fleet_scenario(
        spike_scenario(rate_per_s=2.0, duration_s=60), "A100-80GB", 1, 1, Batch(256, 2048)
    )
    plain = evaluate_job(make_job(scenario, early_stop=False))
    strict = evaluate_job(make_job(scenario, goodput_share=1.0, early_stop=False))
    within = plain.summary.slo_attainment
    assert 0.5 < within < 1.0  # one replica through the spike: some requests miss a target
    assert "goodput" not in plain.ratios and "goodput" in strict.reasons
    loose = evaluate_job(
        make_job(scenario, goodput_share=max(within - 0.01, 0.01), early_stop=False)
    )
    assert "goodput" not in loose.reasons
