"""Where the planner's simulations run: in this process, in local worker processes, or on a Ray cluster.
One code path: each backend submits `evaluate_job` for a job and says when it is done; the searches
depend only on outcomes, so a plan's answer and ledger are the same on every backend for the same seed.

`Runner` sits in front of a backend: it answers from the cache what it can, runs each distinct job
once, and shows a progress bar only when stderr is a terminal. A search may also name jobs it will
probably ask for next (`ahead`: a confirmation's one-fewer check, a warm pool's next size): they start
only on a worker no asked-for job needs, and a later ask joins them, so on two cores the one-fewer run
goes beside the confirmation instead of after it. An outcome is the job's, whoever started it, so the
answer is unchanged; a job started ahead and never asked for is CPU spent for nothing
(`ahead_unused`), never a ledger row.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

from simulator.cluster.shards import default_worker_count
from simulator.planner.cache import OutcomeCache
from simulator.planner.evaluate import evaluate_job, job_key
from simulator.planner.outcome import Outcome
from simulator.planner.parts import PartedBackend


class LocalBackend:
    """`workers` processes (1: this process, no pool: each job runs when submitted)."""

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers if workers is not None else default_worker_count())
        self.slots = self.workers if self.workers > 1 else 0  # jobs run beside this process
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
        self.slots = int(ray.cluster_resources().get("CPU", 0))
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
    a simulation of the same job already running, or starts one; `outcome` waits for it. `ahead` queues
    jobs to start when a worker is free (never on a serial backend, where a job runs when started)."""

    def __init__(self, backend, cache: OutcomeCache | None = None, progress: bool | None = None):
        self.backend = PartedBackend(backend)  # a whole fleet in parts: its parts side by side
        self.cache = cache or OutcomeCache()
        self._running: dict[str, object] = {}  # job key -> backend handle
        self._ahead: dict[str, dict] = {}  # job key -> job, queued to start on a free worker
        self._unasked: set[str] = set()  # started ahead, not asked for yet
        show = sys.stderr.isatty() if progress is None else progress
        self._bar = None
        if show:
            from tqdm import tqdm

            self._bar = tqdm(total=0, unit="sim", desc="planning", leave=False, file=sys.stderr)
        self.simulated = 0  # distinct jobs simulated and asked for

    @property
    def ahead_unused(self) -> int:
        """Jobs started ahead that no search asked for (so far)."""
        return len(self._unasked)

    def submit(self, job: dict) -> tuple[str, bool]:
        """(the job's key, whether this request starts its simulation: or claims one started ahead)."""
        key = job_key(job)
        self._ahead.pop(key, None)
        if key in self._unasked:
            self._unasked.discard(key)
            self._count()
            return key, True
        if key in self._running or self.cache.get(key) is not None:
            return key, False
        self._running[key] = self.backend.submit(job)
        self._count()
        return key, True

    def ahead(self, jobs: list[dict]) -> None:
        """Jobs likely asked for soon: started as workers free up, asked-for jobs first."""
        if not getattr(self.backend, "slots", 0):
            return
        for job in jobs:
            key = job_key(job)
            if key not in self._running and key not in self.cache.memory:
                self._ahead[key] = job  # started by `wait`, after the jobs asked for meanwhile

    def _fill(self) -> None:
        busy = sum(not self.backend.done(handle) for handle in self._running.values())
        while self._ahead and busy < self.backend.slots:
            key, job = next(iter(self._ahead.items()))
            del self._ahead[key]
            if self.cache.get(key) is not None:
                continue
            self._running[key] = self.backend.submit(job)
            self._unasked.add(key)
            busy += 1

    def _count(self) -> None:
        self.simulated += 1
        if self._bar is not None:
            self._bar.total += 1
            self._bar.refresh()

    def ready(self, key: str) -> bool:
        handle = self._running.get(key)
        return handle is None or self.backend.done(handle)

    def wait(self, keys: list[str]) -> None:
        """Until one more of `keys` is ready (not one that already was: a search waiting on several jobs
        would spin), starting jobs queued ahead as workers free up."""
        done = self.backend.done
        handles = [
            handle
            for handle in (self._running.get(key) for key in keys)
            if handle is not None and not done(handle)
        ]
        while handles and not any(done(handle) for handle in handles):
            self._fill()
            ahead = [self._running[key] for key in self._unasked if key in self._running]
            self.backend.wait(handles + [handle for handle in ahead if not done(handle)])
        self._fill()

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
        self._ahead.clear()
        for key in list(self._unasked):  # finished or not, keep what was computed
            handle = self._running.pop(key, None)
            if handle is not None and self.backend.done(handle):
                self.cache.put(key, self.backend.result(handle))
        if self._bar is not None:
            self._bar.close()
        self.backend.close()
