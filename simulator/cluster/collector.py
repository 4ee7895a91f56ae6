"""Python's cyclic garbage collector, paused while a simulation runs.

A simulated step allocates a few small tracked objects per request (the scheduler's output tuples,
SimPy events, lists of context lengths), so the collector's young generation fills every few hundred
requests, and each pass that reaches the older generations walks every live request, record and
module object. Measured on `benchmarks/simulator.py`'s fleet run (b), compiled build, 1 s of traffic
(valgrind instruction counts, 2026-12-04): the simulation took 5.37 G instructions at the default
thresholds (700, 10, 10), 4.53 G at (50,000, 20, 100) and 4.35 G with the collector off. The loop
makes almost no cyclic garbage (SimPy drops an event's callbacks once it fires): after 2 s of that
traffic (20,195 requests) with the collector off, one collection found 1,007 unreachable objects, and
the peak memory was the same as with it on (306 MB). So the collector is off for the run and back on
after it (a collection then frees what cycles there were); nothing in a run depends on when they go.
So is building the cluster (`simulation.build_cluster`: a record per request, each replica's block
tables): on run (c) of `benchmarks/simulator.py` (19,366 requests) the collector ran 94 times during
the build, one of them over the oldest generation, 0.17 s of its 0.33 s (2026-12-04).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the body with the cyclic collector off; it comes back on after, if it was on before (so a
    nested use leaves the outer one's pause in place)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
