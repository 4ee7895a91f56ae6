"""TensorRT-LLM's published sets and how the `trtllm` profile scales another backend's kernels: the
per-bound scales move the linear layers' knee (the small-batch weight-read floor follows the
memory-bound scale), static-batch runs hold their batch in the pool, and one profile is fitted on
the fit runs of every set naming it (never on a held-out-only one); a source older than the kernel
tables the profile stands for runs an older era, chosen on fit runs and shared by declaration; an
independent set restates its table and the precision it ran."""

import json

import pytest

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import CostModel
from simulator.calibration.engine_profile import EngineProfile, HostTerm, SourceEra, load_profile
from simulator.calibration.profiled_cost_model import ProfiledCostModel
from simulator.calibration.schema import load_shipped
from simulator.validation.profile_fit import fitted_together
from simulator.validation.published_sets import load_published

LINEAR_KNEE = "linear layers: max(tokens, knee) × compute"


def _scaling_profile(memory: float, compute: float) -> EngineProfile:
    return EngineProfile(
        name="test",
        engine="test",
        versions="1",
        overlap=1.0,
        overlap_label="derived",
        overlap_source="test",
        terms=[HostTerm(feature="step", seconds_per_unit=0.0, label="derived", source="test")],
        kernel_backend="trtllm",
        kernel_scale_by_bound={"memory": memory, "compute": compute},
    )


def test_bound_scales_move_the_knee_so_the_weight_read_floor_follows_memory():
    """Below the knee the linear layers re-read the weights (memory-bound), above it they are
    compute-bound: scaled by the profile, the small-batch floor takes the memory scale and a large
    batch the compute scale, as when a calibration is carried to other hardware."""
    gpu = CostModel.from_calibration(load_shipped("llama-2-7b_on_a100-80gb-tp1"))
    scaled = ProfiledCostModel(gpu, _scaling_profile(0.5, 2.0), calibration_backend="vllm")
    assert scaled.knee_tokens == pytest.approx(gpu.knee_tokens * 0.5 / 2.0)
    small = StepShape(decode_context_lens=(64,) * 4)  # 4 tokens: on the floor
    large = StepShape(prefill_chunks=((4096, 0),))  # far above the knee
    for shape, scale in ((small, 0.5), (large, 2.0)):
        assert scaled.explain(shape)[LINEAR_KNEE] == pytest.approx(
            scale * gpu.explain(shape)[LINEAR_KNEE]
        )
    own = ProfiledCostModel(gpu, _scaling_profile(0.5, 2.0), calibration_backend="trtllm")
    assert own.knee_tokens == gpu.knee_tokens  # its own kernels' table: nothing scaled


def test_static_batch_runs_hold_their_batch_in_the_pool():
    """gptSessionBenchmark runs one static batch: each throughput run's pool is the batch at full
    length, so the simulator never splits it into waves the tool does not run."""
    data = load_published("trtllm-perf-a100")
    block = data["engine_settings"]["block_size"]
    for run in data["runs"]:
        if max(run["output_tokens"]) > 1:
            per_sequence = -(-(run["prompt_tokens"][0] + run["output_tokens"][0]) // block)
            assert run["engine_settings"]["num_kv_blocks"] == run["batch_size"] * per_sequence


def test_a_profile_is_fitted_on_every_set_naming_it_but_never_on_an_independent_check():
    names = [data["name"] for data in fitted_together(load_published("trtllm-perf-a100"))]
    assert names[0] == "trtllm-perf-a100"
    assert "trtllm-perf-overview-v014" in names and "argonne-trtllm" not in names
    again = [data["name"] for data in fitted_together(load_published("trtllm-perf-overview-v014"))]
    assert sorted(again) == sorted(names)
    assert [data["name"] for data in fitted_together(load_published("lambdalabs-vllm"))] == [
        "lambdalabs-vllm"
    ]
    v014 = load_published("trtllm-perf-overview-v014")
    for gpu in ("A100-80GB", "H100-80GB"):  # every source split into fit and held-out on each GPU
        splits = {run["split"] for run in v014["runs"] if run["gpu"] == gpu}
        assert splits == {"fit", "held_out"}


def test_an_older_era_applies_only_where_a_source_ran_it_or_is_declared_alike():
    """`older_era_scales` (a stack older than the tables the profile stands for) apply to the
    sources whose `source_eras` entry names the GPU, and to a set declared of the same stack
    generation (`kernel_era_like`); the profile itself, what the planner uses, keeps the tables."""
    profile = _scaling_profile(1.0, 1.0).model_copy(
        update={
            "older_era_scales": {"H100-80GB": 1.12},
            "source_eras": {"old": SourceEra(older_gpus=["H100-80GB"], source="test")},
        }
    )
    assert profile.kernel_era_scales == {}
    assert profile.for_source("old").kernel_era_scales == {"H100-80GB": 1.12}
    assert profile.for_source("alike", like="old").kernel_era_scales == {"H100-80GB": 1.12}
    assert profile.for_source("new") is profile
    shipped = load_profile("trtllm")
    for name, era in shipped.source_eras.items():
        assert not load_published(name).get("held_out_only")  # never chosen on an independent check
        assert "fit runs" in era.source and set(era.older_gpus) <= set(shipped.older_era_scales)
    like = load_published("argonne-trtllm")["kernel_era_like"]
    assert not load_published(like).get("held_out_only")


def test_kernel_era_like_must_name_a_stored_set(tmp_path):
    data = load_published("argonne-trtllm")
    path = tmp_path / "set.json"
    path.write_text(json.dumps({**data, "kernel_era_like": "no-such-set"}))
    with pytest.raises(ValueError, match="kernel_era_like"):
        load_published(path)


def test_v017_rows_restate_their_table_and_the_precision_they_ran():
    """TensorRT-LLM 0.17's overview, an independent check: each row's makespan is its table's N x
    output length / tokens a second (both named in its source), an FP8 row runs fp8 weights and,
    as FP8 quantization sets it, an fp8 KV cache (an FP16 row neither), every prompt and output
    fits its max_model_len, and the set takes v0.14's kernel era by declaration, never by a fit."""
    data = load_published("trtllm-perf-overview-v017")
    assert data["held_out_only"] and data["kernel_era_like"] == "trtllm-perf-overview-v014"
    assert "trtllm-perf-overview-v017" not in {
        other["name"] for other in fitted_together(load_published("trtllm-perf-a100"))
    }
    for run in data["runs"]:
        source = run["source"]
        tokens_per_s = float(source.split(" tokens/s")[0].rsplit(" ", 1)[1])
        requests = int(source.split("(output tokens: ")[1].split(" ")[0])
        assert requests == run["batch_size"] == len(run["output_tokens"])
        assert run["measured"]["makespan_s"] == pytest.approx(
            requests * run["output_tokens"][0] / tokens_per_s, rel=1e-12
        )
        fp8 = " FP8 column" in source
        assert (run.get("weight_dtype") == "fp8") == fp8
        assert (run["engine_settings"].get("kv_cache_dtype") == "fp8") == fp8
        settings = run["engine_settings"]
        assert settings["max_model_len"] == run["prompt_tokens"][0] + run["output_tokens"][0]
        assert settings["max_num_batched_tokens"] >= 2048 and settings["max_num_seqs"] >= 64
