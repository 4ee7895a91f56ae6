"""`surgeplan traces info | synth | convert | fit`, driven through typer's test runner."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from traces import load_trace
from traces.cli import app

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def vidur_file(tmp_path):
    rng = np.random.default_rng(91)
    times = np.sort(rng.uniform(0, 600, 1500))
    lines = ["arrived_at,num_prefill_tokens,num_decode_tokens"] + [
        f"{float(t)!r},{p},{d}"
        for t, p, d in zip(times, rng.integers(1, 5000, 1500), rng.integers(1, 900, 1500))
    ]
    path = tmp_path / "vidur.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_info_json_is_one_object_with_the_statistics(vidur_file):
    result = run("info", vidur_file, "--json", "--window-s", "30")
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    trace = load_trace(vidur_file)
    assert stats["requests"] == 1500 and stats["window_s"] == 30.0
    assert stats["prompt_tokens"]["p99"] == pytest.approx(np.percentile(trace.prompt_tokens, 99))
    assert sum(stats["rate_per_window"]) * 30 == pytest.approx(1500)


def test_info_table_and_html_plot(vidur_file, tmp_path):
    result = run("info", vidur_file, "--plot", tmp_path / "rate.html")
    assert result.exit_code == 0, result.output
    assert "inter-arrival CV" in result.stdout and "1,500" in result.stdout
    html = (tmp_path / "rate.html").read_text()
    assert "plotly" in html.lower() and "requests" in html and "vidur" in html


def test_png_plot_is_written_with_matplotlib(vidur_file, tmp_path):
    result = run("info", vidur_file, "--plot", tmp_path / "rate.png")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "rate.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# a gamma-arrival spike (10x for 60 s after a 30 s ramp), fixed prompts, a fixed seed
SPIKE_ARGS = (
    "--arrivals",
    "gamma",
    "--rate",
    "20",
    "--cv",
    "2",
    "--duration-s",
    "600",
    "--spike-multiplier",
    "10",
    "--spike-start-s",
    "200",
    "--ramp-up-s",
    "30",
    "--hold-s",
    "60",
    "--ramp-down-s",
    "30",
    "--prompt",
    "fixed:64",
    "--output",
    "uniform:1:8",
    "--seed",
    "4",
)


def test_synth_writes_a_canonical_spike_trace(tmp_path):
    out = tmp_path / "spike.jsonl"
    result = run("synth", out, *SPIKE_ARGS)
    assert result.exit_code == 0, result.output
    trace = load_trace(out)
    assert set(trace.prompt_tokens.tolist()) == {64} and trace.output_tokens.max() <= 8
    hold = ((trace.arrival_s >= 230) & (trace.arrival_s < 290)).sum() / 60
    assert hold == pytest.approx(200.0, rel=0.1)
    again = tmp_path / "again.jsonl"
    run("synth", again, *SPIKE_ARGS)
    assert out.read_bytes() == again.read_bytes()


def test_synth_from_a_spec_file(tmp_path):
    spec = {
        "arrivals": {"kind": "poisson", "rate_per_s": 5.0},
        "duration_s": 100.0,
        "seed": 1,
        "prompt": {"kind": "preset", "name": "azure-code-prompt"},
        "name": "from-spec",
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    result = run("synth", tmp_path / "s.csv", "--spec", tmp_path / "spec.json")
    assert result.exit_code == 0, result.output
    assert load_trace(tmp_path / "s.csv").name == "from-spec"


def test_convert_and_errors(vidur_file, tmp_path):
    result = run("convert", vidur_file, tmp_path / "v.jsonl")
    assert result.exit_code == 0, result.output
    converted = load_trace(tmp_path / "v.jsonl")
    assert np.array_equal(converted.prompt_tokens, load_trace(vidur_file).prompt_tokens)
    broken = tmp_path / "broken.csv"
    broken.write_text(vidur_file.read_text().replace("\n", "\n-5,1,1\n", 1))
    result = run("convert", broken, tmp_path / "b.jsonl")
    assert result.exit_code == 1 and "broken.csv:2: arrived_at is '-5'" in result.output
    result = run("convert", broken, tmp_path / "b.jsonl", "--skip-bad-rows")
    assert result.exit_code == 0 and "1 bad rows skipped" in result.output
    assert len(load_trace(tmp_path / "b.jsonl")) == 1500
    assert run("synth", tmp_path / "x.jsonl", "--prompt", "gaussian:1:2").exit_code == 1


def test_fit_prints_quantiles(vidur_file):
    result = run("fit", vidur_file)
    assert result.exit_code == 0, result.output
    fits = json.loads(result.stdout)
    prompt = load_trace(vidur_file).prompt_tokens
    assert fits["prompt"]["empirical"]["quantiles"][-1] == prompt.max()
