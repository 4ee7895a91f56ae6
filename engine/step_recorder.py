"""The server's recent engine steps, for timing the HTTP path (`surgeplan validate --via http`).

In-process validation records every step's shape and time itself; behind `surgeplan serve` the engine
runs on its own thread, so that thread keeps the last `capacity` steps here and `GET /debug/steps`
hands them out. Each entry: the step's shape, `step()`'s own time, its start (seconds on the server's
monotonic clock) and its busy time: start to the next step's start while the engine stays busy, so the
thread's work between steps (applying commands, handing outputs to the event loop, metrics) and any
wait for the interpreter lock the event loop holds are in it; `busy_s` is None for a step after which
the engine went idle. Off unless `--record-steps N` is given.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import asdict

from engine.core.step_shape import StepShape


class StepRecorder:
    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(
                f"record_steps {capacity}; expected a positive number of steps to keep"
            )
        self._steps: deque[dict] = deque(maxlen=capacity)
        self._lock = threading.Lock()
        self.total = 0  # steps recorded since start (older ones fall out of the window)
        self._open = False  # the last step's busy time ends at the next step's start

    def stepped(self, start_s: float, step_s: float, shape: StepShape) -> None:
        """The engine thread, after each step that did work (the shape is serialised only when read)."""
        entry = {
            "index": self.total,
            "start_s": start_s,
            "step_s": step_s,
            "busy_s": None,
            "shape": shape,
        }
        with self._lock:
            if self._open and self._steps:
                self._steps[-1]["busy_s"] = start_s - self._steps[-1]["start_s"]
            self._steps.append(entry)
            self.total += 1
            self._open = True

    def idle(self) -> None:
        """The engine thread, when it finds nothing to do: the last step ended in idleness."""
        with self._lock:
            self._open = False

    def since(self, index: int) -> dict:
        """Steps with index ≥ `index` still held, for GET /debug/steps?since=N. The lock, which the engine
        thread takes after every step, is held only to copy the window's references; copying and
        serialising the entries happen outside it."""
        with self._lock:
            window, total = list(self._steps), self.total
        first = max(0, index - window[0]["index"]) if window else 0
        held = [dict(step) for step in window[first:]]
        for step in held:
            step["shape"] = asdict(step["shape"])
        return {"total": total, "steps": held}
