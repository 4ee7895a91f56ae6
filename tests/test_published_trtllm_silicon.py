"""aiconfigurator's measured silicon rows beyond vLLM on Hopper: TensorRT-LLM (`aic-silicon-trtllm-h100`,
held out; `aic-silicon-trtllm-70b`: H200 and B200, split by rule, its fit half fitting the `trtllm`
profile's fp8 linear-layer scale per GPU, its TPOT rows alone scoring it) replayed on TTFT and TPOT,
and vLLM V1 on B200 (`aic-silicon-vllm-v1-b200`), held out against `vllm-v1`. The 8B rows' TTFT is
kept beside each row and left out by a check on the rows themselves (a request's first token cannot
depend on the output length it will later reach), which the vLLM rows of the same table pass and these
fail; the 70B rows failed it too until their server's batch wait, set on InferenceMAX's 1k / 1k runs
below TP8, was modelled. The fp8 scale touches only the fp8 linear layers of the stack's own tables;
each profile's recorded errors are those of a fresh replay."""

import collections
import json
import math
import pickle

import numpy as np
import pytest
from sim_helpers import fp8_linear_s

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import CostModel
from simulator.calibration.engine_profile import load_profile
from simulator.calibration.profiled_cost_model import ProfiledCostModel
from simulator.calibration.schema import load_shipped
from simulator.calibration.weight_dtype import weight_dtype_calibration
from simulator.hardware.catalog import get_hardware
from simulator.validation.fit_coordinates import (
    FIT_TERMS,
    FP8_TERM,
    fp8_coordinates,
    fp8_references,
    scoring_sets,
)
from simulator.validation.profile_fit import fitted_together
from simulator.validation.published_report import replay, stats
from simulator.validation.published_sets import PUBLISHED_DIR, load_published, published_names

SETS = {
    "aic-silicon-trtllm-h100": {"H100-80GB"},
    "aic-silicon-trtllm-70b": {"H200-141GB", "B200-180GB"},
}
SETS_70B = ("aic-silicon-trtllm-70b", "aic-silicon-trtllm-70b-more-tp")
VLLM_B200 = "aic-silicon-vllm-v1-b200"
SAME_TABLE_VLLM = "aic-silicon-vllm-v1-hopper"


def _waits(run: dict) -> int:
    return run.get("engine_settings", {}).get("batch_wait_steps", 0)


def _ttft_spread(runs: list[dict], ttft, by_wait: bool = False) -> list[float]:
    """Per (GPU, TP, prompt length, concurrency) group with several output lengths (and, `by_wait`,
    the same batch wait): the largest mean TTFT over the smallest."""
    groups = collections.defaultdict(list)
    for run in runs:
        isl = run.get("nominal_lengths", run["prompt_tokens"])[0]  # the run's ISL
        key = (run["gpu"], run["tensor_parallel"], isl, run["max_concurrency"])
        key += (_waits(run),) if by_wait else ()
        groups[key].append(ttft(run))
    return [max(group) / min(group) for group in groups.values() if len(group) > 1]


def test_the_sets_replay_tpot_with_their_servers_engine_settings():
    for name, gpus in SETS.items():
        data = load_published(name)
        assert name in published_names()
        assert data["engine_profile"] == "trtllm" and data["bunched_turns_label"] == "derived"
        assert {run["gpu"] for run in data["runs"]} == gpus
        assert "fits" not in data  # the profile's, never the loop's bunching
        for run in data["runs"]:
            if name == "aic-silicon-trtllm-h100":
                assert set(run["measured"]) == {"tpot_mean_s"}
                assert set(run["not_replayed"]) == {"ttft_mean_s"}
            else:
                assert set(run["measured"]) == {"ttft_mean_s", "tpot_mean_s"}
                assert "not_replayed" not in run
            assert "silicon_sample.csv @ 095f58a" in run["source"] and ", line " in run["source"]
            assert run["staggered_warmup"]
    # the 8B rows: aiconfigurator's generator (max batch = the concurrency, tokens = batch + ISL +
    # 1,500), aiperf's 20 turns after a warm-up, 4 N measured requests at the nominal lengths
    h100 = load_published("aic-silicon-trtllm-h100")
    assert h100["burst_start_turns"] == 20 and "random_lengths" not in h100
    for run in h100["runs"]:
        settings = run["engine_settings"]
        assert run["num_requests"] == 4 * run["max_concurrency"]
        assert settings["max_num_seqs"] == run["max_concurrency"]
        assert settings["max_num_batched_tokens"] % 32 == 0
        assert settings["max_num_batched_tokens"] >= run["prompt_tokens"][0] + 1500
    # the 70B rows: InferenceMAX's trtllm-serve (16,384 tokens a step, fp8 KV) and its
    # benchmark_serving (10 N requests, lengths drawn in [0.8, 1] x ISL / OSL from seed 0)
    data = load_published("aic-silicon-trtllm-70b")
    assert data["burst_start_turns"] == 10 and "InferenceMAX" in data["description"]
    settings = data["engine_settings"]
    assert settings["max_num_batched_tokens"] == 16384 and settings["kv_cache_dtype"] == "fp8"
    for run in data["runs"]:
        isl, osl = run["nominal_lengths"]
        assert run["num_requests"] == 10 * run["max_concurrency"] == len(run["prompt_tokens"])
        assert all(int(0.8 * isl) <= n <= isl for n in run["prompt_tokens"])
        assert all(int(0.8 * osl) <= n <= osl for n in run["output_tokens"])
        assert run["engine_settings"]["max_model_len"] >= isl + osl


