"""Closed-loop clients (`traffic.max_concurrency`, benchmark_serving's `--max-concurrency`): at most
N requests in flight, the next sent when one ends and timed from its send; and the published set of
aiconfigurator's measured vLLM V1 closed-loop points that the replay opens."""

import json
from pathlib import Path

import pytest
from sim_helpers import cluster_config, cost_model, run_cluster
from typer.testing import CliRunner

from simulator.validation.closed_loop_fit import fit_bunched_turns
from simulator.validation.profile_fit import fit_profile, fitted_together
from simulator.validation.published_replay import (
    closed_loop_parts,
    mix_turns,
    replay_records,
    replay_run,
    source_profile,
)
from simulator.validation.published_report import closed_loop_note
from simulator.validation.published_sets import PUBLISHED_DIR, fits, load_published

NAME = "aic-silicon-vllm-v1-hopper"
PUBLISHED_PATH = PUBLISHED_DIR / f"{NAME}.json"


def test_one_in_flight_runs_the_requests_one_after_another():
    model = cost_model(step_s=0.01)
    n, prompt, output = 6, 32, 10
    config = cluster_config(model, max_concurrency=1)
    cluster, end = run_cluster(config, [0.0] * n, [prompt] * n, [output] * n)
    records = sorted(cluster.records, key=lambda record: record.index)
    assert all(record.status == "ok" for record in records)
    for before, after in zip(records, records[1:]):
        # sent when the one before it ended, and timed from that send
        assert after.arrival_s == pytest.approx(before.arrival_s + before.e2e_s)
    alone = run_cluster(cluster_config(model), [0.0], [prompt], [output])[0].records[0]
    assert all(record.ttft_s == pytest.approx(alone.ttft_s) for record in records)
    assert all(record.e2e_s == pytest.approx(alone.e2e_s) for record in records)
    assert end == pytest.approx(n * alone.e2e_s)


def test_a_cap_above_the_requests_in_flight_changes_nothing():
    model = cost_model(0.01, 1e-5, 1e-7)
    arrivals = [0.05 * i for i in range(40)]
    prompts = [20 + 7 * i for i in range(40)]
    outputs = [5 + 3 * i for i in range(40)]
    open_loop = run_cluster(cluster_config(model), arrivals, prompts, outputs)[0]
    capped = run_cluster(cluster_config(model, max_concurrency=1000), arrivals, prompts, outputs)[0]
    assert [(r.arrival_s, r.ttft_s, r.e2e_s) for r in capped.records] == [
        (r.arrival_s, r.ttft_s, r.e2e_s) for r in open_loop.records
    ]


def test_the_cap_bounds_the_requests_in_flight():
    model = cost_model(0.01, 1e-5, 1e-7)
    n, cap = 30, 4
    cluster = run_cluster(
        cluster_config(model, max_concurrency=cap), [0.0] * n, [64] * n, [20] * n
    )[0]
    spans = [(r.arrival_s, r.arrival_s + r.e2e_s) for r in cluster.records]
    for start, _end in spans:  # at each send, at most `cap` requests are in flight
        assert sum(s <= start < e for s, e in spans) <= cap


def test_the_cli_refuses_a_cap_below_one_naming_the_accepted_values():
    from surgeplan_cli import app

    result = CliRunner().invoke(
        app,
        [
            "simulate",
            "examples/scenarios/azure-conv-llama-2-7b-a100.yaml",
            "--max-concurrency",
            "0",
        ],
    )
    assert result.exit_code == 2
    assert "max-concurrency" in result.output and "1" in result.output


def test_the_scenario_refuses_a_cap_below_one():
    from simulator.scenario import Scenario

    with pytest.raises(ValueError, match="max_concurrency"):
        Scenario.model_validate({"traffic": {"max_concurrency": 0}})


def test_the_silicon_set_loads_as_closed_loop_runs_split_by_rule():
    data = load_published(NAME)
    # its fit runs fit the loop's bunched turns and, of the profile, only the eager prompt steps'
    # launches (since 2026-12-08) and the fp8 linear layers per GPU (below the knee and beyond it):
    # the host terms refit with them needed a per-sequence cost that makes small models host-bound
    # at large batches (see the set), so they are never fitted on it
    assert data["engine_profile"] == "vllm-v1"
    assert data["fits"] == ["bunched_turns", "profile"]
    assert data["fit_terms"] == ["eager_layer", "fp8_linear", "fp8_large_batch"]
    assert not data.get("held_out_only") and data["bunched_turns_label"] == "fitted"
    runs = data["runs"]
    assert len(runs) == 60 and {run["gpu"] for run in runs} == {"H100-80GB", "H200-141GB"}
    for run in runs:
        assert run["weight_dtype"] == "fp8" and run["staggered_warmup"]
        # InferenceMAX's benchmark_serving: 10 N requests, each its own lengths in [0.8, 1] x
        # the run's ISL / OSL (drawn from the client's seed), all measured
        assert run["num_requests"] == 10 * run["max_concurrency"]
        assert len(run["prompt_tokens"]) == run["num_requests"]
        isl, osl = run["nominal_lengths"]
        assert all(int(0.8 * isl) <= n <= isl for n in run["prompt_tokens"])
        assert all(int(0.8 * osl) <= n <= osl for n in run["output_tokens"])
        assert run["engine_settings"]["max_num_seqs"] == run["max_concurrency"]
        assert set(run["measured"]) == {"ttft_mean_s", "tpot_mean_s"}
        assert "silicon_sample.csv @ 095f58a" in run["source"] and ", line " in run["source"]

    # the split by rule: sorted by model, GPU, TP, ISL, OSL and concurrency, every second held out
    def order(run):
        return (
            run["model"],
            run["gpu"],
            run["tensor_parallel"],
            *run["nominal_lengths"],
            run["max_concurrency"],
        )

    ranked = sorted(runs, key=order)
    assert [run["split"] for run in ranked] == ["fit", "held_out"] * 30


