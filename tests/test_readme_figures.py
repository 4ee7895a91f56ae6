"""The README's real-GPU figures are the stored replay's: its headline ("How far to trust it"), its
row in the table of measured areas, the held-out table per engine profile and GPU, and the planner's
band it quotes are recomputed here from `benchmarks/results/published_validation.json` and the
profiles, so a refit that re-saves the replay without the README (or the reverse) fails here instead
of leaving a newcomer a headline from an older fit."""

import json
import re
from pathlib import Path

import pytest

from dashboard.data.saved_files import PUBLISHED_JSON
from simulator.calibration.engine_profile import load_profile, profile_names
from simulator.validation.published_report import Row, Stats, pooled_summary, stats
from simulator.validation.published_sets import load_published

README = Path(__file__).resolve().parents[1] / "README.md"
CELL = re.compile(r"\**(\d+\.\d)% / (\d\.\d{3}) / (\d+)% \((\d+)\)")


def _results() -> list[dict]:
    return json.loads(PUBLISHED_JSON.read_text())


def _held_out(results: list[dict]) -> list[Row]:
    fields = Row.__dataclass_fields__
    return [
        Row(**{key: value for key, value in row.items() if key in fields})
        for result in results
        for row in result["rows"]
        if row["split"] == "held_out"
    ]


def _cell(entry: Stats) -> tuple[str, str, str, str]:
    """How the README writes a group: median |error| / bias / share within 10% (rows)."""
    return (
        f"{100 * entry.median_abs_error:.1f}",
        f"{entry.bias:.3f}",
        f"{100 * entry.within_10pct:.0f}",
        str(entry.rows),
    )


def _bias_percent(entry: Stats) -> str:
    """The README's bias in words: −3.3% for a geometric-mean ratio of 0.967."""
    return f"{'−' if entry.bias < 1 else '+'}{abs(100 * (entry.bias - 1)):.1f}%"


def test_the_held_out_table_per_profile_and_gpu_is_the_stored_replays():
    summary = {
        (e["profile"], e["gpu"], e["degree"]): Stats(
            e["rows"], e["median_abs_error"], e["bias"], e["within_10pct"]
        )
        for e in pooled_summary(_results())
    }
    seen = set()
    for line in README.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 5 or cells[0] not in profile_names():
            continue
        for degree, text in zip(("all", "TP1", "TP>1"), cells[2:5], strict=True):
            entry = summary.get((cells[0], cells[1], degree))
            written = CELL.match(text)
            if entry is None:
                assert written is None, (cells[0], cells[1], degree, text)
                continue
            assert written is not None, (cells[0], cells[1], degree, text)
            assert written.groups() == _cell(entry), (cells[0], cells[1], degree)
            seen.add((cells[0], cells[1], degree))
    assert seen == set(summary)  # every profile and GPU with held-out rows has its row


def test_the_headline_and_the_areas_row_are_the_stored_replays():
    results = _results()
    rows = _held_out(results)
    every = stats(rows)
    one = stats([row for row in rows if row.tensor_parallel == 1])
    group = stats([row for row in rows if row.tensor_parallel > 1])
    models = {}
    for result in results:
        runs = load_published(result["source"]["name"])["runs"]
        models |= {(result["source"]["name"], run["id"]): run["model"] for run in runs}
    small = stats(
        [
            row
            for row in rows
            if row.tensor_parallel == 1 and re.search(r"-[78]b$", models[(row.source, row.run)])
        ]
    )
    text = " ".join(README.read_text().split())  # the prose, its line breaks as spaces
    assert f"**How far to trust it** ({every.rows} public measurements" in text
    assert (
        f"one-GPU replicas come out within {100 * one.median_abs_error:.1f}% in the median "
        f"(bias {_bias_percent(one)}, {100 * one.within_10pct:.0f}% of rows within 10%; "
        f"{100 * small.median_abs_error:.1f}% / {_bias_percent(small)} / "
        f"{100 * small.within_10pct:.0f}% for models up to 8B)"
    ) in text
    assert (
        f"tensor-parallel groups (TP 2-8) within {100 * group.median_abs_error:.1f}% "
        f"(bias {_bias_percent(group)}, {100 * group.within_10pct:.0f}% within 10%)"
    ) in text
    median, bias, within, count = _cell(every)
    one_cell, group_cell = ("{}% / {} / {}%".format(*_cell(e)[:3]) for e in (one, group))
    assert (
        f"below: {count} held-out rows, {median}% median \\|error\\|, bias {bias}, {within}% "
        f"within 10%; one GPU {one_cell}; TP groups {group_cell}"
    ) in text


def test_the_planners_band_per_profile_and_gpu_is_the_profiles():
    """The table's last column: the band a plan on that GPU takes at TP1 and at a degree with no
    rows of its own (TP16: no published set has one), which reads its tensor-parallel class."""
    checked = 0
    for line in README.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 6 or cells[0] not in profile_names() or cells[1] == "all":
            continue
        profile = load_profile(cells[0])
        bands = (profile.held_out_error(cells[1], 1), profile.held_out_error(cells[1], 16))
        written = re.match(r"(\d+\.\d)% / (\d+\.\d)%", cells[5])
        assert written is not None, cells
        assert written.groups() == tuple(f"{100 * band:.1f}" for band in bands), cells[:2]
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize(("tensor_parallel", "written"), [(4, "X = {}% for"), (1, ", {}% at TP1")])
def test_the_planners_band_the_headline_quotes_is_the_profiles(tensor_parallel, written):
    band, _ = load_profile("trtllm").held_out("H100-80GB", tensor_parallel)
    text = " ".join(README.read_text().split())
    assert written.format(f"{100 * band:.1f}") in text
