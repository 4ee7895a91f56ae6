"""The HTTP replay client against the live server: counts and token totals match the trace, arrival
times and the concurrency cap are honoured, and the per-request files are written."""

import asyncio
import csv
import json

import numpy as np
import pytest
from live_server import tiny_server
from typer.testing import CliRunner

from traces import Trace
from traces.replay import ReplayConfig, replay
from traces.replay_cli import app
from traces.replay_summary import parse_goodput, summarise


@pytest.fixture(scope="module")
def server():
    with tiny_server(engine_overrides={"max_num_seqs": 6, "num_kv_blocks": 96}) as live:
        yield live


def synthetic_trace(seed: int, n: int, failed: int = 0) -> Trace:
    rng = np.random.default_rng(seed)
    outputs = rng.integers(2, 16, n)
    outputs[:failed] = 0  # requests that failed in production: nothing to ask for
    return Trace(
        np.sort(rng.uniform(0, 2.0, n)),
        rng.integers(4, 60, n),
        outputs,
        tenant=rng.choice(["a", "b"], n),
        failed=outputs == 0,
        name=f"synthetic-{seed}",
    )


def test_cli_summary_counts_and_tokens_match_the_trace(server, tmp_path):
    trace = synthetic_trace(7, 14)
    path = trace.save(tmp_path / "trace.jsonl")
    out_json, out_csv = tmp_path / "requests.json", tmp_path / "requests.csv"
    result = CliRunner().invoke(
        app,
        [
            "--url",
            server.url,
            "--trace",
            str(path),
            "--time-scale",
            "0.25",
            "--goodput",
            "ttft:60000",
            "--goodput",
            "tpot:60000",
            "--output-json",
            str(out_json),
            "--output-csv",
            str(out_csv),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = {
        line.split(":")[0].strip(): line.rsplit(None, 1)[-1]
        for line in result.output.splitlines()
        if ":" in line
    }
    assert lines["Successful requests"] == "14" and lines["Failed requests"] == "0"
    assert int(lines["Total input tokens"]) == int(trace.prompt_tokens.sum())
    assert int(lines["Total generated tokens"]) == int(trace.output_tokens.sum())
    assert float(lines["Request goodput (req/s)"]) == pytest.approx(
        float(lines["Request throughput (req/s)"]), abs=0.01
    )
    saved = json.loads(out_json.read_text())
    assert saved["summary"]["completed"] == 14
    assert [r["output_tokens"] for r in saved["requests"]] == trace.output_tokens.tolist()
    assert all(r["status"] == "ok" and r["ttft_s"] > 0 for r in saved["requests"])
    rows = list(csv.DictReader(out_csv.open()))
    assert [int(r["prompt_tokens"]) for r in rows] == trace.prompt_tokens.tolist()


def test_replay_honours_arrivals_concurrency_limit_and_skips(server):
    trace = synthetic_trace(8, 12, failed=2)
    config = ReplayConfig(url=server.url, time_scale=0.5, max_concurrency=2, limit=10)
    result = asyncio.run(replay(trace, config))
    assert result.skipped == 2 and len(result.records) == 8
    first = trace.arrival_s[2]
    for record in result.records:
        assert record.ok, record.error
        assert record.output_tokens == trace.output_tokens[record.index]
        assert record.sent_s >= (trace.arrival_s[record.index] - first) * 0.5 - 1e-3
        assert len(record.itl_s) <= record.output_tokens - 1
    spans = [(r.sent_s, r.sent_s + r.e2e_s) for r in result.records]
    for start, _ in spans:
        assert sum(s <= start < e for s, e in spans) <= 2


def test_goodput_counts_only_requests_inside_the_slo(server):
    result = asyncio.run(replay(synthetic_trace(9, 6), ReplayConfig(url=server.url, time_scale=0)))
    assert summarise(result, {"ttft": 1e-6}).goodput == 0
    loose = summarise(result, {"ttft": 1e6, "e2el": 1e6})
    assert loose.goodput == pytest.approx(loose.request_throughput)
    assert loose.total_output_tokens == int(synthetic_trace(9, 6).output_tokens.sum())


def test_rejected_requests_are_counted_as_failed(tmp_path):
    trace = synthetic_trace(10, 16)
    with tiny_server(engine_overrides={"max_num_seqs": 1}, max_waiting_requests=1) as live:
        result = asyncio.run(replay(trace, ReplayConfig(url=live.url, time_scale=0)))
    summary = summarise(result)
    assert summary.rejected > 0 and summary.failed == summary.rejected
    assert summary.completed + summary.failed == 16
    ok = [r for r in result.records if r.ok]
    assert summary.total_output_tokens == sum(int(trace.output_tokens[r.index]) for r in ok)


@pytest.mark.parametrize("bad", ["ttft", "ttft:abc", "speed:10", "tpot:-1"])
def test_bad_goodput_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="goodput SLO"):
        parse_goodput([bad])


def test_unreachable_server_is_a_clean_error(tmp_path):
    path = synthetic_trace(11, 3).save(tmp_path / "t.jsonl")
    result = CliRunner().invoke(
        app, ["--url", "http://127.0.0.1:9", "--trace", str(path), "--no-progress"]
    )
    assert result.exit_code == 2 and "error:" in result.output
