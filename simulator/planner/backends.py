"""Where the planner's simulations run: in this process, in local worker processes, or on a Ray cluster.
One code path: each backend submits `evaluate_job` for a job and says when it is done; the searches
depend only on outcomes, so a plan's answer and ledger are the same on every backend for the same seed.

`Runner` sits in front of a backend: it answers from the cache what it can, runs each distinct job
once, and shows a progress bar only when stderr is a terminal.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

from simulator.planner.cache import OutcomeCache
from simulator.planner.evaluate import evaluate_job, job_key
from simulator.planner.outcome import Outcome


class LocalBackend:
    """`workers` processes (1: this process, no pool: each job runs when submitted)."""

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers if workers is not None else min(os.cpu_count() or 1, 8))
        self._pool: ProcessPoolExecutor | None = None
        self.name = "serial" if self.workers == 1 else f"{self.workers} local processes"

    def submit(self, job: dict) -> Future:
        if self.workers == 1:
            future: Future = Future()
            future.set_result(evaluate_job(job))
            return future
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.workers)
        return self._pool.submit(evaluate_job, job)

    def wait(self, handles: list[Future]) -> None:
        """Until at least one of `handles` is done."""
        wait(handles, return_when=FIRST_COMPLETED)

    @staticmethod
    def done(handle: Future) -> bool:
        return handle.done()

    @staticmethod
    def result(handle: Future) -> dict:
        return handle.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


class RayBackend:
    """A Ray cluster (`address`), or a local Ray instance with `workers` CPUs when no address is given.
    The cluster's nodes need surgeplan importable (`pip install surgeplan[ray]` on each)."""

    def __init__(self, address: str | None = None, workers: int | None = None):
        try:
            import ray
        except ImportError:
            raise ValueError(
                "backend 'ray' needs Ray, which is not installed; expected `pip install "
                "surgeplan[ray]`, or --backend local"
            ) from None
        self._ray = ray
        self._owned = not ray.is_initialized()
        if self._owned:
            options = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
            if address:
                ray.init(address=address, **options)
            else:
                ray.init(num_cpus=workers or os.cpu_count(), **options)
        self._remote = ray.remote(evaluate_job)
        self._done: set = set()
        self.name = f"Ray at {address}" if address else "local Ray instance"

    def submit(self, job: dict):
        return self._remote.remote(job)

    def wait(self, handles: list) -> None:
        ready, _ = self._ray.wait(list(handles), num_returns=1)
        self._done.update(ready)

    def done(self, handle) -> bool:
        if handle not in self._done and self._ray.wait([handle], timeout=0)[0]:
            self._done.add(handle)
        return handle in self._done

    def result(self, handle) -> dict:
        self._done.discard(handle)
        return self._ray.get(handle)

    def close(self) -> None:
        if self._owned:
            self._ray.shutdown()


def make_backend(kind: str = "local", workers: int | None = None, ray_address: str | None = None):
    """'local' (processes; workers=1: serial) or 'ray'; a Ray address implies 'ray'."""
    if ray_address or kind == "ray":
        return RayBackend(ray_address, workers)
    if kind != "local":
        raise ValueError(f"backend {kind!r} is unknown; expected 'local' or 'ray'")
    return LocalBackend(workers)


class Runner:
    """Cache, backend and progress bar in front of `evaluate_job`: `submit` answers from the cache, or joins
    a simulation of the same job already running, or starts one; `outcome` waits for it."""

    def __init__(self, backend, cache: OutcomeCache | None = None, progress: bool | None = None):
        self.backend = backend
        self.cache = cache or OutcomeCache()
        self._running: dict[str, object] = {}  # job key -> backend handle
        show = sys.stderr.isatty() if progress is None else progress
        self._bar = None
        if show:
            from tqdm import tqdm

            self._bar = tqdm(total=0, unit="sim", desc="planning", leave=False, file=sys.stderr)
        self.simulated = 0

    def submit(self, job: dict) -> tuple[str, bool]:
        """(the job's key, whether this request starts its simulation)."""
        key = job_key(job)
        if key in self._running or self.cache.get(key) is not None:
            return key, False
        self._running[key] = self.backend.submit(job)
        self.simulated += 1
        if self._bar is not None:
            self._bar.total += 1
            self._bar.refresh()
        return key, True

    def ready(self, key: str) -> bool:
        handle = self._running.get(key)
        return handle is None or self.backend.done(handle)

    def wait(self, keys: list[str]) -> None:
        """Until at least one of `keys` is ready."""
        handles = [self._running[key] for key in keys if key in self._running]
        if handles and not any(self.backend.done(handle) for handle in handles):
            self.backend.wait(handles)

    def outcome(self, key: str) -> Outcome:
        handle = self._running.pop(key, None)
        if handle is None:
            return self.cache.memory[key]
        outcome = self.backend.result(handle)
        self.cache.put(key, outcome)
        if self._bar is not None:
            self._bar.update(1)
        return outcome

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        self.backend.close()
