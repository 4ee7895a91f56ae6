"""Each loader on small files written here in the documented format, bad rows included."""

import json
from datetime import datetime, timedelta

import numpy as np
import pytest

from traces import TraceFormatError, detect_format, load_trace


def azure_rows(seed: int, n: int, zone: str = "") -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    offsets_100ns = np.sort(rng.integers(0, 36_000_000_000, n))  # one hour in 100 ns ticks
    start = datetime(2023, 11, 16, 18, 17, 3)
    rows = []
    for ticks, prompt, output in zip(
        offsets_100ns, rng.integers(1, 8000, n), rng.integers(0, 900, n)
    ):
        stamp = start + timedelta(microseconds=int(ticks) // 10)
        fraction = f"{stamp.microsecond:06d}{int(ticks) % 10}"  # 7 digits, like the real files
        rows.append(f"{stamp:%Y-%m-%d %H:%M:%S}.{fraction}{zone},{prompt},{output}")
    return rows, offsets_100ns


def write(path, lines, final_newline=True):
    path.write_text("\n".join(lines) + ("\n" if final_newline else ""))
    return path


def test_azure_2023_exact_times_without_final_newline(tmp_path):
    rows, ticks = azure_rows(seed=11, n=200)
    path = write(tmp_path / "azure.csv", ["TIMESTAMP,ContextTokens,GeneratedTokens"] + rows, False)
    trace = load_trace(path)
    assert detect_format(path) == "azure"
    assert len(trace) == 200
    assert np.allclose(trace.arrival_s, (ticks - ticks[0]) / 1e7, atol=1e-9, rtol=0)
    assert trace.prompt_tokens.tolist() == [int(r.split(",")[1]) for r in rows]
    assert trace.source_line.tolist() == list(range(2, 202))
    assert trace.load_report.rows_read == 200


def test_azure_2024_zone_and_other_fraction_widths(tmp_path):
    lines = [
        "TIMESTAMP,ContextTokens,GeneratedTokens",
        "2024-05-10 00:00:00+00:00,10,1",
        "2024-05-10 01:00:00.5-01:00,20,2",
        "2024-05-10 00:00:01.25Z,30,3",
        "2024-05-10T00:00:02,40,4",
    ]
    trace = load_trace(write(tmp_path / "a24.csv", lines), format="azure2024")
    # 01:00:00.5 at UTC-1 is 02:00:00.5 UTC: it sorts last.
    assert trace.arrival_s.tolist() == [0.0, 1.25, 2.0, 7200.5]
    assert trace.prompt_tokens.tolist() == [10, 30, 40, 20]
    assert trace.source_line.tolist() == [2, 4, 5, 3]


@pytest.mark.parametrize(
    "row, field",
    [
        ("2023-11-16 18:17:04.1,-3,10", "ContextTokens"),
        ("2023-11-16 18:17:04.1,12,-3", "GeneratedTokens"),
        ("2023-11-16 18:17:04.1,12,abc", "GeneratedTokens"),
        ("2023-11-16 25:17:04.1,12,3", "TIMESTAMP"),
        ("yesterday,12,3", "TIMESTAMP"),
        ("2023-11-16 18:17:04.1,12", "fields"),
    ],
)
def test_azure_bad_row_names_file_line_and_field(tmp_path, row, field):
    rows, _ = azure_rows(seed=12, n=5)
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"] + rows[:3] + [row] + rows[3:]
    path = write(tmp_path / "bad.csv", lines)
    with pytest.raises(TraceFormatError) as error:
        load_trace(path)
    assert f"{path}:5:" in str(error.value) and field in str(error.value)
    trace = load_trace(path, skip_bad_rows=True)
    assert len(trace) == 5
    assert trace.load_report.rows_skipped == 1 and trace.load_report.rows_read == 6
    assert trace.load_report.first_errors[0].startswith(f"{path}:5:")


def test_skip_reports_only_the_first_few_errors(tmp_path):
    lines = (
        ["arrived_at,num_prefill_tokens,num_decode_tokens"]
        + [f"{i},x,1" for i in range(9)]
        + ["9,5,5"]
    )
    trace = load_trace(write(tmp_path / "v.csv", lines), skip_bad_rows=True)
    assert len(trace) == 1 and trace.load_report.rows_skipped == 9
    assert len(trace.load_report.first_errors) == 5
    assert "9 bad rows skipped" in trace.load_report.summary()


def burstgpt_lines(seed: int, n: int) -> list[str]:
    rng = np.random.default_rng(seed)
    lines = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    for t, model, req, resp in zip(
        np.sort(rng.uniform(0, 1000, n)),
        rng.choice(["ChatGPT", "GPT-4"], n),
        rng.integers(1, 3000, n),
        rng.integers(0, 5, n) * rng.integers(0, 400, n),
    ):
        lines.append(f"{t:.3f},{model},{req},{resp},{req + resp},Conversation log")
    return lines


def test_burstgpt_flags_failed_and_filters_model(tmp_path):
    lines = burstgpt_lines(seed=13, n=300)
    path = write(tmp_path / "burst.csv", lines)
    rows = [line.split(",") for line in lines[1:]]
    failed = sum(r[3] == "0" for r in rows)
    trace = load_trace(path)
    assert detect_format(path) == "burstgpt"
    assert len(trace) == 300 and trace.failed.sum() == failed > 0
    assert np.all(trace.output_tokens[trace.failed] == 0)
    assert trace.load_report.failed_requests == failed
    gpt4 = load_trace(path, model="GPT-4", drop_failed=True)
    assert len(gpt4) == sum(r[1] == "GPT-4" and r[3] != "0" for r in rows)
    assert not gpt4.failed.any() and gpt4.load_report.rows_filtered == 300 - len(gpt4)
    assert np.allclose(trace.arrival_s, sorted(float(r[0]) for r in rows))
    with pytest.raises(ValueError, match="BurstGPT"):
        load_trace(
            write(tmp_path / "v.csv", ["arrived_at,num_prefill_tokens,num_decode_tokens", "0,1,1"]),
            model="GPT-4",
        )


def test_mooncake_hash_ids_and_milliseconds(tmp_path):
    rng = np.random.default_rng(14)
    records = []
    for t in np.sort(rng.integers(0, 600_000, 100)):
        prompt = int(rng.integers(1, 9000))
        blocks = -(-prompt // 512)
        records.append(
            {
                "timestamp": int(t),
                "input_length": prompt,
                "output_length": int(rng.integers(1, 900)),
                "hash_ids": [0] + rng.integers(1, 50, blocks - 1).tolist(),
            }
        )
    path = write(tmp_path / "mooncake_trace.jsonl", [json.dumps(r) for r in records])
    trace = load_trace(path)
    assert detect_format(path) == "mooncake"
    assert trace.hash_block_size == 512
    assert trace.arrival_s.tolist() == [r["timestamp"] / 1000 for r in records]
    assert trace.hash_ids == [r["hash_ids"] for r in records]
    bad = [json.dumps(r) for r in records[:3]] + [
        '{"timestamp": 5, "input_length": 3.5, "output_length": 1, "hash_ids": [1]}',
        "not json",
        '{"timestamp": 9}',
    ]
    path = write(tmp_path / "bad.jsonl", bad)
    with pytest.raises(TraceFormatError, match=r"bad.jsonl:4: input_length is 3.5"):
        load_trace(path, format="mooncake")
    skipped = load_trace(path, format="mooncake", skip_bad_rows=True)
    assert len(skipped) == 3 and skipped.load_report.rows_skipped == 3
    assert "bad.jsonl:5" in skipped.load_report.first_errors[1]
    assert "input_length" in skipped.load_report.first_errors[2]


def test_vidur_ignores_extra_columns(tmp_path):
    rng = np.random.default_rng(15)
    times = np.sort(rng.uniform(0, 50, 40))
    prefill, decode = rng.integers(1, 4000, 40), rng.integers(1, 500, 40)
    lines = ["arrived_at,num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio"] + [
        f"{float(t)!r},{p},{d},{p + d},{p / d}" for t, p, d in zip(times, prefill, decode)
    ]
    trace = load_trace(write(tmp_path / "splitwise_conv.csv", lines))
    assert trace.arrival_s.tolist() == times.tolist()
    assert trace.output_tokens.tolist() == decode.tolist()
    with pytest.raises(TraceFormatError, match=r":3: arrived_at is '-1'"):
        load_trace(write(tmp_path / "neg.csv", lines[:2] + ["-1,5,5,10,1"]))


def test_unknown_header_and_empty_file_say_what_is_accepted(tmp_path):
    with pytest.raises(TraceFormatError, match="cannot tell the trace format.*TIMESTAMP"):
        load_trace(write(tmp_path / "x.csv", ["time,in,out", "1,2,3"]))
    with pytest.raises(TraceFormatError, match="empty"):
        load_trace(write(tmp_path / "e.csv", [], False))
    with pytest.raises(TraceFormatError, match="no data rows"):
        load_trace(write(tmp_path / "h.csv", ["TIMESTAMP,ContextTokens,GeneratedTokens"]))
    with pytest.raises(ValueError, match="unknown trace format"):
        load_trace(write(tmp_path / "h2.csv", ["a"]), format="parquet")
    with pytest.raises(FileNotFoundError):
        load_trace(tmp_path / "missing.csv")


def test_gzip_files_and_binary_garbage(tmp_path):
    import gzip

    rows, _ = azure_rows(seed=16, n=20)
    path = tmp_path / "azure.csv.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("\n".join(["TIMESTAMP,ContextTokens,GeneratedTokens"] + rows))
    trace = load_trace(path)
    assert len(trace) == 20 and trace.name == "azure"
    (tmp_path / "junk.csv").write_bytes(bytes(range(128, 256)) * 4)
    with pytest.raises(TraceFormatError, match="UTF-8"):
        load_trace(tmp_path / "junk.csv")
