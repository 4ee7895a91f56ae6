"""`surgeplan validate --published`'s closing summary: every replayed set's held-out rows pooled per
engine profile and GPU, for every tensor-parallel degree and for one GPU and a group apart, each
judged against the targets (median |error| <= 5%, bias within ±3%, >= 80% within 10%)."""

import json
import math
import random
from dataclasses import asdict

import pytest
from typer.testing import CliRunner

from dashboard.data.saved_files import PUBLISHED_JSON
from simulator.calibration.engine_profile import load_profile
from simulator.validation.published_report import (
    Row,
    Stats,
    meets_targets,
    pooled_summary,
    stats,
)
from surgeplan_cli import app


def _result(rng, name, n):
    rows = [
        Row(
            name,
            f"run-{i}",
            rng.choice(("H100-80GB", "A100-80GB")),
            rng.choice(("fit", "held_out", "held_out")),
            "makespan_s",
            rng.choice(("trtllm", "vllm-v0")),
            1.0,
            1.0 + rng.uniform(-0.15, 0.12),
            rng.choice((1, 1, 4, 8)),
        )
        for i in range(n)
    ]
    return {"rows": [asdict(row) | {"error": row.error} for row in rows]}, rows


def test_the_summary_pools_held_out_rows_across_sets_per_degree_class():
    rng = random.Random()  # fresh rows each run
    first, rows_a = _result(rng, "set-a", rng.randint(20, 60))
    second, rows_b = _result(rng, "set-b", rng.randint(20, 60))
    summary = pooled_summary([first, second])
    held = [row for row in rows_a + rows_b if row.split == "held_out"]
    members = {
        "all": lambda row: True,
        "TP1": lambda row: row.tensor_parallel == 1,
        "TP>1": lambda row: row.tensor_parallel > 1,
    }
    assert summary
    for entry in summary:
        part = [
            row
            for row in held
            if row.profile == entry["profile"]
            and entry["gpu"] in ("all", row.gpu)
            and members[entry["degree"]](row)
        ]
        expected = stats(part)
        assert entry["rows"] == expected.rows
        assert entry["median_abs_error"] == pytest.approx(expected.median_abs_error)
        assert entry["bias"] == pytest.approx(expected.bias)
        assert entry["meets_targets"] == meets_targets(expected)
    # every (profile, GPU) with held-out rows appears, and the fit rows never count
    assert {(e["profile"], e["gpu"]) for e in summary if e["gpu"] != "all"} == {
        (row.profile, row.gpu) for row in held
    }
    assert sum(e["rows"] for e in summary if e["gpu"] == "all" and e["degree"] == "all") == len(
        held
    )


def test_targets_are_the_three_bounds():
    rng = random.Random()
    median, bias, within = rng.uniform(0, 0.1), rng.uniform(0.9, 1.1), rng.uniform(0.5, 1.0)
    entry = Stats(10, median, bias, within)
    assert meets_targets(entry) == (median <= 0.05 and abs(bias - 1) <= 0.03 and within >= 0.80)


def test_validate_published_prints_the_pooled_summary():
    out = CliRunner().invoke(app, ["validate", "--published", "lambdalabs-vllm"])
    assert out.exit_code == 0, out.output
    tail = out.output.split("held out, every set pooled")[1]
    assert "vllm-v0    A100-80GB  TP1" in tail and ("met" in tail or "missed" in tail)


def test_the_saved_replay_is_the_one_the_profiles_recorded():
    """`benchmarks/results/published_validation.json` (what the dashboard pools) holds, set by set,
    the rows whose errors each profile stores: a profile refit without saving the replay again fails
    here."""
    fields = Row.__dataclass_fields__
    for result in json.loads(PUBLISHED_JSON.read_text()):
        rows = [Row(**{k: v for k, v in row.items() if k in fields}) for row in result["rows"]]
        profile = load_profile(result["source"]["engine_profile"])
        stored = {
            (e.gpu, e.split): e
            for e in profile.errors
            if e.source == result["source"]["name"] and e.tensor_parallel is None
        }
        groups = {(row.gpu, row.split) for row in rows}
        assert groups == set(stored), result["source"]["name"]
        for gpu, split in groups:
            fresh = stats([row for row in rows if (row.gpu, row.split) == (gpu, split)])
            kept = stored[(gpu, split)]
            assert kept.num_rows == fresh.rows
            assert math.isclose(kept.median_abs_error, fresh.median_abs_error, rel_tol=1e-9)
            assert math.isclose(kept.bias, fresh.bias, rel_tol=1e-9)
