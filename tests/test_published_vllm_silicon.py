"""aiconfigurator's measured vLLM V1 silicon rows as the `vllm-v1` profile's fit set: their fit half
fits, of the profile, only the fp8 linear layers per GPU, below the knee and beyond it (over vLLM's
own fp8 GEMM tables: the profile names vLLM's kernels, so the scales touch vLLM-table calibrations
with fp8 weights and nothing else), and the sets sharing their load generator read its bunched turns from them at load
(`bunched_turns_like`), never a stale copy."""

import json

import numpy as np
import pytest
from sim_helpers import fp8_linear_s

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import CostModel
from simulator.calibration.engine_profile import EngineProfile, load_profile
from simulator.calibration.profiled_cost_model import ProfiledCostModel
from simulator.calibration.schema import load_shipped
from simulator.calibration.weight_dtype import weight_dtype_calibration
from simulator.validation import published_sets
from simulator.validation.fit_coordinates import (
    FP8_RANGE,
    fp8_coordinates,
    on_its_gpu,
    scoring_sets,
)
from simulator.validation.profile_fit import fit_profile, fitted_together
from simulator.validation.published_replay import replay_run, source_profile
from simulator.validation.published_sets import PUBLISHED_DIR, load_published

HOPPER = "aic-silicon-vllm-v1-hopper"
# InferenceMAX's other Llama-3.1-70B rows, sent by the same benchmark_serving loop (the 8B
# TensorRT-LLM rows, another import, carry nothing: their own B = 1, the burst turn alone)
CARRYING = ("aic-silicon-vllm-v1-b200", "aic-silicon-trtllm-70b")


def _rng() -> np.random.Generator:
    return np.random.default_rng(int(np.random.SeedSequence().entropy % 2**32))


def test_the_sets_sharing_the_load_generator_read_its_bunched_turns_as_it_stands():
    hopper = load_published(HOPPER)
    for name in CARRYING:
        raw = json.loads((PUBLISHED_DIR / f"{name}.json").read_text())
        assert raw["bunched_turns_like"] == HOPPER and "bunched_turns" not in raw
        data = load_published(name)
        assert data["bunched_turns"] == hopper["bunched_turns"]
        assert data["bunched_turns_label"] == "derived" and HOPPER in data["bunched_turns_source"]
        assert data["burst_start_turns"] == hopper["burst_start_turns"]
    own = load_published("aic-silicon-trtllm-h100")
    assert own["bunched_turns"] == 1.0 and "bunched_turns_like" not in own


