"""Scenarios: loading from YAML/JSON, one clear error per bad scenario, the `simulate` command and the
example scenarios."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simulator import Scenario, simulate

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "scenarios"


def _write(tmp_path, text, name="s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_round_trip_yaml_and_json(tmp_path):
    scenario = Scenario(name="x", cluster=dict(replicas=3), scheduler=dict(max_num_seqs=64))
    for suffix in (".yaml", ".json"):
        assert Scenario.load(scenario.save(tmp_path / f"s{suffix}")) == scenario


def test_settings_carry_the_engines_definitions():
    field = Scenario.model_fields["scheduler"].annotation.model_fields["max_num_seqs"]
    from engine.core.config import SchedulerConfig

    assert field.description == SchedulerConfig.model_fields["max_num_seqs"].description
    assert field.default == SchedulerConfig.model_fields["max_num_seqs"].default


@pytest.mark.parametrize(
    "text,message",
    [
        (
            "traffic:\n  arrivals: {kind: poisson, rate_per_s: -3}\n",
            "traffic.arrivals.poisson.rate_per_s",
        ),
        ("cluster:\n  replicas: 0\n", "cluster.replicas"),
        (
            "cluster:\n  autoscaler: {min_replicas: 5, max_replicas: 2}\n",
            "min_replicas=5 > max_replicas=2",
        ),
        ("colour: blue\n", "colour: Extra inputs are not permitted"),
        ("traffic: [1, 2\n", "not valid YAML"),
    ],
)
def test_bad_files_name_the_field(tmp_path, text, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        Scenario.load(_write(tmp_path, text))


@pytest.mark.parametrize(
    "changes,message",
    [
        (dict(hardware=dict(gpu="Z9000")), "Z9000"),
        (
            dict(model=dict(name="llama-2-70b"), hardware=dict(gpu="L4", tensor_parallel=1)),
            "does not fit L4",
        ),
        (dict(traffic=dict(too_long="error")), "longer than max_model_len=4096"),
        (
            dict(hardware=dict(calibration="llama-3-8b@A100-80GB-tp1")),
            "made for model 'llama-3-8b'",
        ),
    ],
)
def test_bad_scenarios_get_one_clear_error(changes, message):
    base = dict(traffic=dict(duration_s=30, too_long="clip"))
    for key, value in changes.items():
        base[key] = {**base.get(key, {}), **value}
    with pytest.raises(ValueError, match=message):
        simulate(Scenario.model_validate(base))


def test_simulate_command_prints_json_and_writes_files(tmp_path):
    scenario = Scenario(
        name="cli", traffic=dict(duration_s=30, too_long="clip"), cluster=dict(replicas=2)
    )
    path = scenario.save(tmp_path / "cli.yaml")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "surgeplan_cli", "simulate", str(path), "--json", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["scenario"]["name"] == "cli" and printed["summary"]["completed"] > 0
    assert (
        printed["run"]["cpu_s"] > 0 and "cpu_s" not in printed["summary"]
    )  # timings apart from results
    for name in ("requests.csv", "timeseries.csv", "timeseries.json", "timeline.html"):
        assert (out / name).stat().st_size > 0
    assert "plotly" in (out / "timeline.html").read_text()[:5000].lower()


def test_simulate_command_reports_a_bad_scenario_without_a_traceback(tmp_path):
    path = _write(tmp_path, "hardware: {gpu: Z9000}\n")
    done = subprocess.run(
        [sys.executable, "-m", "surgeplan_cli", "simulate", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Z9000" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_example_scenarios_load(name):
    scenario = Scenario.load(EXAMPLES / name)
    assert scenario.name == name.removesuffix(".yaml")
