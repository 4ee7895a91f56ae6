"""aiconfigurator's measured silicon rows beyond vLLM on Hopper: TensorRT-LLM (`aic-silicon-trtllm-h100`,
`aic-silicon-trtllm-70b`: H200 and B200), held out against the `trtllm` profile and replayed on TPOT
only, and vLLM V1 on B200 (`aic-silicon-vllm-v1-b200`), held out against `vllm-v1`. The TensorRT-LLM
rows' TTFT is kept beside each row and left out by a check on the rows themselves (a request's first
token cannot depend on the output length it will later reach), which the vLLM rows of the same table
pass and these fail; each profile's recorded errors are those of a fresh replay."""

import collections
import math

from simulator.calibration.engine_profile import load_profile
from simulator.validation.profile_fit import fitted_together
from simulator.validation.published_report import replay, stats
from simulator.validation.published_sets import load_published, published_names

SETS = {
    "aic-silicon-trtllm-h100": {"H100-80GB"},
    "aic-silicon-trtllm-70b": {"H200-141GB", "B200-180GB"},
}
VLLM_B200 = "aic-silicon-vllm-v1-b200"
SAME_TABLE_VLLM = "aic-silicon-vllm-v1-hopper"


def _ttft_spread(runs: list[dict], ttft) -> list[float]:
    """Per (GPU, TP, prompt length, concurrency) group with several output lengths: the largest mean
    TTFT over the smallest."""
    groups = collections.defaultdict(list)
    for run in runs:
        key = (run["gpu"], run["tensor_parallel"], run["prompt_tokens"][0], run["max_concurrency"])
        groups[key].append(ttft(run))
    return [max(group) / min(group) for group in groups.values() if len(group) > 1]


def test_the_sets_are_trtllm_checks_never_fitted_on():
    for name, gpus in SETS.items():
        data = load_published(name)
        assert name in published_names()
        assert data["engine_profile"] == "trtllm" and data["held_out_only"]
        assert {run["split"] for run in data["runs"]} == {"held_out"}
        assert {run["gpu"] for run in data["runs"]} == gpus
        assert data["bunched_turns_label"] == "derived" and "fits" not in data
        for run in data["runs"]:
            assert run["staggered_warmup"] and run["num_requests"] == 4 * run["max_concurrency"]
            assert set(run["measured"]) == {"tpot_mean_s"}
            assert set(run["not_replayed"]) == {"ttft_mean_s"}
            assert "silicon_sample.csv @ 095f58a" in run["source"] and ", line " in run["source"]
            # aiconfigurator's generator: max batch = the concurrency, tokens = batch + ISL + 1,500
            settings = run["engine_settings"]
            assert settings["max_num_seqs"] == run["max_concurrency"]
            assert settings["max_num_batched_tokens"] % 32 == 0
            assert settings["max_num_batched_tokens"] >= run["prompt_tokens"][0] + 1500
        for other in published_names():
            assert name not in [each["name"] for each in fitted_together(load_published(other))][1:]


def test_ttft_is_left_out_where_it_depends_on_the_output_length_and_kept_where_it_does_not():
    """The same table's vLLM rows agree across output lengths (at most 1.10x apart); every group of
    the TensorRT-LLM rows is further apart than the vLLM rows' widest, so their TTFT is not replayed."""
    vllm = load_published(SAME_TABLE_VLLM)["runs"]
    kept = _ttft_spread(vllm, lambda run: run["measured"]["ttft_mean_s"])
    assert len(kept) == 20 and max(kept) < 1.11
    for name in SETS:
        spread = _ttft_spread(
            load_published(name)["runs"], lambda run: run["not_replayed"]["ttft_mean_s"]
        )
        assert spread and min(spread) > max(kept)


def test_a_run_replays_its_tpot_with_the_trtllm_tables():
    data = load_published("aic-silicon-trtllm-h100")
    data["runs"] = [run for run in data["runs"] if run["id"] == "h100-llama-3-8b-tp1-1024x512-c32"]
    rows = replay(data)
    assert [(row.metric, row.profile, row.split) for row in rows] == [
        ("tpot_mean_s", "trtllm", "held_out")
    ]
    assert math.isfinite(rows[0].simulated) and 0.9 < rows[0].ratio < 1.1


def test_the_vllm_b200_rows_are_a_vllm_v1_check_replayed_on_ttft_and_tpot():
    data = load_published(VLLM_B200)
    assert data["engine_profile"] == "vllm-v1" and data["held_out_only"] and "fits" not in data
    assert {run["gpu"] for run in data["runs"]} == {"B200-180GB"}
    assert {run["tensor_parallel"] for run in data["runs"]} == {4, 8} and len(data["runs"]) == 30
    for run in data["runs"]:
        assert run["split"] == "held_out" and run["weight_dtype"] == "fp8"
        assert set(run["measured"]) == {"ttft_mean_s", "tpot_mean_s"}
    for other in published_names():
        assert (
            VLLM_B200 not in [each["name"] for each in fitted_together(load_published(other))][1:]
        )


def test_each_profile_records_the_errors_a_fresh_replay_gives():
    for profile, name, gpu, count in (
        ("trtllm", "aic-silicon-trtllm-70b", "H200-141GB", 18),
        ("vllm-v1", VLLM_B200, "B200-180GB", 60),
    ):
        data = load_published(name)
        data["runs"] = [run for run in data["runs"] if run["gpu"] == gpu]
        fresh = stats(replay(data))
        stored = {(e.source, e.gpu): e for e in load_profile(profile).errors}[(name, gpu)]
        assert stored.split == "held_out" and stored.num_rows == fresh.rows == count
        assert math.isclose(stored.median_abs_error, fresh.median_abs_error, rel_tol=1e-6)
        assert math.isclose(stored.bias, fresh.bias, rel_tol=1e-6)
        # the planner's band on that GPU is its held-out error there (the only set with its rows)
        band = load_profile(profile).held_out_error(gpu)
        assert math.isclose(band, stored.median_abs_error)
