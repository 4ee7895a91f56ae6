"""The co-located vs disaggregated planner: it searches both layouts (xPyD, each pool's TP) with and
without a host KV tier on fixed fleets, keeps the cheapest fleet of each that holds the SLO, and
recommends the cheapest overall; its CLI prints it; the Split dashboard page renders both fleets."""

import json

import pytest
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from simulator import Scenario
from simulator.planner import split_answer
from simulator.planner.split import Layout, Outcome, _staircase, layout_scenario, plan_split


def _small(name: str = "small", rate_per_s: float = 3.0, duration_s: float = 30.0, **lengths):
    return Scenario.model_validate(
        {
            "name": name,
            "traffic": {
                "arrivals": {"kind": "poisson", "rate_per_s": rate_per_s},
                "duration_s": duration_s,
                "too_long": "clip",
                **lengths,
            },
            "model": {"name": "llama-2-7b"},
            "hardware": {"gpu": "A100-80GB"},
            "slo": {"ttft_p99_s": 2.0, "tpot_p99_s": 0.2},
        }
    )


def test_plan_split_keeps_the_cheapest_of_each_layout_and_recommends_one():
    plan = plan_split(_small(), max_replicas=2, cpu_kv_gb=[0, 32])
    assert set(plan.best) == {
        "colocated, 0 GB host KV",
        "disaggregated, 0 GB host KV",
        "colocated, 32 GB host KV",
        "disaggregated, 32 GB host KV",
    }
    held = [o for o in plan.best.values() if o is not None]
    assert held and plan.recommendation == min(
        held, key=lambda o: (o.gpus, o.cost_usd, o.ttft_p99_s)
    )
    assert all(o.meets_slo for o in held)
    assert (
        plan.best["colocated, 0 GB host KV"].layout.replicas == 1
    )  # light traffic: one GPU holds it
    split = plan.best["disaggregated, 0 GB host KV"]
    assert split.layout.prefill_replicas == split.layout.decode_replicas == 1 and split.gpus == 2
    assert split.kv_transfer_p99_s is not None and split.kv_transfer_p99_s > 0
    answer = plan.answer  # light traffic: one co-located GPU; a split needs two, so no saving
    assert answer.recommendation is plan.recommendation and answer.ratio == "co-located"
    assert answer.gpus_saved == 0 and not answer.split_saves_gpus
    assert "splitting prefill and decode does not save GPUs" in answer.sentence()


def _outcome(layout: Layout, cost_usd: float) -> Outcome:
    return Outcome(layout, True, layout.gpus, cost_usd, None, 0.8, 0.03, 0.99, None, 0.0)


def test_answer_names_the_ratio_cost_and_savings_of_a_cheaper_split():
    best = {
        "colocated, 0 GB host KV": _outcome(Layout("colocated", 0, 4, 4), 16.0),
        "colocated, 256 GB host KV": _outcome(Layout("colocated", 256, 7, 2), 14.5),
        "disaggregated, 0 GB host KV": _outcome(
            Layout(
                "disaggregated",
                0,
                prefill_replicas=2,
                decode_replicas=1,
                prefill_tensor_parallel=4,
                decode_tensor_parallel=4,
            ),
            12.25,
        ),
        "disaggregated, 256 GB host KV": None,
    }
    answer = split_answer.answer(best, lambda o: (o.gpus, o.cost_usd))
    assert answer.ratio == "2P1D" and answer.prefill_decode_gpus == (8, 4)
    assert answer.recommendation.gpus == 12 and answer.baseline.gpus == 16
    assert answer.gpus_saved == 4 and answer.cost_saved_usd == 3.75
    assert answer.split_saves_gpus and answer.host_tier_saves_gpus  # 12 and 14 GPUs < 16
    sentence = answer.sentence()
    assert "2P1D" in sentence and "8 prefill : 4 decode" in sentence and "$12.25" in sentence
    assert "P99 TTFT 0.80 s" in sentence and "4 GPUs and $3.75 saved" in sentence
    none = split_answer.answer({"colocated, 0 GB host KV": None}, lambda o: (o.gpus,))
    assert none.recommendation is None and "No layout in range" in none.sentence()