def test_the_8b_set_is_held_out_and_the_70b_set_split_by_rule_fits_the_fp8_scale_and_api_server():
    h100 = load_published("aic-silicon-trtllm-h100")
    assert h100["held_out_only"] and {run["split"] for run in h100["runs"]} == {"held_out"}
    for other in published_names():
        fitted = [each["name"] for each in fitted_together(load_published(other))][1:]
        assert "aic-silicon-trtllm-h100" not in fitted
    data = load_published("aic-silicon-trtllm-70b")
    # its TPOT rows fit the fp8 scale, its first-token rows the API server's time per request
    assert not data.get("held_out_only") and data["fit_terms"] == [FP8_TERM, "request"]
    assert "aic-silicon-trtllm-70b" in [
        each["name"] for each in fitted_together(load_published("trtllm-perf-a100"))
    ]
    for gpu in (
        "H200-141GB",
        "B200-180GB",
    ):  # sorted by ISL, OSL, concurrency: every second held out
        ranked = sorted(
            (run for run in data["runs"] if run["gpu"] == gpu),
            key=lambda run: (*run["nominal_lengths"], run["max_concurrency"]),
        )
        assert [run["split"] for run in ranked] == ["fit", "held_out"] * 9
    fit_half = [{**data, "runs": [run for run in data["runs"] if run["split"] == "fit"]}]
    assert fp8_coordinates(fit_half) == {
        "fp8_linear:B200-180GB": "B200-180GB",
        "fp8_linear:H200-141GB": "H200-141GB",
    }
    # the shape each GPU's scale is fitted at (the profile records it; other shapes carry by it)
    assert fp8_references(fit_half) == {
        "B200-180GB": ("llama-3-70b", 4),
        "H200-141GB": ("llama-3-70b", 4),
    }
    assert {
        gpu: (at.model, at.tensor_parallel)
        for gpu, at in load_profile("trtllm").fp8_linear_reference.items()
    } == fp8_references(fit_half)
    # a set not naming the term, or bf16 runs, add none
    assert fp8_coordinates([{**h100, "fit_terms": [FP8_TERM]}]) == {}
    assert fp8_coordinates([{**data, "fit_terms": ["wake"]}]) == {}
    assert fp8_references([{**data, "fit_terms": ["wake"]}]) == {}


def test_each_set_scores_only_the_terms_it_names_in_the_trtllm_fit():
    # the 70B fp8 rows fit their scale alone: they never pull the host terms or kernel scales the
    # A100 tables fit (which moved the wake term 3.4 -> 4.9 ms and Argonne's independent check
    # from 5.3% to 6.0% when every row scored every term)
    sets = fitted_together(load_published("aic-silicon-trtllm-70b"))
    fp8 = fp8_coordinates(sets)
    older = {"older_era:trtllm-perf-overview-v014:H100-80GB": ("trtllm-perf-overview-v014", "")}

    def names(feature: str) -> set[str]:
        return {each["name"] for each in scoring_sets(feature, sets, older, fp8)}

    assert names("fp8_linear:H200-141GB") == names("fp8_linear:B200-180GB")
    assert names("fp8_linear:H200-141GB") == {"aic-silicon-trtllm-70b"}
    assert names("wake") == {"trtllm-perf-a100"}
    assert names("memory_scale") == {"trtllm-perf-a100", "trtllm-perf-overview-v014"}
    assert names(next(iter(older))) == {"trtllm-perf-overview-v014"}
    # a set naming no terms scores the default ones
    plain = [{"name": "plain", "runs": []}]
    assert [each["name"] for each in scoring_sets("step", plain, {}, {})] == ["plain"]
    assert scoring_sets("wake", plain, {}, {}) == []
    # on fresh random sets: a term is scored by exactly the sets naming it
    rng = np.random.default_rng(int(np.random.SeedSequence().entropy % 2**32))
    terms = list(FIT_TERMS)
    random_sets = [
        {"name": f"set{i}", "fit_terms": list(rng.choice(terms, rng.integers(0, 4), replace=False))}
        for i in range(6)
    ]
    for term in terms:
        coordinate = {f"{FP8_TERM}:X": "X"} if term == FP8_TERM else {}
        feature = next(iter(coordinate)) if coordinate else term
        assert [each["name"] for each in scoring_sets(feature, random_sets, {}, coordinate)] == [
            each["name"] for each in random_sets if term in each["fit_terms"]
        ]


