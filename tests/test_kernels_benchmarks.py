"""The GPU benchmark scripts run end to end on the CPU in their --smoke mode (tiny shapes, interpreted kernels)."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run_smoke(script: str, json_path: Path, **env) -> dict:
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / script), "--smoke", "--json", str(json_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )
    assert result.returncode == 0, f"{script} --smoke failed:\n{result.stderr[-3000:]}"
    assert "| batch |" in result.stdout, f"{script} printed no table:\n{result.stdout[-2000:]}"
    return json.loads(json_path.read_text())


def test_kernel_benchmark_smoke_checks_the_kernels_against_sdpa(tmp_path):
    report = _run_smoke("kernels.py", tmp_path / "kernels.json")
    assert report["decode"] and report["prefill"]
    for row in report["decode"] + report["prefill"]:
        assert row["rel_err_vs_sdpa"] < 1e-5, row
    assert report["meta"]["copy_GBps"] > 0


def test_engine_benchmark_smoke_covers_decode_prefill_and_the_public_api(tmp_path):
    report = _run_smoke("engine_gpu.py", tmp_path / "engine.json", SURGEPLAN_KERNELS="reference")
    cells = {(row["batch"], row["context"]) for row in report["decode"]}
    assert cells == {(1, 40), (1, 100), (4, 40), (4, 100)}
    assert all(row["step_ms"] > 0 and row["roofline_ms"] > 0 for row in report["decode"])
    assert [row["prompt"] for row in report["prefill"]] == [32, 64]
    assert report["api"][0]["api_step_ms"] > 0


def test_gpu_lease_script_runs_every_stage_at_toy_sizes(tmp_path):
    """benchmarks/gpu_lease.sh (one lent GPU's whole check) in its SMOKE mode: every stage ends with
    rc=0 and leaves its JSON, the validation runs on the profile the stage before it measured."""
    import pytest

    shared = REPO.parent / "shared" / "traces"
    if not (shared / "AzureLLMInferenceTrace_conv.csv").is_file():
        pytest.skip("../shared/traces is not beside the checkout")
    traces = tmp_path / "traces"
    traces.mkdir()
    for name in ("AzureLLMInferenceTrace_conv", "AzureLLMInferenceTrace_code"):
        lines = (shared / f"{name}.csv").read_text().splitlines(keepends=True)[:400]
        (traces / f"{name}.csv").write_text("".join(lines))
    out = tmp_path / "out"
    result = subprocess.run(
        ["bash", str(REPO / "benchmarks" / "gpu_lease.sh")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={
            **os.environ,
            "SMOKE": "1",
            "OUT": str(out),
            "TRACES": str(traces),
            "PY": sys.executable,
        },
    )
    assert result.returncode == 0, result.stderr[-2000:]
    stages = (out / "stages.txt").read_text().splitlines()
    assert [line.split()[0] for line in stages] == [
        "kernels",
        "engine_gpu",
        "engine_gpu_host",
        "profile",
        "validate_AzureLLMInferenceTrace_conv",
        "validate_AzureLLMInferenceTrace_code",
    ]
    assert all(" rc=0 " in line for line in stages), stages
    host = json.loads((out / "engine_gpu_host.json").read_text())["decode"]
    assert [row["batch"] for row in host] == [1, 4] and all(row["wall_ms"] > 0 for row in host)
    assert all(row["kernel_ms"] is None for row in host)
    # no graphs on a CPU: the graphs' padded buffers run eagerly and give the eager logits
    assert all(row["graph"] == "buffers, eager (none captured)" for row in host)
    assert all(row["graph_rel_err"] < 1e-5 for row in host), host
    for trace in ("conv", "code"):
        run = json.loads((out / f"validate_AzureLLMInferenceTrace_{trace}.json").read_text())
        assert run["trace"]["name"] == f"AzureLLMInferenceTrace_{trace}"
        assert set(run["calibration"]) == {"workload", "given"}  # the profile stage's, as given
        assert run["levels"][0]["used_calibration"] == "given"
    # benchmarks/validate_resimulate.py refits the profile's points and simulates the run again: with
    # the cost model unchanged since the run, it reproduces every error the run recorded
    from benchmarks.validate_resimulate import resimulate
    from simulator.calibration.cost_fit import fit_calibration
    from simulator.calibration.schema import Calibration

    refit = fit_calibration(Calibration.load(out / "profile.json"))
    trace = traces / "AzureLLMInferenceTrace_conv.csv"
    run = json.loads((out / "validate_AzureLLMInferenceTrace_conv.json").read_text())
    rows = resimulate(run, refit, trace)
    assert [row["load"] for row in rows] == [0.5]
    for row in rows:
        errors = [row[key][1:] for key in row if key != "load"]  # (error as run, error now)
        assert len(errors) == 7 and all(abs(before - now) < 1e-9 for before, now in errors), row
    with pytest.raises(ValueError, match="the run had"):
        resimulate(run, refit, trace, max_prompt_tokens=100)
    # the same from the workload calibration's step log, against the errors recorded under it
    from simulator.calibration.from_steps import calibration_from_steps

    workload = calibration_from_steps(out / "steps_AzureLLMInferenceTrace_conv.json")
    for row in resimulate(run, workload, trace, recorded="workload"):
        errors = [row[key][1:] for key in row if key != "load"]
        assert all(abs(before - now) < 1e-9 for before, now in errors), row
