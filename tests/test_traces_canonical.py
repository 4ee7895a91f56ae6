"""surgeplan's canonical JSONL and CSV: every column survives a round trip; bad rows are named."""

import re

import numpy as np
import pytest

from traces import Trace, TraceFormatError, detect_format, load_trace


def random_trace(seed: int, n: int, with_hashes: bool = True) -> Trace:
    rng = np.random.default_rng(seed)
    prompt = rng.integers(1, 3000, n)
    hash_ids = (
        [rng.integers(-5, 40, -(-int(p) // 128)).tolist() for p in prompt] if with_hashes else None
    )
    return Trace(
        np.sort(rng.exponential(50.0, n)),
        prompt,
        rng.integers(0, 700, n),
        hash_ids=hash_ids,
        hash_block_size=128 if with_hashes else None,
        tenant=rng.choice(["a", "b c", "é"], n),
        priority=rng.integers(-3, 4, n),
        failed=rng.random(n) < 0.2,
        source_line=rng.integers(-1, 10_000, n),
        name=f"canonical-{seed}",
        provenance=("generated for a test", "second step"),
    )


@pytest.mark.parametrize(
    "suffix, format_name", [(".jsonl", "surgeplan-jsonl"), (".csv", "surgeplan-csv")]
)
@pytest.mark.parametrize("with_hashes", [True, False])
def test_round_trip_is_identical(tmp_path, suffix, format_name, with_hashes):
    trace = random_trace(seed=21, n=300, with_hashes=with_hashes)
    awkward_tenants = np.where(trace.tenant == "a", 'x, "q"', "b")  # a comma and quotes for CSV
    trace = trace.replace(arrival_s=trace.arrival_s * np.pi, tenant=awkward_tenants)
    path = trace.save(tmp_path / f"t{suffix}")
    assert detect_format(path) == format_name
    loaded = load_trace(path)
    assert loaded == trace
    assert loaded.arrival_s.tobytes() == trace.arrival_s.tobytes()  # bit-exact floats


def test_round_trip_of_a_converted_azure_style_trace_keeps_source_lines(tmp_path):
    lines = [
        "TIMESTAMP,ContextTokens,GeneratedTokens",
        "2023-11-16 18:17:03.9799600,4808,10",
        "2023-11-16 18:17:04.0319600,3180,8",
    ]
    (tmp_path / "a.csv").write_text("\n".join(lines))
    original = load_trace(tmp_path / "a.csv")
    loaded = load_trace(original.save(tmp_path / "a.jsonl"))
    assert loaded == original and loaded.source_line.tolist() == [2, 3]
    assert loaded.arrival_s.tolist() == [0.0, pytest.approx(0.052)]


def test_empty_trace_round_trips(tmp_path):
    empty = Trace([], [], [], name="nothing", provenance=("made empty",))
    for suffix in (".jsonl", ".csv"):
        assert load_trace(empty.save(tmp_path / f"e{suffix}")) == empty


def test_bad_canonical_rows_are_named(tmp_path):
    trace = random_trace(seed=22, n=5)
    path = trace.save(tmp_path / "t.jsonl")
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace('"prompt_tokens": ', '"prompt_tokens": -')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(
        TraceFormatError, match=r"t.jsonl:4: prompt_tokens is -\d+; expected a count ≥ 1"
    ):
        load_trace(path)
    assert len(load_trace(path, skip_bad_rows=True)) == 4

    csv_path = trace.save(tmp_path / "t.csv")
    rows = csv_path.read_text().splitlines()
    rows[4] = rows[4].replace(",0,", ",maybe,", 1) if ",0," in rows[4] else rows[4] + ",extra"
    csv_path.write_text("\n".join(rows) + "\n")
    with pytest.raises(TraceFormatError, match=r"t.csv:5: "):
        load_trace(csv_path)


def test_unknown_suffix_and_bad_header_are_refused(tmp_path):
    trace = random_trace(seed=23, n=3)
    with pytest.raises(ValueError, match="expected a suffix"):
        trace.save(tmp_path / "t.parquet")
    assert trace.save(tmp_path / "t.txt", format="csv").exists()
    (tmp_path / "h.jsonl").write_text('{"surgeplan_trace": 99}\n')
    with pytest.raises(TraceFormatError, match="surgeplan_trace = 1"):
        load_trace(tmp_path / "h.jsonl")


def test_a_row_bad_in_its_last_field_is_skipped_whole(tmp_path):
    trace = random_trace(seed=25, n=4)
    path = trace.save(tmp_path / "t.jsonl")
    lines = path.read_text().splitlines()
    lines[2] = re.sub(r'"source_line": -?\d+', '"source_line": "x"', lines[2])
    lines[4] = "[1, 2]"
    path.write_text("\n".join(lines) + "\n")
    loaded = load_trace(path, skip_bad_rows=True)
    assert len(loaded) == 2 and loaded.load_report.rows_skipped == 2
    assert np.array_equal(loaded.arrival_s, trace.arrival_s[[0, 2]])
    assert "t.jsonl:3: source_line is" in loaded.load_report.first_errors[0]
    assert "t.jsonl:5: is not a JSON object" in loaded.load_report.first_errors[1]
