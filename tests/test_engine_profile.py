"""Engine profiles: the serving stack's host time on top of the GPU calibration, its overlap with the GPU,
exact decode stretches with it, the scenario field and CLI option, published validation (fit and held-out
rows apart) and the planner's band from the held-out error."""

import json

import pytest
from sim_helpers import cluster_config, cost_model, host_profile
from typer.testing import CliRunner

from engine.core.step_shape import StepShape
from simulator.calibration.engine_profile import (
    default_profile_name,
    load_profile,
    profile_names,
)
from simulator.calibration.profiled_cost_model import ProfiledCostModel
from simulator.calibration.schema import load_shipped
from simulator.planner.uncertainty import error_of
from simulator.scenario import Scenario
from simulator.simulation import simulate
from simulator.validation.profile_fit import fit_profile, record_errors
from simulator.validation.published_report import stats, validate_published
from simulator.validation.published_sets import load_published
from surgeplan_cli import app


def test_host_time_adds_serially_or_hides_under_the_gpu():
    shape = StepShape(decode_context_lens=(100,) * 10)  # host: 2 ms + 10 x 0.1 ms = 3 ms
    assert host_profile(0.0).host_s(shape) == pytest.approx(0.003)
    assert host_profile(0.0).step_s(0.010, shape) == pytest.approx(0.013)  # V0: after the GPU
    assert host_profile(1.0).step_s(0.010, shape) == pytest.approx(
        0.010
    )  # fully hidden under a longer GPU step
    assert host_profile(1.0).step_s(0.001, shape) == pytest.approx(
        0.003
    )  # ... but a short GPU step waits for it
    assert host_profile(0.5).step_s(0.010, shape) == pytest.approx(0.0115)


def test_decode_stretches_stay_exact_with_a_profile():
    """The replica's stretch path and step-by-step path give the same per-step times with host terms."""
    gpu = cost_model(0.004, 2e-5, 3e-7)
    model = ProfiledCostModel(gpu, host_profile(0.5, step_s=0.003), scale=1.07)
    shape = StepShape(decode_context_lens=(40, 90, 300))
    stretch = model.decode_stretch_times(shape, 5)
    stepped = [
        model.step_time(StepShape((), tuple(c + k for c in shape.decode_context_lens)))
        for k in range(5)
    ]
    assert stretch == pytest.approx(stepped, rel=1e-12)

    from simulator.cluster.cluster import Cluster

    config = cluster_config(
        model, num_blocks=200, max_num_seqs=8, max_num_batched_tokens=96, max_model_len=256
    )
    cluster = Cluster(
        config, [0.0, 0.0, 0.5, 1.0], [30, 80, 20, 50], [40, 25, 60, 10], ["default"] * 4
    )
    cluster.replicas[0].step_shapes = []
    cluster.run()
    replica = cluster.replicas[0]
    assert replica.busy_s == pytest.approx(
        sum(model.step_time(s) for s in replica.step_shapes), rel=1e-9
    )


def test_every_shipped_profile_loads_and_labels_its_terms():
    names = profile_names()
    assert {"vllm-v0", "vllm-v1", "sglang", "trtllm", "surgeplan"} <= set(names)
    for name in names:
        profile = load_profile(name)
        assert profile.terms and all(
            term.source and term.label in ("measured", "fitted", "derived")
            for term in profile.terms
        )
    with pytest.raises(ValueError, match="vllm-v1"):
        load_profile("vllm-v9")


def test_default_profile_follows_the_calibration():
    assert default_profile_name(load_shipped("llama-2-7b_on_a100-80gb-tp1")) == "vllm-v1"


def test_scenario_picks_the_profile_and_the_answer_changes():
    base = {
        "model": {"name": "llama-2-7b"},
        "hardware": {"gpu": "A100-80GB"},
        "traffic": {
            "arrivals": {"kind": "poisson", "rate_per_s": 4.0},
            "duration_s": 20,
            "too_long": "clip",
        },
    }
    results = {
        name: simulate(Scenario.model_validate(base | {"engine_profile": name}))
        for name in ("vllm-v0", "trtllm")
    }
    assert results["vllm-v0"].facts["calibration"]["engine_profile"] == "vllm-v0"
    assert results["vllm-v0"].summary["tpot_mean_s"] > results["trtllm"].summary["tpot_mean_s"]
    with pytest.raises(ValueError, match="engine_profile"):
        simulate(Scenario.model_validate(base | {"engine_profile": "nope"}))