def test_a_closed_loop_run_is_measured_after_its_warm_up_and_timed_from_each_send():
    data = load_published(NAME)
    run = next(r for r in data["runs"] if r["id"] == "h100-llama-3-70b-tp4-1024x1024-c4")
    records, _start = replay_records(data, run)
    # all 10 N requests measured, each with the lengths the client drew for it
    assert len(records) == 40
    assert [r.output_tokens for r in records] == run["output_tokens"]
    assert [r.prompt_tokens for r in records] == run["prompt_tokens"]
    # each measured request waited for a slot: none was sent at t=0 (the warm-up went first)
    assert min(r.arrival_s for r in records) > 0
    result = replay_run(data, run)
    assert 0 < result["ttft_mean_s"] < 1.0 and 0.005 < result["tpot_mean_s"] < 0.05


def test_a_cap_above_the_requests_is_refused(tmp_path):
    data = json.loads(json.dumps(load_published(NAME)))
    data["runs"][0]["max_concurrency"] = 10_000
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="max_concurrency"):
        load_published(path)


def test_a_scenario_cap_holds_where_a_stale_router_would_run_replicas_in_parallel():
    from simulator import Scenario, simulate

    scenario = Scenario.model_validate(
        {
            "traffic": {
                "arrivals": {"kind": "poisson", "rate_per_s": 40.0},
                "duration_s": 3,
                "too_long": "clip",
                "max_concurrency": 3,
            },
            "cluster": {"replicas": 2, "router": {"staleness_s": 0.5}},
        }
    )
    records = [r for r in simulate(scenario).records if r.status == "ok"]
    assert len(records) > 20
    spans = [(r.arrival_s, r.arrival_s + r.e2e_s) for r in records]
    assert max(sum(s <= start < e for s, e in spans) for start, _end in spans) == 3


def test_a_burst_start_weighs_the_bunched_turns_sent_at_once_into_an_idle_engine():
    """benchmark_serving's closed loop (InferenceMAX: 10 N requests, N in flight) sends its first N
    requests together (`burst_start_turns` T = 10): the means are that turn's replay, weighed B/T (B
    the set's `bunched_turns`, 1 by default), and the staggered steady state's, weighed (T - B)/T."""
    data = load_published(NAME)
    turns = data["burst_start_turns"]
    assert turns == 10 and "--num-prompts" in data["burst_start_turns_source"]
    run = next(r for r in data["runs"] if r["id"] == "h100-llama-3-70b-tp4-1024x1024-c16")
    steady = replay_run(data | {"burst_start_turns": None}, run)
    # the first turn alone: the run's first 16 requests sent together into an idle engine
    burst_run = run | {
        "staggered_warmup": False,
        "num_requests": 16,
        "prompt_tokens": run["prompt_tokens"][:16],
        "output_tokens": run["output_tokens"][:16],
    }
    burst_records, _start = replay_records(data, burst_run)
    assert all(r.arrival_s == 0 for r in burst_records)
    burst_ttft = sum(r.ttft_s for r in burst_records) / 16
    # 16 prompts of 819-1,024 tokens need two 8,192-token steps: the burst's first tokens come later
    assert sum(burst_run["prompt_tokens"]) > 8192
    assert burst_ttft > 2 * steady["ttft_mean_s"]
    first_only = {k: v for k, v in data.items() if k != "bunched_turns"}  # the default, B = 1
    mixed = replay_run(first_only, run)
    assert mixed["ttft_mean_s"] == pytest.approx(
        (burst_ttft + (turns - 1) * steady["ttft_mean_s"]) / turns
    )
    assert mixed["ttft_mean_s"] > steady["ttft_mean_s"]
    bunched = data["bunched_turns"]
    assert 1 <= bunched < turns  # fitted: at least the first turn, far from all of them
    assert replay_run(data, run)["ttft_mean_s"] == pytest.approx(
        (bunched * burst_ttft + (turns - bunched) * steady["ttft_mean_s"]) / turns
    )
    assert replay_run(first_only | {"burst_start_turns": 1}, run)["ttft_mean_s"] == pytest.approx(
        burst_ttft
    )