def test_the_fp8_scale_touches_only_fp8_linear_layers_up_to_the_knee_of_the_stacks_own_tables():
    rng = np.random.default_rng(int(np.random.SeedSequence().entropy % 2**32))
    scale = float(rng.uniform(0.3, 0.95))
    table = load_shipped("llama-3-70b@H200-141GB-tp4-aic-trtllm")
    trtllm = load_profile("trtllm")
    profile = trtllm.model_copy(update={"fp8_linear_scales": {"H200-141GB": scale}})
    plain = trtllm.model_copy(update={"fp8_linear_scales": {}})
    fp8 = weight_dtype_calibration(table, "fp8")
    gpu = CostModel.from_calibration(fp8)
    scaled, unscaled = (ProfiledCostModel.of_calibration(fp8, p) for p in (profile, plain))
    knee = int(fp8.cost_model.knee_tokens)

    # up to the knee (decode steps of any batch up to it): the fp8 linear layers `scale` as long
    for batch in rng.integers(1, knee + 1, size=3):
        contexts = tuple(int(c) for c in rng.integers(16, 4096, size=int(batch)))
        shape = StepShape(decode_context_lens=contexts)
        assert fp8_linear_s(gpu, shape) > 0
        assert scaled.step_time(shape) == pytest.approx(
            unscaled.step_time(shape) - (1 - scale) * fp8_linear_s(gpu, shape)
        )
        stretch = scaled.decode_stretch_times(shape, 4)
        plain_stretch = unscaled.decode_stretch_times(shape, 4)
        saved = (1 - scale) * fp8_linear_s(gpu, shape)
        assert stretch == pytest.approx([s - saved for s in plain_stretch])
    # beyond it each further token costs what the tables say: the saving stays a step's at the knee
    # (where every step is graphed)
    at_knee = fp8_linear_s(gpu, StepShape(prefill_chunks=((knee, 0),)))
    graphed = ProfiledCostModel.of_calibration(
        fp8, profile.model_copy(update={"graph_steps": "every"})
    )
    for tokens in rng.integers(knee + 1, 16384, size=3):
        long = StepShape(prefill_chunks=((int(tokens), 0),))
        saved = unscaled.step_time(long) - graphed.step_time(long)
        assert saved == pytest.approx((1 - scale) * at_knee)
    # TensorRT-LLM graphs generation-only steps: one with a prompt (alone or beside decodes, below
    # the knee or beyond it) runs eagerly and keeps the tables' time
    assert trtllm.graph_steps == "decode_only"
    for tokens in (1, int(rng.integers(2, knee)), int(rng.integers(knee + 1, 16384))):
        for decodes in ((), (512,) * int(rng.integers(1, 64))):
            mixed = StepShape(prefill_chunks=((tokens, 0),), decode_context_lens=decodes)
            assert scaled.step_time(mixed) == pytest.approx(unscaled.step_time(mixed))
    copied = pickle.loads(pickle.dumps(scaled))  # (a replica's cost model travels to workers)
    assert copied.step_time(mixed) == pytest.approx(unscaled.step_time(mixed))
    assert copied.step_time(shape) == pytest.approx(scaled.step_time(shape))
    assert scaled.step_time(shape) < unscaled.step_time(shape)


