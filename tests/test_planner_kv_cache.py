"""KV cache dtype in the simulator and planner: fp8/int8 replicas hold ~2x the blocks, decode
attention
reads half the bytes (a `derived` term), and `surgeplan plan --kv-cache-dtype` answers "does FP8 KV
help?"
with GPUs, $/request and P99s per dtype beside the measured quality."""

import json

import pytest
import yaml
from test_planner_helpers import QUICK, spike_scenario
from typer.testing import CliRunner

from engine.core.step_shape import StepShape
from simulator import Scenario, simulate
from simulator.calibration.cost_model import CostModel
from simulator.calibration.kv_cache import kv_cache_calibration
from simulator.calibration.shipped import calibration_for
from simulator.planner.claims_base import base
from simulator.planner.claims_kv import kv_cache_row, kv_cache_search
from simulator.planner.evaluate import evaluate_job
from surgeplan_cli import app


def test_decode_attention_term_scales_with_kv_bytes_and_is_labelled_derived():
    calibration = calibration_for("llama-2-7b", "A100-80GB", 1)
    fp8 = kv_cache_calibration(calibration, "fp8")
    assert kv_cache_calibration(calibration, "auto") is calibration
    decode = StepShape((), tuple([2048] * 64))
    base, quantised = CostModel.from_calibration(calibration), CostModel.from_calibration(fp8)
    attention = [t for t in fp8.cost_model.terms if t.feature == "decode_context_token"]
    assert attention and all(t.label == "derived" and "fp8" in t.name for t in attention)
    saved = base.step_time(decode) - quantised.step_time(decode)
    original = sum(
        t.seconds_per_unit
        for t in calibration.cost_model.terms
        if t.feature == "decode_context_token"
    )
    assert saved == pytest.approx(0.5 * original * 64 * 2048, rel=1e-9)
    assert quantised.step_time(StepShape(((512, 0),), ())) == base.step_time(
        StepShape(((512, 0),), ())
    )


def test_simulated_replica_holds_twice_the_blocks_with_fp8():
    facts = {}
    for kv_cache_dtype in ("auto", "fp8", "int8"):
        scenario = Scenario.model_validate(
            spike_scenario(duration_s=20).model_dump(mode="json")
            | {"scheduler": {"kv_cache_dtype": kv_cache_dtype}}
        )
        result = simulate(scenario)
        facts[kv_cache_dtype] = result.facts
        assert result.facts["kv_cache_dtype"] == kv_cache_dtype
    for kv_cache_dtype in ("fp8", "int8"):
        ratio = (
            facts[kv_cache_dtype]["kv_blocks_per_replica"] / facts["auto"]["kv_blocks_per_replica"]
        )
        assert ratio >= 1.95, (kv_cache_dtype, ratio)


def test_plan_compares_kv_cache_dtypes(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(
        yaml.safe_dump(spike_scenario(duration_s=60).model_dump(mode="json") | {"plan": QUICK})
    )
    args = [
        "plan",
        str(path),
        "--workers",
        "1",
        "--gpu",
        "A100-80GB:1",
        "--kv-cache-dtype",
        "auto",
        "--kv-cache-dtype",
        "fp8",
        "--kv-cache-dtype",
        "int8",
    ]
    result = CliRunner().invoke(app, args + ["--json"])
    assert result.exit_code == 0, result.output
    rows = {row["kv_cache_dtype"]: row for row in json.loads(result.output)["kv_cache_dtypes"]}
    assert set(rows) == {"auto", "fp8", "int8"}
    assert rows["fp8"]["kv_blocks_per_replica"] >= 1.95 * rows["auto"]["kv_blocks_per_replica"]
    for row in rows.values():
        assert row["replicas"] and row["cost_per_request_usd"] and row["ttft_p99_s"] is not None
    assert (
        rows["fp8"]["replicas"] <= rows["auto"]["replicas"]
    )  # more KV and faster decode never need more
    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0 and "KV cache dtype" in table.output and "int8" in table.output, (
        table.output
    )


def test_claims_row_answers_does_fp8_kv_help_beside_measured_quality():
    spike = base(
        "continuous",
        0,
        {
            "arrivals": {
                "kind": "spike",
                "base": {"kind": "poisson", "rate_per_s": 3.0},
                "multiplier": 10,
                "start_s": 10,
                "ramp_up_s": 5,
                "hold_s": 20,
                "ramp_down_s": 5,
            },
            "duration_s": 50,
        },
        "claims-spike-test",
    )
    search, dtypes = kv_cache_search(spike)
    jobs = next(search)
    assert [j[0]["scenario"]["scheduler"]["kv_cache_dtype"] for j in jobs] == list(dtypes)
    row, figures = kv_cache_row([evaluate_job(j) for j, _ in jobs], "simulated")
    assert row["verdict"] in ("helps", "no gain") and "fp8" in row["ours"] and "int8" in row["ours"]
    blocks = {f["kv_cache_dtype"]: f["kv_blocks_per_replica"] for f in figures}
    assert blocks["fp8"] >= 1.95 * blocks["auto"] and blocks["int8"] >= 1.95 * blocks["auto"]
    assert all(f["quality"] is None or 0 < f["quality"]["top1_agreement"] <= 1 for f in figures)
