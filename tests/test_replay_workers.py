"""Published runs replayed on worker processes (`simulator.validation.replay_workers`): the same rows
as in this process, in the runs' order, with the profile the caller resolved (never a file a worker
reads again), and only inside a `replay_workers` block."""

import json
import random

import pytest
from typer.testing import CliRunner

from simulator.calibration.engine_profile import load_profile
from simulator.validation import replay_workers as workers_module
from simulator.validation.published_report import replay
from simulator.validation.published_sets import load_published
from simulator.validation.replay_workers import replay_workers
from surgeplan_cli import app


def _some_runs(name: str, count: int) -> dict:
    """`count` runs of the set drawn afresh each time, in a shuffled order."""
    data = load_published(name)
    data["runs"] = random.Random().sample(data["runs"], count)
    return data


def test_workers_give_the_rows_of_this_process_in_the_runs_order():
    data = _some_runs("aic-silicon-trtllm-70b", 4)
    here = replay(data)
    with replay_workers(2) as count:
        assert count == 2 and workers_module._pool is not None
        there = replay(data)
    assert workers_module._pool is None  # the processes end with the block
    assert there == here
    assert [row.run for row in there] == [row.run for row in here]
    assert list(dict.fromkeys(row.run for row in there)) == [run["id"] for run in data["runs"]]


def test_workers_replay_the_profile_they_are_sent_not_the_file():
    data = _some_runs("aic-silicon-trtllm-70b", 3)
    shipped = load_profile("trtllm")
    # a longer stay in the API server than the shipped 12.6 ms: every first token moves
    longer = shipped.with_terms(
        {"request": random.Random().uniform(0.05, 0.1)}, "derived", "a test's what-if"
    )
    here = replay(data, longer)
    with replay_workers(2):
        there = replay(data, longer)
    assert there == here
    plain = replay(data, shipped)
    first = [(a, b) for a, b in zip(here, plain, strict=True) if a.metric == "ttft_mean_s"]
    assert len(first) == 3 and all(a.simulated > b.simulated + 0.03 for a, b in first)


def test_one_worker_is_this_process_and_blocks_do_not_nest():
    with replay_workers(1) as count:
        assert count == 1 and workers_module._pool is None
    with pytest.raises(ValueError, match="replay workers is 0; expected 1 or more"):
        with replay_workers(0):
            pass
    with replay_workers(2):
        with pytest.raises(RuntimeError, match="do not nest"):
            with replay_workers(2):
                pass
    assert workers_module._pool is None


def test_validate_published_prints_the_same_json_on_any_number_of_workers():
    runner = CliRunner()
    outputs = []
    for count in ("1", "2"):
        result = runner.invoke(
            app, ["validate", "--published", "lambdalabs-vllm", "--json", "--workers", count]
        )
        assert result.exit_code == 0, result.output
        outputs.append(json.loads(result.output))
    assert outputs[0] == outputs[1]
    assert outputs[0][0]["rows"]  # (the set replayed)


def test_the_benchmark_times_each_count_and_checks_the_rows():
    from benchmarks.replay_workers import WARM_UP, time_sets

    table = time_sets(["trtllm-perf-a100"], [1, 2], repeats=1)
    assert [line["set"] for line in table] == [
        f"{WARM_UP} (starts the workers)",
        "trtllm-perf-a100",
    ]
    assert table[1]["runs"] == len(load_published("trtllm-perf-a100")["runs"])
    for line in table:
        assert line["same rows"] is True and line["x1"] == 1.0
        assert line["1 worker(s), s"] > 0 and line["2 worker(s), s"] > 0


def test_workers_start_whatever_main_module_the_host_left(tmp_path, monkeypatch):
    """Streamlit's AppTest (the dashboard tests) leaves a temporary script as `__main__`; a
    spawned or forkserver worker would run it again and die (the first CI run of this module did)."""
    import sys
    import types

    script = tmp_path / "leftover_main.py"
    script.write_text("script(*__args, **__kwargs)\n")  # what AppTest's wrapper holds
    leftover = types.ModuleType("__main__")
    leftover.__file__ = str(script)
    leftover.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", leftover)
    data = _some_runs("trtllm-perf-a100", 2)
    here = replay(data)
    with replay_workers(2):
        assert replay(data) == here
