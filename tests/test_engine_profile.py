"""Engine profiles: the serving stack's host time on top of the GPU calibration, its overlap with the GPU,
exact decode stretches with it, the scenario field and CLI option, published validation (fit and held-out
rows apart) and the planner's band from the held-out error."""

import json

import numpy as np
import pytest
from sim_helpers import cluster_config, cost_model
from typer.testing import CliRunner

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import CostModel
from simulator.calibration.engine_profile import (
    EngineProfile,
    HostTerm,
    SourceEra,
    default_profile_name,
    load_profile,
    profile_names,
)
from simulator.calibration.kernel_era import era_factor
from simulator.calibration.profiled_cost_model import ProfiledCostModel
from simulator.calibration.schema import load_shipped
from simulator.calibration.weight_dtype import weight_dtype_calibration
from simulator.planner.uncertainty import error_of
from simulator.scenario import Scenario
from simulator.simulation import simulate
from simulator.validation.profile_fit import fit_profile, record_errors
from simulator.validation.published_report import stats, validate_published
from simulator.validation.published_sets import load_published
from surgeplan_cli import app


def _profile(overlap: float, step_s: float = 0.002, sequence_s: float = 1e-4) -> EngineProfile:
    terms = [
        HostTerm(feature="step", seconds_per_unit=step_s, label="derived", source="test"),
        HostTerm(feature="sequence", seconds_per_unit=sequence_s, label="derived", source="test"),
    ]
    return EngineProfile(
        name="test",
        engine="test",
        versions="1",
        overlap=overlap,
        overlap_label="derived",
        overlap_source="test",
        terms=terms,
    )


def test_host_time_adds_serially_or_hides_under_the_gpu():
    shape = StepShape(decode_context_lens=(100,) * 10)  # host: 2 ms + 10 x 0.1 ms = 3 ms
    assert _profile(0.0).host_s(shape) == pytest.approx(0.003)
    assert _profile(0.0).step_s(0.010, shape) == pytest.approx(0.013)  # V0: after the GPU
    assert _profile(1.0).step_s(0.010, shape) == pytest.approx(
        0.010
    )  # fully hidden under a longer GPU step
    assert _profile(1.0).step_s(0.001, shape) == pytest.approx(
        0.003
    )  # ... but a short GPU step waits for it
    assert _profile(0.5).step_s(0.010, shape) == pytest.approx(0.0115)