def test_staircase_finds_the_minimal_ratio_with_few_runs():
    calls = []

    def run(x, y):  # holds when 2x + y >= 7 (cost: x + y GPUs)
        calls.append((x, y))
        layout = Layout(
            "disaggregated",
            0,
            prefill_replicas=x,
            decode_replicas=y,
            prefill_tensor_parallel=1,
            decode_tensor_parallel=1,
        )
        return Outcome(layout, 2 * x + y >= 7, x + y, float(x + y), None, 0.0, 0.0, 1.0, None, 0.0)

    best = _staircase(run, 6)
    assert (best.layout.prefill_replicas, best.layout.decode_replicas) == (3, 1)
    assert len(calls) <= 2 * 6


def test_layout_scenario_turns_autoscalers_off_and_sets_the_pools():
    base = Scenario.load("examples/scenarios/disaggregated-llama-3-70b-h100.yaml")
    scenario = layout_scenario(
        base,
        Layout(
            "disaggregated",
            64,
            prefill_replicas=3,
            decode_replicas=1,
            prefill_tensor_parallel=4,
            decode_tensor_parallel=8,
        ),
    )
    spec = scenario.cluster.disaggregation
    assert (spec.prefill_replicas, spec.decode_replicas, spec.decode_tensor_parallel) == (3, 1, 8)
    assert not spec.prefill.autoscaler.enabled and not spec.decode.autoscaler.enabled
    assert spec.prefill.max_num_batched_tokens == 8192 and scenario.scheduler.cpu_kv_gb == 64