def test_published_validation_reports_fit_and_held_out_apart():
    data = load_published("lambdalabs-vllm")
    assert {run["split"] for run in data["runs"]} == {"fit", "held_out"}
    assert all(run["source"] and run["date"] for run in data["runs"])
    result = validate_published("lambdalabs-vllm")
    held = [row for row in result["rows"] if row["split"] == "held_out"]
    entry = next(e for e in result["stats"] if e["gpu"] == "all" and e["split"] == "held_out")
    assert entry["rows"] == len(held) > 0
    errors = sorted(abs(row["error"]) for row in held)
    assert entry["median_abs_error"] == pytest.approx(
        (errors[len(errors) // 2 - 1] + errors[len(errors) // 2]) / 2
    )
    assert stats([]) is None


def test_fit_touches_only_fit_rows(tmp_path):
    """Moving a held-out measurement changes nothing the fit does; moving a fit one does."""
    data = load_published("lambdalabs-vllm")
    data["runs"] = data["runs"][:2]  # one held-out run and one fit run: quick
    path = tmp_path / "set.json"

    def fitted(scale_split: str) -> list[float]:
        changed = json.loads(json.dumps(data))
        for run in changed["runs"]:
            if run["split"] == scale_split:
                run["measured"] = {k: v * 1.5 for k, v in run["measured"].items()}
        path.write_text(json.dumps(changed))
        profile, _ = fit_profile(path, steps=1, write=False)
        eras = {name: era.tables_gpus for name, era in profile.source_eras.items()}
        return [term.seconds_per_unit for term in profile.terms] + [eras]

    assert fitted("held_out") == fitted("none")
    assert fitted("fit") != fitted("none")


def test_planner_band_uses_the_held_out_error():
    facts = {
        "label": "fitted",
        "method": "vidur",
        "fit_error": 0.027,
        "held_out_error": 0.058,
        "engine_profile": "vllm-v0",
    }
    error, source = error_of(facts, 0.1)
    assert error == 0.058 and "held-out" in source
    assert error_of(facts | {"held_out_error": None}, 0.1)[0] == 0.027


def test_cli_profiles_and_published(tmp_path):
    runner = CliRunner()
    listed = runner.invoke(app, ["calibrations", "profiles"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0 and "vllm-v1" in listed.output and "trtllm" in listed.output
    shown = runner.invoke(
        app,
        ["calibrations", "show", "llama-2-7b_on_a100-80gb-tp1", "--engine-profile", "vllm-v0"],
        env={"COLUMNS": "200"},
    )
    assert (
        shown.exit_code == 0
        and "overlap with the GPU" in shown.output
        and "with vllm-v0" in shown.output
    )
    out = runner.invoke(app, ["validate", "--published", "lambdalabs-vllm", "--json"])
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)[0]
    assert {e["split"] for e in result["stats"]} == {"fit", "held_out"}
    bad = runner.invoke(app, ["validate", "--published", "no-such-set"])
    assert bad.exit_code == 2 and "lambdalabs-vllm" in bad.output


def test_wake_up_cost_is_paid_once_after_each_idle_spell():
    from simulator.cluster.cluster import Cluster

    profile = host_profile(0.0, step_s=0.0, sequence_s=0.0).with_terms(
        {"wake": 0.05}, "measured", "test"
    )
    gpu = cost_model(0.01)
    plain = Cluster(
        cluster_config(gpu, max_num_batched_tokens=512),
        [0.0, 100.0],
        [20, 20],
        [5, 5],
        ["default"] * 2,
    )
    woken = Cluster(
        cluster_config(ProfiledCostModel(gpu, profile), max_num_batched_tokens=512),
        [0.0, 100.0],
        [20, 20],
        [5, 5],
        ["default"] * 2,
    )
    plain.run()
    woken.run()
    # both requests arrive at an idle engine: each pays one wake-up, on its first step only
    assert woken.replicas[0].busy_s == pytest.approx(plain.replicas[0].busy_s + 2 * 0.05)
    assert [r.ttft_s for r in woken.records] == pytest.approx(
        [r.ttft_s + 0.05 for r in plain.records]
    )


def test_live_gap_separates_between_steps_wake_ups_and_slowdown():
    from simulator.calibration.live_run import StepLog
    from simulator.calibration.schema import ShapeRecord
    from simulator.validation.live_gap import measure_gap, own_profile

    model = cost_model(0.010)  # every step 10 ms in the calibration
    shape = ShapeRecord(decode_context_lens=[50])
    log = StepLog(
        shapes=[shape] * 6,
        step_s=[0.020, 0.012, 0.012, 0.022, 0.012, 0.012],
        busy_s=[0.021, 0.013, None, 0.023, 0.013, None],
        start_s=[0.0] * 6,
    )
    gap = measure_gap([log], model, calibration_times_busy=False)
    assert gap.wake_ups == 2 and gap.kernel_scale == pytest.approx(1.2)  # steady steps 12 ms vs 10
    assert gap.wake_s == pytest.approx(0.009)  # 20-22 ms vs 12 ms steady
    assert gap.between_steps_s == pytest.approx(0.001)
    profile = own_profile(gap, "test")
    assert profile.name == "surgeplan" and profile.kernel_scale == pytest.approx(1.2)
    assert profile.wake_s == pytest.approx(0.009)
    assert all(
        term.label == "measured" for term in profile.terms if term.feature in ("step", "wake")
    )


def test_guaranteed_no_evict_admission_waits_instead_of_preempting():
    """TensorRT-LLM's default admission: a request starts only when it and every running request fit
    at full length, so nothing is ever preempted; vLLM's optimistic admission preempts on this pool."""
    from engine.core.config import SchedulerConfig
    from simulator.cluster.cluster import Cluster

    def run(admission: str) -> Cluster:
        scheduler = SchedulerConfig(
            max_num_seqs=8, max_num_batched_tokens=512, max_model_len=512, admission=admission
        )
        config = cluster_config(cost_model(0.01), num_blocks=24, scheduler_config=scheduler)
        cluster = Cluster(config, [0.0] * 6, [32] * 6, [100] * 6, ["default"] * 6)
        cluster.run()
        return cluster

    optimistic, guaranteed = run("optimistic"), run("guaranteed_no_evict")
    assert optimistic.replicas[0].scheduler.num_preemptions > 0
    assert guaranteed.replicas[0].scheduler.num_preemptions == 0
    assert all(r.ok for r in guaranteed.records) and len(guaranteed.records) == 6


def test_held_out_only_sets_are_never_fitted_on(tmp_path):
    """The Argonne sets are an independent check: loading refuses a fit run in them, fitting refuses
    them, and their errors are recorded into the profile without changing a term."""
    data = load_published("argonne-vllm")
    assert data["held_out_only"] and {run["split"] for run in data["runs"]} == {"held_out"}
    with pytest.raises(ValueError, match="no fit runs"):
        fit_profile("argonne-vllm", write=False)
    small = {**data, "runs": data["runs"][:2]}
    bad = {**small, "runs": [small["runs"][0] | {"split": "fit"}]}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="held-out-only"):
        load_published(tmp_path / "bad.json")
    (tmp_path / "small.json").write_text(json.dumps(small))
    profile, rows = record_errors(tmp_path / "small.json", write=False)
    before = load_profile("vllm-v0")
    assert profile.terms == before.terms and len(rows) == 2
    mine = [e for e in profile.errors if e.source == "argonne-vllm"]
    assert mine and all(e.split == "held_out" and e.num_rows for e in mine)


def test_planner_answer_follows_the_engine_profile():
    """The same traffic planned for vLLM V0 and for TensorRT-LLM: the recommendation names the
    profile, predicts the stack's latencies, and the V0 stack (serial host time) never needs fewer
    replicas and pays for its host time in replicas or in time per token."""
    from test_planner_helpers import quick_settings, spike_scenario

    from simulator.planner.recommend import plan

    answers = {
        name: plan(
            spike_scenario(rate_per_s=3.0, multiplier=8.0, engine_profile=name),
            quick_settings(),
            workers=1,
            progress=False,
        ).report.recommendation
        for name in ("vllm-v0", "trtllm")
    }
    v0, trt = answers["vllm-v0"], answers["trtllm"]
    assert v0.calibration["engine_profile"] == "vllm-v0"
    assert trt.calibration["engine_profile"] == "trtllm"
    assert v0.replicas >= trt.replicas
    # V0's serial host time costs replicas, or at the same count it shows in every token
    assert v0.replicas > trt.replicas or v0.tpot_p99_s > 1.5 * trt.tpot_p99_s
