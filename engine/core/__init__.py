"""The engine's pure-Python core, shared by the live engine and the simulator: request state, sampling
parameters, cache and scheduler settings, the block manager, the scheduler and the step shape. Never
imports torch (tests/test_layout.py asserts it)."""

import warnings as _warnings
from pathlib import Path as _Path

# `make compiled` builds the scheduler's modules with mypyc next to their source; a build older than
# its source would silently run the old code, so say so (`make compiled` again, or `make pure`).
for _so in _Path(__file__).parent.glob("*.so"):
    _source = _so.with_name(_so.name.split(".")[0] + ".py")
    if _source.exists() and _source.stat().st_mtime > _so.stat().st_mtime:
        _warnings.warn(
            f"{_so.name} is older than {_source.name}: the compiled module runs the old code; "
            "expected `make compiled` after editing engine/core (or `make pure`)",
            stacklevel=2,
        )


def core_build() -> str:
    """Which build of this package the process imported: "mypyc" (`make compiled`: the modules are
    extension modules next to their source) or "pure Python". Benchmarks print it beside their
    timings; tests that patch, subclass or deep-copy a core class skip under the mypyc one."""
    from engine.core import scheduler

    return "pure Python" if scheduler.__file__.endswith(".py") else "mypyc"
