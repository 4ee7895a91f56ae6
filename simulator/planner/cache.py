"""Outcomes cached by job hash: in memory for one plan, and on disk when the user names a folder, so
re-planning after a change re-simulates only the scenarios that changed.

The key is the sha256 of the job's canonical JSON (scenario, share, step scale, goodput, early stop),
the outcome format's version (`outcome.OUTCOME_VERSION`) and `inputs_fingerprint`: what the scenario
resolves to outside its own JSON (the hardware catalog with the user's overrides, the shipped
calibrations and engine profiles, files it names by path), so a catalog fix or a refit is a new key
rather than a stale answer. One JSON file per outcome on disk.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from simulator.planner.outcome import Outcome


@functools.cache
def _shipped_fingerprint() -> str:
    from simulator.calibration.engine_profile import PROFILES_DIR
    from simulator.calibration.schema import SHIPPED_DIR
    from simulator.hardware.catalog import load_catalog

    digest = hashlib.sha256()
    for spec in sorted(load_catalog().values(), key=lambda spec: spec.name):
        digest.update(spec.model_dump_json().encode())
    for folder in (SHIPPED_DIR, PROFILES_DIR):
        for path in sorted(folder.glob("*.json")):
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def inputs_fingerprint(scenario: dict) -> str:
    """sha256 of the shipped data (`_shipped_fingerprint`, once a process) and of every JSON file the
    scenario names as a calibration or engine profile."""
    digest = hashlib.sha256(_shipped_fingerprint().encode())
    stack = [scenario]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("calibration", "engine_profile") and isinstance(value, str):
                    path = Path(value)
                    if path.suffix == ".json" and path.is_file():
                        digest.update(value.encode() + path.read_bytes())
                else:
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return digest.hexdigest()


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
