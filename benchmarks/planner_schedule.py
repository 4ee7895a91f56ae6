"""The planner's wall time on N idle cores, modelled: on a shared machine a measured wall time says more
about the other tenants than about the planner, so `benchmarks/planner.py --model-cores N` also replays
each plan on a virtual backend. Every job is really simulated once (in this process) and takes its
measured CPU time on one of N virtual workers, first come first served as in the process pool; the
plan's own scheduling (which jobs wait on which, what starts ahead) decides the rest. The result is the
makespan on N cores that do nothing else, and the CPU of every job started (those started ahead and
never asked for included). Job times come from the real run just made (its outcomes' CPU time); a memo file of job key -> (outcome, CPU s) lets two checkouts (before,
after) replay with the same job times, so their difference is the scheduling and the job count alone.
"""

from __future__ import annotations

import heapq
import json
from pathlib import Path


class VirtualBackend:
    """A `LocalBackend` stand-in on a virtual clock: `slots` workers, jobs as long as their CPU time."""

    def __init__(self, slots: int, memo_path: Path | None = None, known: dict | None = None):
        from simulator.planner.evaluate import evaluate_job, job_key
        from simulator.planner.outcome import Outcome

        self._evaluate, self._key, self._outcome = evaluate_job, job_key, Outcome
        self.slots, self.name = slots, f"{slots} virtual cores"
        self.memo_path = memo_path
        self.memo: dict = {}
        if memo_path is not None and memo_path.exists():
            self.memo = json.loads(memo_path.read_text())
        for key, outcome in (known or {}).items():  # a real run's outcomes: not simulated again
            self.memo.setdefault(key, [outcome.to_json(), outcome.cpu_s])
        self.clock_s = 0.0
        self.started_cpu_s = 0.0
        self._running: list[tuple[float, int]] = []  # (finish, handle) heap
        self._queue: list[int] = []
        self._finish: dict[int, float] = {}
        self._jobs: list[tuple[object, float]] = []  # handle -> (outcome, cpu_s)

    def submit(self, job: dict) -> int:
        key = self._key(job)
        if key not in self.memo:
            outcome = self._evaluate(job)
            self.memo[key] = [outcome.to_json(), outcome.cpu_s]
        data, cpu_s = self.memo[key]
        handle = len(self._jobs)
        self._jobs.append((self._outcome.from_json(data), cpu_s))
        self._queue.append(handle)
        self._start()
        return handle

    def _start(self) -> None:
        while self._queue and len(self._running) < self.slots:
            handle = self._queue.pop(0)
            cpu_s = self._jobs[handle][1]
            self.started_cpu_s += cpu_s
            self._finish[handle] = self.clock_s + cpu_s
            heapq.heappush(self._running, (self._finish[handle], handle))

    def _advance(self) -> None:
        finish, _handle = heapq.heappop(self._running)
        self.clock_s = max(self.clock_s, finish)
        self._start()

    def done(self, handle: int) -> bool:
        finish = self._finish.get(handle)
        return finish is not None and finish <= self.clock_s

    def wait(self, handles: list[int]) -> None:
        """Until one of `handles` not done yet is done (a caller that passes done ones too would spin
        in real time until then: so it does here, in no time)."""
        pending = [handle for handle in handles if not self.done(handle)]
        while pending and not any(self.done(handle) for handle in pending):
            self._advance()

    def result(self, handle: int):
        return self._jobs[handle][0]

    def close(self) -> None:
        while self._running or self._queue:  # the pool's shutdown waits for jobs still running
            if not self._running:
                self._start()
            self._advance()
        if self.memo_path is not None:
            self.memo_path.write_text(json.dumps(self.memo))


def modelled(plan_call, slots: int, memo_path: Path | None, known: dict | None = None) -> dict:
    """`plan_call()` on `slots` virtual cores: {"wall_s", "cpu_s"} of the model. `known`: outcomes by
    job key (a real run's cache) used where the memo file has none."""
    import simulator.planner.backends as backends
    import simulator.planner.recommend as recommend

    backend = VirtualBackend(slots, memo_path, known)
    original, original_wait = recommend.make_backend, backends.Runner.wait
    recommend.make_backend = lambda *args, **kwargs: backend
    if not hasattr(backends.Runner, "ahead"):  # a checkout from before: its wait returned at once
        # when a job it named was done already, and the driver spun until another one was: the wait
        # that spin amounts to (in real time it also took a core from the workers; not modelled)
        backends.Runner.wait = lambda runner, keys: backend.wait(
            [runner._running[key] for key in keys if key in runner._running]
        )
    try:
        plan_call()
    finally:
        recommend.make_backend, backends.Runner.wait = original, original_wait
    return {"wall_s": backend.clock_s, "cpu_s": backend.started_cpu_s}
