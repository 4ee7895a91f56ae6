"""Outcomes cached by job hash: in memory for one plan, and on disk when the user names a folder, so
re-planning after a change re-simulates only the scenarios that changed.

The key is the sha256 of the job's canonical JSON (scenario, share, step scale, goodput, early stop)
and the outcome format's version (`outcome.OUTCOME_VERSION`); one JSON file per outcome on disk.
"""

from __future__ import annotations

import json
from pathlib import Path

from simulator.planner.outcome import Outcome


class OutcomeCache:
    def __init__(self, directory: str | Path | None = None):
        self.memory: dict[str, Outcome] = {}
        self.directory = Path(directory) if directory is not None else None
        if self.directory is not None:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise ValueError(
                    f"cache dir {self.directory}: cannot create it ({error.strerror}); "
                    "expected a writable folder"
                ) from None
        self.hits = self.misses = 0

    def get(self, key: str) -> Outcome | None:
        outcome = self.memory.get(key)
        if outcome is None and self.directory is not None:
            path = self.directory / f"{key}.json"
            try:
                outcome = Outcome.from_json(json.loads(path.read_text()))
            except (OSError, json.JSONDecodeError, TypeError):
                outcome = None  # absent or half-written: simulate again
            if outcome is not None:
                self.memory[key] = outcome
        if outcome is None:
            self.misses += 1
        else:
            self.hits += 1
        return outcome

    def put(self, key: str, outcome: Outcome) -> None:
        self.memory[key] = outcome
        if self.directory is not None:
            path = self.directory / f"{key}.json"
            temporary = path.with_suffix(".tmp")
            temporary.write_text(json.dumps(outcome.to_json()))
            temporary.replace(path)  # atomic: a reader never sees half a file