def test_ttft_is_left_out_where_it_depends_on_the_output_length_and_kept_where_it_does_not():
    """The same table's vLLM rows agree across output lengths (at most 1.10x apart). Every group of
    the 8B TensorRT-LLM rows is further apart than that, so their TTFT is not replayed. So was every
    group of the 70B rows below TP8, and only because of the batch wait InferenceMAX set at 1k / 1k
    there: grouped by the wait too, no group is left below TP8, and the TP8 groups (no wait on either
    output length) are 1.0-1.33x apart, so the 70B rows replay TTFT with the wait modelled."""
    vllm = load_published(SAME_TABLE_VLLM)["runs"]
    kept = _ttft_spread(vllm, lambda run: run["measured"]["ttft_mean_s"])
    assert len(kept) == 20 and max(kept) < 1.11
    h100 = _ttft_spread(
        load_published("aic-silicon-trtllm-h100")["runs"],
        lambda run: run["not_replayed"]["ttft_mean_s"],
    )
    assert h100 and min(h100) > max(kept)
    runs = [run for name in SETS_70B for run in load_published(name)["runs"]]
    below_tp8 = [run for run in runs if run["tensor_parallel"] < 8]
    ttft = lambda run: run["measured"]["ttft_mean_s"]  # noqa: E731
    assert min(_ttft_spread(below_tp8, ttft)) > 1.7  # told apart by the wait alone
    assert _ttft_spread(below_tp8, ttft, by_wait=True) == []
    at_tp8 = _ttft_spread(runs, ttft, by_wait=True)
    assert len(at_tp8) == 12 and max(at_tp8) < 1.34


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
        ("trtllm", "aic-silicon-trtllm-70b", "H200-141GB", 18),  # TTFT and TPOT rows
        ("vllm-v1", VLLM_B200, "B200-180GB", 60),
        # InferenceMAX's rows at the other degrees, held out only (2026-12-06)
        ("trtllm", "aic-silicon-trtllm-70b-more-tp", "H200-141GB", 108),
        ("vllm-v1", "aic-silicon-vllm-v1-70b-more-tp", "H100-80GB", 30),
    ):
        data = load_published(name)
        data["runs"] = [r for r in data["runs"] if r["gpu"] == gpu and r["split"] == "held_out"]
        fresh = stats(replay(data))
        stored = {
            (e.source, e.gpu): e
            for e in load_profile(profile).errors
            if e.split == "held_out" and e.tensor_parallel is None
        }[(name, gpu)]
        assert stored.num_rows == fresh.rows == count
        assert math.isclose(stored.median_abs_error, fresh.median_abs_error, rel_tol=1e-6)
        assert math.isclose(stored.bias, fresh.bias, rel_tol=1e-6)
        # the planner's band on that GPU is the held-out error of the sets with rows there, each
        # weighed by its rows (TensorRT-LLM 0.17's overview also has H200 rows)
        there = [
            e
            for e in load_profile(profile).errors
            if e.split == "held_out" and e.gpu == gpu and e.tensor_parallel is None
        ]
        band = load_profile(profile).held_out_error(gpu)
        rows = sum(e.num_rows for e in there)
        assert math.isclose(band, sum(e.median_abs_error * e.num_rows for e in there) / rows)
        assert (
            min(e.median_abs_error for e in there) <= band <= max(e.median_abs_error for e in there)
        )


def test_a_set_naming_an_unknown_fit_term_is_refused(tmp_path):
    data = load_published("aic-silicon-trtllm-70b")
    path = tmp_path / "typo.json"
    path.write_text(json.dumps({**data, "fit_terms": ["fp8_liner"]}))
    with pytest.raises(ValueError, match=r"typo.json: fit_terms is \['fp8_liner'\]; expected"):
        load_published(path)


def test_the_fitted_fp8_scale_keeps_a_long_prefill_below_the_chips_fp8_peak():
    # a scale on every token would make an 8,192-token prefill's linear layers faster than the
    # H200's dense fp8 tensor cores (x0.54 on every token: 2.2 PFLOP/s a GPU against 1.98)
    table = weight_dtype_calibration(load_shipped("llama-3-70b@H200-141GB-tp4-aic-trtllm"), "fp8")
    profile = load_profile("trtllm")
    assert profile.fp8_linear_scales["H200-141GB"] < 1
    tokens = 8192
    parts = ProfiledCostModel.of_calibration(table, profile).explain(
        StepShape(prefill_chunks=((tokens, 0),))
    )
    linear_s = sum(s for name, s in parts.items() if "linear layers" in name)
    # Llama-3-70B's linear layers: 80 layers of (8192 x 10240 QKV + 8192 x 8192 O + 3 x 8192 x
    # 28672 MLP) weights, a quarter on each of 4 GPUs, 2 FLOPs a weight a token
    weights = 80 * (8192 * 10240 + 8192 * 8192 + 3 * 8192 * 28672) / 4
    peak = get_hardware("H200-141GB").fp8_dense_flops
    assert 2 * weights * tokens / linear_s < peak