def test_a_carried_bunched_turns_follows_its_source_and_refuses_what_it_cannot_carry(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(published_sets, "PUBLISHED_DIR", tmp_path)
    source = json.loads((PUBLISHED_DIR / f"{HOPPER}.json").read_text())
    carrying = json.loads((PUBLISHED_DIR / f"{CARRYING[0]}.json").read_text())
    rng = _rng()
    for turns in rng.uniform(1, source["burst_start_turns"], size=2).round(1):
        (tmp_path / "loop.json").write_text(json.dumps(source | {"bunched_turns": float(turns)}))
        (tmp_path / "check.json").write_text(json.dumps(carrying | {"bunched_turns_like": "loop"}))
        loaded = load_published("check")
        assert loaded["bunched_turns"] == pytest.approx(turns)
        # a loaded set written back (the carried figure beside its source's name) loads the same
        (tmp_path / "again.json").write_text(json.dumps(loaded))
        assert load_published("again")["bunched_turns"] == pytest.approx(turns)
    refused = {
        "unknown": carrying | {"bunched_turns_like": "no-such-set"},
        "both": carrying
        | {"bunched_turns_like": "loop", "bunched_turns": 1.0 if turns > 1.5 else 2.0},
        "fitted too": carrying | {"bunched_turns_like": "loop", "fits": ["bunched_turns"]},
        "no figure": carrying | {"bunched_turns_like": "plain"},
    }
    (tmp_path / "plain.json").write_text(
        json.dumps({k: v for k, v in source.items() if not k.startswith("bunched_turns")})
    )
    for data in refused.values():  # each named for why it is refused
        (tmp_path / "bad.json").write_text(json.dumps(data))
        with pytest.raises(ValueError, match="bunched_turns_like"):
            load_published("bad")


def test_the_hopper_fit_half_fits_only_vllm_v1s_fp8_scales_and_eager_steps_on_its_own_rows():
    data = load_published(HOPPER)
    assert data["fits"] == ["bunched_turns", "profile"]
    # since 2026-12-08 also the eager prompt steps (`tests/test_eager_layer.py`)
    assert data["fit_terms"] == ["eager_layer", "fp8_linear", "fp8_large_batch"]
    together = fitted_together(data)
    assert [each["name"] for each in together] == [HOPPER]  # held-out-only checks never fit it
    fit_sets = [{**data, "runs": [run for run in data["runs"] if run["split"] == "fit"]}]
    fp8 = fp8_coordinates(fit_sets)
    assert fp8 == {"fp8_linear:H100-80GB": "H100-80GB", "fp8_linear:H200-141GB": "H200-141GB"}
    for key in fp8:
        assert scoring_sets(key, fit_sets, {}, fp8) == fit_sets
    # the stored profile: a scale per fitted GPU, each its own (a GPU fitted at 1.0 keeps its
    # entry: without one it would take the other Hopper's), in the searched range, sourced
    profile = load_profile("vllm-v1")
    assert set(profile.fp8_linear_scales) == {"H100-80GB", "H200-141GB"}
    for gpu, scale in profile.fp8_linear_scales.items():
        assert FP8_RANGE[0] <= scale <= FP8_RANGE[1]
        assert profile.fp8_linear_scale(gpu) == (scale, gpu)
    assert HOPPER in profile.fp8_linear_source
    assert profile.fp8_linear_scale("B200-180GB") == (1.0, None)  # another kernel build target
    # the host terms stay derived; only the eager launches are fitted on these rows
    assert {term.feature: term.label for term in profile.terms if term.label == "fitted"} == {
        "eager_layer": "fitted"
    }


def test_an_fp8_trial_replays_its_gpus_runs_alone_because_no_other_gpus_row_moves():
    """The fit's fp8 trials replay only the runs on the coordinate's GPU (`on_its_gpu`): exact,
    because each fitted GPU holds its own entry, so an H100 scale (a fresh draw) leaves an H200
    run's means as they were and moves the H100's."""
    data = load_published(HOPPER)
    fit_sets = [{**data, "runs": [run for run in data["runs"] if run["split"] == "fit"]}]
    fp8 = fp8_coordinates(fit_sets)
    kept = on_its_gpu("fp8_linear:H100-80GB", fit_sets, fp8)
    assert [{run["gpu"] for run in each["runs"]} for each in kept] == [{"H100-80GB"}]
    assert len(kept[0]["runs"]) * 2 == len(fit_sets[0]["runs"])
    assert on_its_gpu("step", fit_sets, fp8) is fit_sets  # not an fp8 scale: every run
    h200_only = {**data, "runs": [run for run in data["runs"] if run["gpu"] == "H200-141GB"]}
    assert on_its_gpu("fp8_linear:H100-80GB", [h200_only, *fit_sets], fp8) == kept  # none there
    v1 = load_profile("vllm-v1")
    scale = float(_rng().uniform(0.5, 0.8))
    moved = v1.model_copy(
        update={"fp8_linear_scales": dict(v1.fp8_linear_scales) | {"H100-80GB": scale}}
    )
    for gpu, same in (("h200", True), ("h100", False)):
        run = next(r for r in data["runs"] if r["id"] == f"{gpu}-llama-3-70b-tp4-1024x1024-c4")
        before = replay_run(data, run, source_profile(data, v1))
        after = replay_run(data, run, source_profile(data, moved))
        assert (before == after) is same


def test_vllm_v1_names_vllms_kernels_so_its_fp8_scale_touches_vllm_tables_with_fp8_weights_only():
    v1 = load_profile("vllm-v1")
    assert v1.kernel_backend == "vllm" and v1.kernel_scale == 1.0 and not v1.kernel_scale_by_bound
    scale = float(_rng().uniform(0.3, 0.95))
    profile = v1.model_copy(update={"fp8_linear_scales": {"H200-141GB": scale}})
    plain = v1.model_copy(update={"fp8_linear_scales": {}})
    vllm_tables = load_shipped("llama-3-70b@H200-141GB-tp4-aic-vllm")
    fp8 = weight_dtype_calibration(vllm_tables, "fp8")
    gpu = CostModel.from_calibration(fp8)
    shape = StepShape(decode_context_lens=tuple(int(c) for c in _rng().integers(16, 4096, size=8)))
    assert fp8_linear_s(gpu, shape) > 0
    scaled, unscaled = (ProfiledCostModel.of_calibration(fp8, p) for p in (profile, plain))
    assert scaled.step_time(shape) == pytest.approx(
        unscaled.step_time(shape) - (1 - scale) * fp8_linear_s(gpu, shape)
    )
    # bf16 weights, TensorRT-LLM's tables: the calibration's time as it is
    for calibration in (
        vllm_tables,
        weight_dtype_calibration(load_shipped("llama-3-70b@H200-141GB-tp4-aic-trtllm"), "fp8"),
    ):
        assert ProfiledCostModel.of_calibration(calibration, profile).step_time(
            shape
        ) == pytest.approx(ProfiledCostModel.of_calibration(calibration, plain).step_time(shape))


def test_a_profile_with_scales_over_its_own_tables_must_name_its_backend():
    """Era and fp8 scales apply only to calibrations of the stack's own backend's tables: a profile
    naming no backend would never apply them (vllm-v1's did not until it named vLLM's), so it is
    refused as it loads."""
    stored = load_profile("vllm-v1").model_dump()
    scale = float(_rng().uniform(0.3, 1.2))
    fields = (
        "kernel_era_scales",
        "older_era_scales",
        "fp8_linear_scales",
        "fp8_large_batch_scales",
    )
    for field in fields:
        unnamed = (
            stored
            | dict.fromkeys(fields, {})
            | {
                "kernel_backend": None,
                field: {"H100-80GB": scale},
                "fp8_linear_reference": {},
            }
        )
        with pytest.raises(ValueError, match=f"{field}.*no kernel_backend"):
            EngineProfile.model_validate(unnamed)
        named = EngineProfile.model_validate(unnamed | {"kernel_backend": "vllm"})
        assert getattr(named, field) == {"H100-80GB": scale}


def test_a_gpu_fitted_at_one_keeps_its_own_scale_where_absent_it_would_carry_another():
    other = float(_rng().uniform(0.3, 0.95))
    v1 = load_profile("vllm-v1")
    fitted_at_one = v1.model_copy(
        update={"fp8_linear_scales": {"H100-80GB": other, "H200-141GB": 1.0}}
    )
    assert fitted_at_one.fp8_linear_scale("H200-141GB") == (1.0, "H200-141GB")
    absent = v1.model_copy(update={"fp8_linear_scales": {"H100-80GB": other}})
    assert absent.fp8_linear_scale("H200-141GB") == (other, "H100-80GB")


def test_the_fit_finds_planted_fp8_scales_and_keeps_a_gpu_fitted_at_one(tmp_path):
    """Two short runs (one per Hopper GPU) measured as the simulator's own means with the H100's fp8
    scales planted (fresh draws: below the knee and beyond it) and the H200's at 1.0: the fit finds
    all four, and the H200 keeps its own 1.0 entry (dropped, it would carry the H100's small-batch
    scale through the same-target rule)."""
    planted = float(_rng().choice([0.5, 0.6, 0.7, 0.8, 0.9]))
    large = float(_rng().choice([0.8, 0.9, 1.1, 1.2, 1.3]))
    raw = json.loads((PUBLISHED_DIR / f"{HOPPER}.json").read_text())
    data = load_published(HOPPER)
    truth = load_profile("vllm-v1").model_copy(
        update={
            "fp8_linear_scales": {"H100-80GB": planted, "H200-141GB": 1.0},
            "fp8_large_batch_scales": {"H100-80GB": large, "H200-141GB": 1.0},
        }
    )
    runs = []
    for gpu in ("h100", "h200"):
        run_id = f"{gpu}-llama-3-70b-tp4-1024x1024-c4"
        loaded = next(run for run in data["runs"] if run["id"] == run_id)
        means = replay_run(data, loaded, source_profile(data, truth))
        stored = next(run for run in raw["runs"] if run["id"] == run_id)
        measured = {key: means[key] for key in ("ttft_mean_s", "tpot_mean_s")}
        runs.append(stored | {"split": "fit", "measured": measured})
    path = tmp_path / "small.json"
    # the fp8 scales alone (four rows fix four scales; the set's eager term stays as planted)
    path.write_text(
        json.dumps(raw | {"runs": runs, "fit_terms": ["fp8_linear", "fp8_large_batch"]})
    )
    fitted, _rows = fit_profile(path, steps=2, write=False)
    assert fitted.fp8_linear_scales == {
        "H100-80GB": pytest.approx(planted),
        "H200-141GB": pytest.approx(1.0),
    }
    assert fitted.fp8_large_batch_scales == {
        "H100-80GB": pytest.approx(large),
        "H200-141GB": pytest.approx(1.0),
    }
    assert fitted.fp8_linear_scale("H200-141GB") == (pytest.approx(1.0), "H200-141GB")


def test_the_h100_runs_cache_choice_is_what_their_pool_bound_runs_measure():
    """InferenceMAX's H100 vLLM runs are replayed with a bf16-sized KV cache (its scripts ask for
    fp8): where the pool binds, the measured TTFT is queueing, and it is the bf16 pool's at TP2 on
    H100 while H200's TP1 runs queue as an fp8 pool does (benchmarks/vllm_h100_kv_cache.py)."""
    import math

    from benchmarks.vllm_h100_kv_cache import replay_both

    data = published_sets.load_published("aic-silicon-vllm-v1-70b-more-tp")
    runs = {run["id"]: run for run in data["runs"]}
    for run_id, closer in (
        ("h100-llama-3-70b-tp2-8192x1024-c32", "bf16"),
        ("h100-llama-3-70b-tp2-1024x8192-c64", "bf16"),
        ("h200-llama-3-70b-tp1-8192x1024-c32", "fp8"),
    ):
        run = runs[run_id]
        measured = run["measured"]["ttft_mean_s"]
        simulated = replay_both(data, run)
        distance = {
            cache: abs(math.log(means["ttft_mean_s"] / measured))
            for cache, means in simulated.items()
        }
        assert min(distance, key=distance.get) == closer, (run_id, measured, simulated)
        declared = (data["engine_settings"] | run["engine_settings"])["kv_cache_dtype"]
        assert declared == {"bf16": "auto", "fp8": "fp8"}[closer]
