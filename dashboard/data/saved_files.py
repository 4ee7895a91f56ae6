"""Where the dashboard finds files the project saved (`benchmarks/results/*.json`), and reading them
as (contents, message) so a page shows a missing or broken file as a line, not an exception."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


VALIDATE_JSON = ROOT / "benchmarks" / "results" / "validate.json"
ENGINE_BENCH_JSON = ROOT / "benchmarks" / "results" / "engine_cpu.json"
# `surgeplan validate --published all --out ...`: every published set replayed, row by row
PUBLISHED_JSON = ROOT / "benchmarks" / "results" / "published_validation.json"


def saved_validations() -> list[Path]:
    """Every saved `surgeplan validate` run: validate.json (the headline CPU run) first, then the others
    (`validate-<name>.json`: the code trace, HTTP, the H200 lease's runs) by name; a calibration saved
    beside them (`validate-<name>-calibration.json`) is not a run and is left out."""
    results = VALIDATE_JSON.parent
    others = sorted(
        p for p in results.glob("validate-*.json") if not p.stem.endswith("-calibration")
    )
    return [p for p in [VALIDATE_JSON, *others] if p.is_file()]


def read_json(path: Path) -> tuple[dict | None, str | None]:
    """(contents, None), (None, None) when the file is absent, or (None, why it cannot be read)."""
    if not path.is_file():
        return None, None
    try:
        return json.loads(path.read_text()), None
    except (OSError, json.JSONDecodeError) as error:
        return (
            None,
            f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: cannot be read ({error})",
        )
