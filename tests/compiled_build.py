"""Which build of the shared core this process imported (`make compiled`'s mypyc modules or the
pure-Python source), the modules that build compiles, and the marker for tests that cannot run
against it: a compiled class can be neither monkeypatched, subclassed in Python nor deep-copied, and a
few tests watch or copy the scheduler, the block manager or a simulated replica that way. CI runs the
suite on the pure-Python modules, where every test runs, then again on the mypyc build (`make
test-compiled`, which sets SURGEPLAN_EXPECT_BUILD so that a build that did not load fails at once)."""

import importlib
import re
from pathlib import Path

import pytest

from engine.core import core_build

ROOT = Path(__file__).resolve().parents[1]
COMPILED = core_build() == "mypyc"

pure_python_only = pytest.mark.skipif(
    COMPILED,
    reason="patches, subclasses or deep-copies a class that `make compiled` built with mypyc "
    "(`make pure` runs it)",
)


def compiled_modules() -> list[Path]:
    """The sources the Makefile's CORE_COMPILED names, as paths under the repository."""
    makefile = (ROOT / "Makefile").read_text()
    block = makefile.split("CORE_COMPILED :=", 1)[1].split("\n\n", 1)[0]
    return [ROOT / name for name in re.findall(r"\S+\.py", block)]


def modules_not_built_as(expected: str) -> list[str]:
    """Each CORE_COMPILED module this process imports from the other build than `expected` ("mypyc":
    an extension module beside its source; "pure Python": the .py), as 'path (imported from file)'."""
    if expected not in ("mypyc", "pure Python"):
        raise ValueError(f"build {expected!r}; expected 'mypyc' or 'pure Python'")
    wrong = []
    for path in compiled_modules():
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        imported = importlib.import_module(name).__file__ or ""
        if imported.endswith(".py") != (expected == "pure Python"):
            wrong.append(f"{path.relative_to(ROOT)} (imported from {Path(imported).name})")
    return wrong
