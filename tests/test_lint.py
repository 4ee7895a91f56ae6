"""The tree passes the linter and the formatter, as configured in pyproject.toml ([tool.ruff]):
pyflakes, pycodestyle, import order and the Python 3.11 idioms; lines of at most 100 characters,
formatted. ruff comes with the dev extra; the test is skipped only where it is not installed."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ruff() -> list[str]:
    try:
        from ruff.__main__ import find_ruff_bin
    except ImportError:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    return [find_ruff_bin()]


@pytest.mark.parametrize(
    "command", [["check", "."], ["format", "--check", "."]], ids=["check", "format"]
)
def test_ruff(command):
    done = subprocess.run(
        _ruff() + command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, (
        f"`ruff {' '.join(command)}` failed; `ruff format . && ruff check --fix .` fixes most of it:\n"
        f"{done.stdout[-4000:]}{done.stderr[-2000:]}"
    )