@pytest.mark.parametrize("turns", [0, 2.5, "20"])
def test_a_burst_start_needs_a_whole_number_of_turns(tmp_path, turns):
    data = json.loads(json.dumps(load_published(NAME)))
    data["burst_start_turns"] = turns
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="burst_start_turns"):
        load_published(path)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"bunched_turns": 0.5}, "bunched_turns"),
        ({"bunched_turns": 21}, "bunched_turns"),
        ({"bunched_turns": "2"}, "bunched_turns"),
        ({"bunched_turns": True}, "bunched_turns"),
        ({"burst_start_turns": None}, "bunched_turns"),
        ({"fits": ["client"]}, "fits is"),
        ({"fits": []}, "fits is"),
        ({"fits": "profile"}, "fits is"),
        ({"fits": ["profile", "profile"]}, "fits is"),
        ({"fits": [{"profile": 1}]}, "fits is"),
        ({"held_out_only": True}, "fits names bunched_turns"),
    ],
)
def test_bad_bunched_turns_or_fits_are_refused_naming_the_accepted_values(tmp_path, change, match):
    data = json.loads(json.dumps(load_published(NAME))) | change
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=match):
        load_published(path)


def _small_set(tmp_path, bunched_turns: float) -> tuple[Path, dict]:
    """Two of the set's short runs, each measured as the simulator's own mix at `bunched_turns`
    (written as the stored files are: a closed loop's lengths as one number)."""
    data = load_published(NAME)
    profile = source_profile(data)
    raw = json.loads(PUBLISHED_PATH.read_text())
    ids = ["h100-llama-3-70b-tp4-1024x1024-c4", "h100-llama-3-70b-tp4-1024x1024-c8"]
    runs = []
    for run_id in ids:
        loaded = next(r for r in data["runs"] if r["id"] == run_id)
        burst, steady = closed_loop_parts(data, loaded, profile)
        planted = mix_turns(burst, steady, bunched_turns / data["burst_start_turns"])
        stored = next(r for r in raw["runs"] if r["id"] == run_id)
        runs.append(
            stored
            | {"split": "fit", "measured": {k: planted[k] for k in ("ttft_mean_s", "tpot_mean_s")}}
        )
    small = {k: v for k, v in raw.items() if k != "bunched_turns"} | {"runs": runs}
    path = tmp_path / "small.json"
    path.write_text(json.dumps(small, indent=1) + "\n")
    return path, small


@pytest.mark.parametrize("planted", [1.0, 3.0, 6.5])
def test_the_bunched_turns_fit_finds_the_turns_the_measurements_were_made_with(tmp_path, planted):
    path, small = _small_set(tmp_path, planted)
    best, fitted = fit_bunched_turns(path)
    assert best == pytest.approx(planted)
    written = json.loads(path.read_text())
    assert written["bunched_turns"] == pytest.approx(planted)
    assert (
        written["bunched_turns_label"] == "fitted"
        and "2 fit runs" in written["bunched_turns_source"]
    )
    # the file as it was written, B added: lengths stay one number per run, nothing else moved
    assert written["runs"] == small["runs"] and isinstance(written["runs"][0]["prompt_tokens"], int)
    assert load_published(path)["bunched_turns"] == pytest.approx(planted)


def test_what_a_set_fits_is_what_its_fit_runs_fit(tmp_path):
    """The silicon set is vllm-v1's one fit set (llm-k8s' held-out check never is); a set whose fits
    name only its bunched turns is refused by the profile fit; the loop fit refuses a set naming no
    bunched turns or without fit runs; a set naming nothing fits the profile alone."""
    v1_sets = [each["name"] for each in fitted_together(load_published(NAME))]
    assert v1_sets == [NAME]
    path, _small = _small_set(tmp_path, 2.0)
    # a set that names nothing fits the profile alone, as every set did before `fits`
    assert fits(load_published("lambdalabs-vllm")) == ["profile"]
    loop_only = json.loads(path.read_text()) | {"fits": ["bunched_turns"]}
    path.write_text(json.dumps(loop_only))
    with pytest.raises(ValueError, match="never fit the profile"):
        fit_profile(path, write=False)
    with pytest.raises(ValueError, match="fits name 'bunched_turns'"):
        fit_bunched_turns("argonne-vllm", write=False)
    loop_only["runs"] = [run | {"split": "held_out"} for run in loop_only["runs"]]
    path.write_text(json.dumps(loop_only))
    with pytest.raises(ValueError, match="no fit runs"):
        fit_bunched_turns(path, write=False)


def test_the_report_says_how_a_closed_loop_is_replayed():
    data = load_published(NAME)
    note = closed_loop_note(data)
    bunched = data["bunched_turns"]  # fitted on the set's fit half
    assert note.startswith(f"closed loop from a synchronised start: {bunched:g} of its 10 turns")
    assert "(fitted)" in note
    first_only = {k: v for k, v in data.items() if not k.startswith("bunched_turns")}
    assert "1 of its 10 turns replayed bunched (the first turn alone" in closed_loop_note(
        first_only
    )
    assert closed_loop_note(load_published("argonne-vllm")) is None
