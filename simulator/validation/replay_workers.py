"""Where a published set's runs are replayed: in this process, or spread over worker processes.

Each run of a published set is an independent simulation (`published_replay.replay_run`: its own
scenario, trace and seed), so a set's runs can go to several processes and come back in order with
the same figures as one after another. The workers start as the cluster's shards do
(`simulator.cluster.shards.worker_context`: forks where the platform forks; a forkserver would import
the parent's `__main__` again, which Streamlit's AppTest leaves unimportable). `surgeplan validate
--published` replays every set, and a `--refit` replays the fit runs once per trial of its coordinate
search (hundreds of times), so this loop is most of their time (`all`: 3.5 minutes in one process on
the 2-core VM, 2026-12-07). Within `replay_workers(n)` every `replay_runs` call maps the runs over n
processes; outside it (the library's default, and every test that does not ask) they run here, one
after another.

The profile is resolved before the runs leave (`source_profile`) and sent with each, so a worker never
reads a profile file that a refit in the same command has since rewritten.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

from simulator.calibration.engine_profile import EngineProfile
from simulator.cluster.shards import default_worker_count, worker_context
from simulator.validation.published_replay import replay_run

_pool: tuple[ProcessPoolExecutor, int] | None = None  # the block's processes, and how many


@contextmanager
def replay_workers(count: int | None = None) -> Iterator[int]:
    """Within the block, replay published runs on `count` processes (None: `default_worker_count()`;
    1: in this process). Yields the count; the processes end with the block."""
    global _pool
    count = default_worker_count() if count is None else count
    if count < 1:
        raise ValueError(f"replay workers is {count}; expected 1 or more (1: in this process)")
    if _pool is not None:
        raise RuntimeError("replay_workers blocks do not nest; expected one at a time")
    if count > 1:
        # what a worker imports, imported before it forks: a child never waits on an import lock
        # another thread of this process held at the fork
        import simulator.simulation  # noqa: F401

        _pool = (ProcessPoolExecutor(max_workers=count, mp_context=worker_context()), count)
    try:
        yield count
    finally:
        held, _pool = _pool, None
        if held is not None:
            held[0].shutdown(cancel_futures=True)


def _replay_one(task: tuple[dict, dict, EngineProfile]) -> dict[str, float]:
    data, run, profile = task
    return replay_run(data, run, profile)


def replay_runs(data: dict, profile: EngineProfile) -> list[dict[str, float]]:
    """`replay_run` of each of `data`'s runs with `profile`, in the runs' order: on the processes of
    the enclosing `replay_workers` block, else here."""
    runs = data["runs"]
    if _pool is None or len(runs) < 2:
        return [replay_run(data, run, profile) for run in runs]
    pool, count = _pool
    header = {key: value for key, value in data.items() if key != "runs"}  # each task its own run
    # a few tasks a worker: short runs (Argonne's, ~35 ms each) otherwise pay more in messages
    chunk = max(1, len(runs) // (4 * count))
    return list(pool.map(_replay_one, [(header, run, profile) for run in runs], chunksize=chunk))