def test_the_other_degrees_are_held_out_only_and_complete_the_sweep():
    """InferenceMAX's 70B rows at the degrees the TP4 / TP8 sets leave out (2026-12-06): held out
    only, never fitted with any profile, each (GPU, degree) in exactly one set, each with its own
    shipped calibration of the stack's kernel tables at that degree."""
    pairs = {
        "vllm-v1": ("aic-silicon-vllm-v1-70b-more-tp", (SAME_TABLE_VLLM, VLLM_B200), "vllm"),
        "trtllm": ("aic-silicon-trtllm-70b-more-tp", ("aic-silicon-trtllm-70b",), "trtllm"),
    }
    for profile, (name, others, backend) in pairs.items():
        data = load_published(name)
        assert data["held_out_only"] and data["engine_profile"] == profile
        assert {run["split"] for run in data["runs"]} == {"held_out"}
        for other in published_names():
            fitted = [each["name"] for each in fitted_together(load_published(other))][1:]
            assert name not in fitted  # (the first is the set itself)
        mine = {(run["gpu"], run["tensor_parallel"]) for run in data["runs"]}
        theirs = {
            (run["gpu"], run["tensor_parallel"])
            for other in others
            for run in load_published(other)["runs"]
        }
        assert mine and not mine & theirs
        for gpu, degree in mine:
            calibration = load_shipped(f"llama-3-70b@{gpu}-tp{degree}-aic-{backend}")
            assert calibration.device.tensor_parallel == degree
            assert calibration.provenance.backend == backend


def test_the_batch_wait_is_set_by_infermax_rule_on_36_of_the_144_runs():
    """InferenceMAX's TensorRT-LLM script sets the batch wait (20 steps, 0.9 of the 16,384-token
    budget) for 1k / 1k below TP8 only; the runs carry it in their engine settings, and
    `benchmarks/trtllm_ttft.py` keeps them apart by it."""
    from benchmarks.trtllm_ttft import SETS, held

    assert SETS == SETS_70B
    runs = {run["id"]: run for name in SETS for run in load_published(name)["runs"]}
    for run in runs.values():
        rule = tuple(run["nominal_lengths"]) == (1024, 1024) and run["tensor_parallel"] < 8
        assert held(run) is rule, run["id"]
        settings = run["engine_settings"]
        if rule:
            assert settings["batch_wait_steps"] == 20
            assert settings["batch_wait_max_tokens_ratio"] == 0.9
        else:
            assert "batch_wait_steps" not in settings
    for run_id, is_held in (
        ("h200-llama-3-70b-tp4-1024x1024-c8", True),
        ("b200-llama-3-70b-tp1-1024x1024-c64", True),
        ("h200-llama-3-70b-tp8-1024x1024-c8", False),  # TP8: no hold
        ("b200-llama-3-70b-tp4-1024x8192-c8", False),  # 1k / 8k: no hold
        ("b200-llama-3-70b-tp2-8192x1024-c4", False),
    ):
        assert held(runs[run_id]) is is_held, run_id
    assert sum(map(held, runs.values())) == 36 and len(runs) == 144


def test_the_70b_fit_is_scored_by_its_tpot_rows_alone():
    """The one figure the 70B fit half fits (the fp8 linear layers up to the knee) is a decode
    step's; its TTFT rows are replayed and reported, not scored."""
    from simulator.validation.profile_fit import scored_rows
    from simulator.validation.published_sets import fit_metrics

    data = load_published("aic-silicon-trtllm-70b")
    assert fit_metrics(data) == ("tpot_mean_s",)
    data["runs"] = [run for run in data["runs"] if run["id"] == "b200-llama-3-70b-tp4-1024x1024-c4"]
    profile = load_profile("trtllm")
    assert [row.metric for row in replay(data, profile)] == ["ttft_mean_s", "tpot_mean_s"]
    assert [row.metric for row in scored_rows([data], profile)] == ["tpot_mean_s"]


def test_a_set_naming_an_unknown_fit_metric_is_refused(tmp_path):
    data = json.loads((PUBLISHED_DIR / "aic-silicon-trtllm-70b.json").read_text()) | {
        "fit_metrics": ["ttft_p99_s"]
    }
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="fit_metrics is \\['ttft_p99_s'\\]"):
        load_published(str(path))