def test_plan_split_command_prints_json(tmp_path):
    from surgeplan_cli import app

    path = _small().save(tmp_path / "small.yaml")
    result = CliRunner().invoke(app, ["plan-split", str(path), "--max-replicas", "1", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["recommendation"]["gpus"] == 1 and data["recommendation"]["kind"] == "colocated"
    assert data["answer"]["ratio"] == "co-located" and data["answer"]["gpus_saved"] == 0


def test_split_page_renders_both_fleets():
    def script():
        import streamlit as st

        from dashboard.views import split

        st.session_state.setdefault("split_duration", 60)
        split.render()

    at = AppTest.from_function(script, default_timeout=240).run()
    assert not at.exception, [e.value for e in at.exception]
    labels = [m.label for m in at.metric]
    assert labels.count("P99 TTFT") == 2 and any("KV moved" in c.value for c in at.caption)
    assert at.selectbox(key="split_decode_gpu").value == "H100-80GB"
    assert any("prefill $2.99, decode $2.99 per GPU-hour" in c.value for c in at.caption)


def test_split_page_runs_the_mixed_pool_when_asked():
    def script():
        import streamlit as st

        from dashboard.views import split

        st.session_state.setdefault("split_duration", 60)
        st.session_state.setdefault("split_mixed_pool", True)
        split.render()

    at = AppTest.from_function(script, default_timeout=240).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.checkbox(key="split_mixed_pool").value
    assert any(c.value.startswith("mixed pool: ") for c in at.caption)


def test_plan_split_searches_pool_gpu_types_and_ranks_fleets_by_price(tmp_path):
    # light traffic: every fleet in range holds the SLO, so the cheapest per hour wins: one A100
    # ($1.79/h) co-located, and of the splits the A100 + A100 pair over H100 prefill + A100 decode
    from simulator.hardware.catalog import get_hardware

    price = {gpu: get_hardware(gpu).price_usd_per_hour for gpu in ("A100-80GB", "H100-80GB")}
    plan = plan_split(
        _small(),
        max_replicas=1,
        gpus=["H100-80GB", "A100-80GB"],
        prefill_gpus=["H100-80GB", "A100-80GB"],
        decode_gpus=["A100-80GB"],
    )
    pairs = {(o.layout.prefill_gpu, o.layout.decode_gpu) for o in plan.outcomes}
    assert {("H100-80GB", "A100-80GB"), ("A100-80GB", "A100-80GB")} <= pairs
    for outcome in plan.outcomes:
        layout = outcome.layout
        expected = (
            price[layout.gpu]
            if layout.kind == "colocated"
            else price[layout.prefill_gpu] + price[layout.decode_gpu]
        )
        assert outcome.usd_per_hour == pytest.approx(expected)
    assert plan.recommendation.layout.gpu == "A100-80GB"
    split = plan.best["disaggregated, 0 GB host KV"]
    assert (split.layout.prefill_gpu, split.layout.decode_gpu) == ("A100-80GB", "A100-80GB")
    assert "H100-80GB" in plan.outcomes[0].layout.label  # the GPU type shows in each label

    from surgeplan_cli import app

    path = _small().save(tmp_path / "small.yaml")
    args = ["plan-split", str(path), "--max-replicas", "1", "--json"]
    args += ["--prefill-gpu", "H100", "--decode-gpu", "A100-80GB"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    best = json.loads(result.output)["best"]["disaggregated, 0 GB host KV"]
    assert (best["prefill_gpu"], best["decode_gpu"]) == ("H100-80GB", "A100-80GB")
    assert best["usd_per_hour"] == pytest.approx(price["H100-80GB"] + price["A100-80GB"])
    bad = CliRunner().invoke(app, ["plan-split", str(path), "--decode-gpu", "Voodoo-5"])
    assert bad.exit_code == 2 and "--decode-gpu" in bad.output


def _prompt_heavy() -> Scenario:
    """Long prompts, short answers, more than one prefill replica can take: Splitwise's mixed pool
    moves the idle decode replica in to serve requests whole."""
    return _small(
        "prompt-heavy",
        6.0,
        20.0,
        prompt={"kind": "fixed", "tokens": 3000},
        output={"kind": "fixed", "tokens": 8},
    )


def test_plan_split_tries_each_split_with_and_without_the_mixed_pool():
    plan = plan_split(_prompt_heavy(), max_replicas=1, mixed_pools=[False, True])
    assert {"disaggregated, 0 GB host KV", "disaggregated, mixed pool, 0 GB host KV"} <= set(
        plan.best
    )
    runs = {o.layout.mixed_pool: o for o in plan.outcomes if o.layout.kind == "disaggregated"}
    assert set(runs) == {False, True}
    assert runs[False].mixed_pool_moves == 0 and runs[True].mixed_pool_moves > 0
    # the 1P1D split's prefill replica is saturated: serving some requests whole on the decode
    # replica cuts the P99 TTFT
    assert runs[True].ttft_p99_s < runs[False].ttft_p99_s
    assert "+ mixed pool" in runs[True].layout.label
    scenario = layout_scenario(_prompt_heavy(), runs[True].layout)
    assert scenario.cluster.disaggregation.mixed_pool
    assert scenario.cluster.disaggregation.mixed_pool_max_pending_tokens == 8192


def test_answer_says_the_recommended_split_runs_the_mixed_pool():
    split = Layout(
        "disaggregated",
        0,
        prefill_replicas=1,
        decode_replicas=1,
        prefill_tensor_parallel=1,
        decode_tensor_parallel=1,
        mixed_pool=True,
    )
    best = {
        "colocated, 0 GB host KV": _outcome(Layout("colocated", 0, 3, 1), 3.0),
        "disaggregated, mixed pool, 0 GB host KV": _outcome(split, 2.0),
    }
    answer = split_answer.answer(best, lambda o: (o.gpus, o.cost_usd))
    assert answer.ratio == "1P1D" and answer.mixed_pool and answer.row()["mixed_pool"]
    assert "1P1D" in answer.sentence() and "mixed pool" in answer.sentence()


def test_plan_split_command_rejects_an_unknown_mixed_pool_value(tmp_path):
    from surgeplan_cli import app

    path = _small().save(tmp_path / "small.yaml")
    result = CliRunner().invoke(app, ["plan-split", str(path), "--mixed-pool", "maybe"])
    assert result.exit_code == 2
    assert "--mixed-pool is 'maybe'; expected one of scenario, off, on, both" in result.output
