"""A long task (the live validation: minutes of the real engine) run beside the Streamlit app, so the page
stays live while it works: it shows the task's progress messages as they come and offers a Cancel
button that takes effect at once.

The task runs in a child Python process (`python -m dashboard.jobs MODULE:FUNCTION ARGS`), which calls
`function(*args, progress=...)` and sends each progress message, then the answer, as JSON lines on its
own channel (the task's prints go to its stderr). A reader thread here collects them. Cancelling
terminates the process: the live engine stops mid-run, whatever it was doing, and its memory goes with
it. The process also keeps the engine's CPU-bound work off the server's interpreter, so other sessions
stay responsive. A plain child process, not `multiprocessing`: spawning would re-run the Streamlit
script, which is `__main__` while a page runs. The task must be a module-level function; its arguments
and answer, (result, None) or (None, an error message), must be JSON. Nothing here calls Streamlit.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RUNNING, CANCELLING, CANCELLED, FAILED, DONE = (
    "running",
    "cancelling",
    "cancelled",
    "failed",
    "done",
)
ROOT = Path(__file__).resolve().parent.parent


def task_name(task: Callable) -> str:
    """'module:function' for a module-level function (what the child process imports)."""
    if "<locals>" in task.__qualname__ or "." in task.__qualname__:
        raise ValueError(
            f"job task {task.__qualname__!r}: expected a module-level function, which a child process "
            "can import by name"
        )
    return f"{task.__module__}:{task.__qualname__}"


class Job:
    """`task(*args, progress=...)` in a child process."""

    def __init__(
        self,
        task: Callable[..., tuple[Any, str | None]],
        args: tuple = (),
        steps: int | None = None,
    ):
        self.steps = steps
        self.messages: list[str] = []
        self.result: Any = None
        self.error: str | None = None
        self.started_s = time.monotonic()
        self.finished_s: float | None = None
        self._cancelled = False
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        }  # the task imports as here
        self._process = subprocess.Popen(
            [sys.executable, "-m", "dashboard.jobs", task_name(task), json.dumps(args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            env=env,
            text=True,
        )
        self._reader = threading.Thread(
            target=self._read, name="surgeplan-dashboard-job", daemon=True
        )
        self._reader.start()

    def _read(self) -> None:
        answered = False
        for line in self._process.stdout:
            kind, value = json.loads(line)
            if kind == "progress":
                self.messages.append(value)
            elif kind == "done":
                (self.result, self.error), answered = value, True
            else:
                self.error, answered = f"the task failed: {value}", True
        code = self._process.wait()
        if not answered and not self._cancelled:
            self.error = f"the task's process ended (exit code {code}) without an answer"
        self.finished_s = time.monotonic()

    def cancel(self) -> None:
        """Stop the task now (its process is terminated)."""
        self._cancelled = True
        if self._process.poll() is None:
            self._process.terminate()

    def wait(self, timeout_s: float | None = None) -> bool:
        """True once the task has ended (done, failed or cancelled)."""
        self._reader.join(timeout_s)
        return not self._reader.is_alive()

    @property
    def state(self) -> str:
        if self._reader.is_alive():
            return CANCELLING if self._cancelled else RUNNING
        if self._cancelled and self.result is None:
            return CANCELLED
        return FAILED if self.error else DONE

    @property
    def fraction(self) -> float | None:
        """Share of the task's progress points passed, when it said how many it has."""
        if not self.steps:
            return None
        return min(len(self.messages) / self.steps, 1.0)

    @property
    def elapsed_s(self) -> float:
        return (self.finished_s or time.monotonic()) - self.started_s


def _child(name: str, args_json: str) -> None:
    """The child process: run the task, writing ["progress", text]..., then ["done", answer] or ["failed", why]."""
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # the task's own prints stay off the channel

    def send(kind: str, value: Any) -> None:
        channel.write(json.dumps([kind, value]) + "\n")

    try:
        module, _, function = name.partition(":")
        task = getattr(importlib.import_module(module), function)
        send(
            "done",
            list(
                task(
                    *json.loads(args_json), progress=lambda message: send("progress", str(message))
                )
            ),
        )
    except Exception as error:  # a bug, not a user error: reported whole, never raised in the page
        send("failed", f"{type(error).__name__}: {error}")


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
