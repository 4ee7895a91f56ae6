"""Where a published set's runs are replayed: in this process, or spread over worker processes.

Each run of a published set is an independent simulation (`published_replay.replay_run`: its own
scenario, trace and seed), so a set's runs can go to several processes and come back in order with
the same figures as one after another. The workers are forks of this process where the platform
forks, as the cluster's shards are (`simulator.cluster.shards`): a forkserver or a spawned worker
would import the parent's `__main__` again, which an embedding host (Streamlit's script runner, a
test's runpy) need not leave importable. `surgeplan validate --published` replays every set, and
a `--refit` replays the fit runs once per trial of its coordinate search (hundreds of times), so on
the 2-core VM its ~10-40 minutes are mostly this loop. Within `replay_workers(n)` every
`replay_runs` call maps the runs over n processes; outside it (the library's default, and every test
that does not ask) they run here, one after another.

The profile is resolved before the runs leave (`source_profile`) and sent with each, so a worker never
reads a profile file that a refit in the same command has since rewritten.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

from simulator.calibration.engine_profile import EngineProfile
from simulator.validation.published_replay import replay_run

_pool: ProcessPoolExecutor | None = None
_pool_workers = 1  # its processes


def default_workers() -> int:
    """One process per CPU, at most 8."""
    return max(1, min(os.cpu_count() or 1, 8))


@contextmanager
def replay_workers(count: int | None = None) -> Iterator[int]:
    """Within the block, replay published runs on `count` processes (None: `default_workers()`; 1:
    in this process). Yields the count; the processes end with the block."""
    global _pool, _pool_workers
    count = default_workers() if count is None else count
    if count < 1:
        raise ValueError(f"replay workers is {count}; expected 1 or more (1: in this process)")
    if _pool is not None:
        raise RuntimeError("replay_workers blocks do not nest; expected one at a time")
    if count > 1:
        # what a worker imports, imported before it forks: a child never waits on an import lock
        # another thread of this process held at the fork
        import simulator.simulation  # noqa: F401

        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        _pool, _pool_workers = ProcessPoolExecutor(max_workers=count, mp_context=context), count
    try:
        yield count
    finally:
        pool, _pool, _pool_workers = _pool, None, 1
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def _replay_one(task: tuple[dict, dict, EngineProfile]) -> dict[str, float]:
    data, run, profile = task
    return replay_run(data, run, profile)


def replay_runs(data: dict, profile: EngineProfile) -> list[dict[str, float]]:
    """`replay_run` of each of `data`'s runs with `profile`, in the runs' order: on the processes of
    the enclosing `replay_workers` block, else here."""
    runs = data["runs"]
    if _pool is None or len(runs) < 2:
        return [replay_run(data, run, profile) for run in runs]
    header = {key: value for key, value in data.items() if key != "runs"}  # each task its own run
    # a few tasks a worker: short runs (Argonne's, ~35 ms each) otherwise pay more in messages
    chunk = max(1, len(runs) // (4 * _pool_workers))
    return list(_pool.map(_replay_one, [(header, run, profile) for run in runs], chunksize=chunk))
