"""Whether this process imported the mypyc build of the shared core (`make compiled`), and the marker
for tests that cannot run against it: a compiled class can be neither monkeypatched, subclassed in
Python nor deep-copied, and a few tests watch or copy the scheduler, the block manager or a simulated
replica that way. CI runs the pure-Python modules, where every test runs."""

import pytest

from engine.core import core_build

COMPILED = core_build() == "mypyc"

pure_python_only = pytest.mark.skipif(
    COMPILED,
    reason="patches, subclasses or deep-copies a class that `make compiled` built with mypyc "
    "(`make pure` runs it)",
)