def test_decode_stretches_stay_exact_with_a_profile():
    """The replica's stretch path and step-by-step path give the same per-step times with host terms."""
    gpu = cost_model(0.004, 2e-5, 3e-7)
    model = ProfiledCostModel(gpu, _profile(0.5, step_s=0.003), scale=1.07)
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

    profile = _profile(0.0, step_s=0.0, sequence_s=0.0).with_terms(
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


def test_profile_kernels_pick_the_calibration_and_scale_only_other_backends():
    """A TensorRT-LLM (or SGLang) profile runs on the calibration of its own kernels where one is
    shipped (its kernel scales then do not apply); on another backend's calibration its per-bound
    scales multiply those terms only."""
    base = {
        "model": {"name": "llama-3-8b"},
        "hardware": {"gpu": "H100-80GB"},
        "traffic": {"arrivals": {"kind": "poisson", "rate_per_s": 2.0}, "duration_s": 5},
    }
    facts = simulate(Scenario.model_validate(base | {"engine_profile": "trtllm"})).facts
    assert "trtllm" in facts["calibration"]["name"]
    facts = simulate(Scenario.model_validate(base | {"engine_profile": "vllm-v0"})).facts
    assert "trtllm" not in facts["calibration"]["name"]
    facts = simulate(Scenario.model_validate(base | {"engine_profile": "sglang"})).facts
    assert "sglang" in facts["calibration"]["name"]

    gpu = cost_model(0.01, 1e-5, 1e-7)  # host step, compute per token, memory per context token
    profile = _profile(0.0, step_s=0.0, sequence_s=0.0).model_copy(
        update={"kernel_backend": "trtllm", "kernel_scale_by_bound": {"memory": 0.5}}
    )
    shape = StepShape(decode_context_lens=(1000,) * 4)
    foreign = ProfiledCostModel(gpu, profile, calibration_backend="vllm")
    own = ProfiledCostModel(gpu, profile, calibration_backend="trtllm")
    memory = gpu.explain(shape)["decode attention"]  # the memory-bound term
    assert own.step_time(shape) == pytest.approx(gpu.step_time(shape))
    assert foreign.step_time(shape) == pytest.approx(gpu.step_time(shape) - memory / 2)


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
    replicas."""
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
    assert v0.tpot_p99_s > 1.5 * trt.tpot_p99_s
    assert v0.replicas >= trt.replicas


def test_kernel_era_scales_only_the_linear_layers_of_kernel_tables():
    """An older stack's linear layers over its own backend's kernel tables (derived from Vidur's
    2024 profiles and aiconfigurator's tables on the same layer shapes): applied to a calibration
    of those tables (a backend version named), on that GPU, to the linear-layer terms only."""
    calibrations = [load_shipped(name) for name in ("llama-2-7b@H100-80GB-tp1",)]
    calibrations.append(load_shipped("llama-2-7b@H100-80GB-tp1-aic-vllm"))
    factor = era_factor(calibrations, "H100-80GB")
    assert factor is not None and 1.05 < factor < 1.4
    assert era_factor(calibrations, "A100-80GB") is None  # no pair on that GPU

    table = calibrations[1]
    gpu = CostModel.from_calibration(table)
    profile = _profile(0.0, step_s=0.0, sequence_s=0.0).model_copy(
        update={"kernel_backend": "vllm", "kernel_era_scales": {"H100-80GB": 1.5}}
    )
    shape = StepShape(decode_context_lens=(512,) * 8)
    linear = sum(s for name, s in gpu.explain(shape).items() if name.startswith("linear layers"))
    scaled = ProfiledCostModel(gpu, profile, 1.0, "vllm", ("H100-80GB", "0.24.0"))
    assert scaled.step_time(shape) == pytest.approx(gpu.step_time(shape) + 0.5 * linear)
    for where in (("A100-80GB", "0.24.0"), ("H100-80GB", None)):  # other GPU; not a table
        same = ProfiledCostModel(gpu, profile, calibration_backend="vllm", calibration_table=where)
        assert same.step_time(shape) == pytest.approx(gpu.step_time(shape))

    # fp8 weights: their linear layers keep the tables' time (the factor is derived from bf16
    # GEMMs; no 2024 profile timed fp8 ones), whatever the factor
    rng = np.random.default_rng(int(np.random.SeedSequence().entropy % 2**32))
    fp8 = CostModel.from_calibration(weight_dtype_calibration(table, "fp8"))
    factor = float(rng.uniform(1.05, 2.0))
    older = profile.model_copy(update={"kernel_era_scales": {"H100-80GB": factor}})
    contexts = tuple(int(c) for c in rng.integers(16, 4096, size=int(rng.integers(1, 64))))
    shape = StepShape(decode_context_lens=contexts)
    assert any(name.startswith("linear layers (fp8)") for name in fp8.explain(shape))
    era_fp8 = ProfiledCostModel(fp8, older, 1.0, "vllm", ("H100-80GB", "0.24.0"))
    assert era_fp8.step_time(shape) == pytest.approx(fp8.step_time(shape))


def test_source_era_applies_to_its_own_source_and_gpus_only():
    """A published source whose stack ran the kernel tables' own GEMMs on a GPU drops the profile's
    era scale there, for that source only; the shipped choice names the fit runs it was made on."""
    profile = _profile(0.0).model_copy(
        update={
            "kernel_backend": "vllm",
            "kernel_era_scales": {"H100-80GB": 1.2, "A100-80GB": 1.03},
            "source_eras": {"lab": SourceEra(tables_gpus=["H100-80GB"], source="test")},
        }
    )
    assert profile.for_source("lab").kernel_era_scales == {"A100-80GB": 1.03}
    assert profile.for_source("other") is profile
    shipped = load_profile("vllm-v0")
    for name, era in shipped.source_eras.items():
        assert not load_published(name).get("held_out_only")  # never chosen on an independent check
        assert "fit runs" in era.source and set(era.tables_gpus) <= set(shipped.kernel_era_scales)


def test_trtllm_sizes_its_kv_cache_from_the_memory_left_free():
    """TensorRT-LLM's rule (`kv_memory`): `gpu_memory_utilization` of what is free after weights,
    build-time activations, NCCL and context, with the embedding whole on every GPU; a profile
    without a rule keeps the engine's formula, and the scenario field picks the rule."""
    from simulator.hardware.catalog import get_hardware
    from simulator.model_spec import ModelSpec
    from simulator.simulation import resolve_pool

    rule = load_profile("trtllm").kv_memory
    assert rule is not None and "aiconfigurator" in rule.source
    model, gpu = ModelSpec.from_preset("llama-2-70b", dtype="float16"), get_hardware("A100-40GB")
    block = model.kv_block_bytes_per_gpu(4, 64)
    embedding = model.vocab_size * model.hidden_size * model.dtype_bytes
    weights = model.weight_bytes_per_gpu(4) + embedding * 3 / 4
    free = gpu.memory_bytes - weights - rule.reserve_bytes(model.hidden_size, 4)
    expected = int(0.9 * free * (1 - rule.reserved_fraction) // block)
    blocks = rule.kv_blocks(
        gpu.memory_bytes, 0.9, model.weight_bytes_per_gpu(4), embedding, model.hidden_size, 4, block
    )
    assert blocks == expected > 0
    assert rule.reserve_bytes(model.hidden_size, 16) == rule.reserve_bytes(model.hidden_size, 8)
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        rule.kv_blocks(gpu.memory_bytes, 0.0, 1.0, 0.0, 1, 1, 1)

    def pool(profile: str | None) -> int:
        scenario = Scenario.model_validate(
            {
                "model": {"name": "llama-2-70b", "dtype": "float16"},
                "hardware": {"gpu": "A100-40GB", "tensor_parallel": 4},
                "engine_profile": profile,
                "scheduler": {"block_size": 64, "gpu_memory_utilization": 0.9},
            }
        )
        return resolve_pool(scenario, model)

    assert pool("trtllm") == blocks
    assert pool("vllm-v0") == pool(None) != blocks  # vLLM: a share of the whole GPU


def test_cost_models_pickle_to_the_same_step_times():
    """Ray ships cost models to its actors by pickle (`__reduce__`: rebuilt from what they were made
    of, which the compiled build's classes need); the copy times every step as the original."""
    import pickle

    gpu = cost_model(0.01, 1e-5, 1e-7)
    profile = _profile(0.5, step_s=0.003).model_copy(
        update={"kernel_backend": "trtllm", "kernel_scale_by_bound": {"memory": 0.5}}
    )
    model = ProfiledCostModel(gpu, profile, scale=1.07, calibration_backend="vllm")
    shapes = [
        StepShape(decode_context_lens=(1000,) * 4),
        StepShape(prefill_chunks=((300, 64),), decode_context_lens=(40, 90)),
    ]
    for original in (gpu, model):
        copy = pickle.loads(pickle.dumps(original))
        assert type(copy) is type(original)
        assert [copy.step_time(s) for s in shapes] == [original.step_time(s) for s in shapes]
    assert pickle.loads(pickle.dumps(model)).stated_profile == profile
