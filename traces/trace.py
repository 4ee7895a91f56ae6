"""`Trace`: an ordered, immutable request stream held as numpy columns."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from traces.frozen import freeze_hash_ids
from traces.request import DEFAULT_TENANT, LoadReport, RequestSpec, TraceFormatError

_COLUMNS = (
    "arrival_s",
    "prompt_tokens",
    "output_tokens",
    "tenant",
    "priority",
    "failed",
    "source_line",
)


def _frozen(values: Any, dtype: Any) -> np.ndarray:
    array = np.array(values, dtype=dtype, copy=True)
    array.setflags(write=False)
    return array


class Trace:
    """Requests sorted by arrival. Columns are read-only numpy arrays; transforms return new traces.

    `hash_ids` is None or one read-only list of block ids per request (block size `hash_block_size`).
    `provenance` lists where the data came from and every step applied to it, oldest first.
    """

    __slots__ = (
        "arrival_s",
        "prompt_tokens",
        "output_tokens",
        "tenant",
        "priority",
        "failed",
        "source_line",
        "hash_ids",
        "hash_block_size",
        "name",
        "provenance",
        "load_report",
        "_flat_hash_cache",
    )

    def __init__(
        self,
        arrival_s: Any,
        prompt_tokens: Any,
        output_tokens: Any,
        *,
        hash_ids: Sequence[Sequence[int]] | None = None,
        hash_block_size: int | None = None,
        tenant: Any = None,
        priority: Any = None,
        failed: Any = None,
        source_line: Any = None,
        name: str = "trace",
        provenance: Iterable[str] = (),
        load_report: LoadReport | None = None,
    ) -> None:
        n = len(arrival_s)
        self.arrival_s = _frozen(arrival_s, np.float64)
        self.prompt_tokens = _frozen(prompt_tokens, np.int64)
        self.output_tokens = _frozen(output_tokens, np.int64)
        self.tenant = _frozen(np.full(n, DEFAULT_TENANT) if tenant is None else tenant, np.str_)
        self.priority = _frozen(np.zeros(n) if priority is None else priority, np.int64)
        self.failed = _frozen(np.zeros(n) if failed is None else failed, np.bool_)
        self.source_line = _frozen(np.full(n, -1) if source_line is None else source_line, np.int64)
        self.hash_ids = None if hash_ids is None else freeze_hash_ids(hash_ids)
        self.hash_block_size = hash_block_size
        self.name = name
        self.provenance = tuple(provenance)
        self.load_report = load_report
        self._flat_hash_cache: tuple[np.ndarray, np.ndarray] | None = None
        self._check()

    def _check(self) -> None:
        n = len(self.arrival_s)
        for column in _COLUMNS:
            if getattr(self, column).shape != (n,):
                raise TraceFormatError(
                    f"trace {self.name!r}: column {column} has shape "
                    f"{getattr(self, column).shape}; expected ({n},) like arrival_s"
                )
        if self.hash_ids is not None and len(self.hash_ids) != n:
            raise TraceFormatError(
                f"trace {self.name!r}: {len(self.hash_ids)} hash_ids lists "
                f"for {n} requests; expected one list per request"
            )
        if (self.hash_ids is None) != (self.hash_block_size is None):
            raise TraceFormatError(f"trace {self.name!r}: hash_ids and hash_block_size go together")
        if self.hash_block_size is not None and self.hash_block_size < 1:
            raise TraceFormatError(
                f"trace {self.name!r}: hash_block_size is {self.hash_block_size}; expected ≥ 1"
            )
        self._check_values()

    def _check_values(self) -> None:
        if not np.all(np.isfinite(self.arrival_s)) or np.any(self.arrival_s < 0):
            raise TraceFormatError(f"trace {self.name!r}: arrival_s must be finite and ≥ 0")
        if np.any(np.diff(self.arrival_s) < 0):
            raise TraceFormatError(
                f"trace {self.name!r}: arrival_s must be sorted (non-decreasing)"
            )
        if np.any(self.prompt_tokens < 1):
            raise TraceFormatError(f"trace {self.name!r}: prompt_tokens must be ≥ 1")
        if np.any(self.output_tokens < 0):
            raise TraceFormatError(f"trace {self.name!r}: output_tokens must be ≥ 0")

    # ---- the sequence protocol -------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.arrival_s)

    def __iter__(self) -> Iterator[RequestSpec]:
        return (self.request(i) for i in range(len(self)))

    def __getitem__(self, key: int | slice | np.ndarray) -> RequestSpec | Trace:
        if isinstance(key, (int, np.integer)):
            return self.request(int(key))
        return self.select(key)

    def request(self, index: int) -> RequestSpec:
        if not -len(self) <= index < len(self):
            raise IndexError(f"request {index} out of range for a trace of {len(self)} requests")
        hash_ids = None if self.hash_ids is None else tuple(self.hash_ids[index])
        return RequestSpec(
            arrival_s=float(self.arrival_s[index]),
            prompt_tokens=int(self.prompt_tokens[index]),
            output_tokens=int(self.output_tokens[index]),
            hash_ids=hash_ids,
            hash_block_size=self.hash_block_size if hash_ids is not None else None,
            tenant=str(self.tenant[index]),
            priority=int(self.priority[index]),
            failed=bool(self.failed[index]),
            source_line=int(self.source_line[index]),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trace):
            return NotImplemented
        same_columns = all(np.array_equal(getattr(self, c), getattr(other, c)) for c in _COLUMNS)
        return (
            same_columns
            and self.hash_ids == other.hash_ids
            and self.hash_block_size == other.hash_block_size
            and self.name == other.name
            and self.provenance == other.provenance
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Trace(name={self.name!r}, requests={len(self)}, duration_s={self.duration_s:.1f}, "
            f"hash_ids={'yes' if self.hash_ids is not None else 'no'})"
        )

    # ---- derived views ---------------------------------------------------------------------
    @property
    def duration_s(self) -> float:
        """Span from the first to the last arrival (0 for fewer than two requests)."""
        return float(self.arrival_s[-1] - self.arrival_s[0]) if len(self) > 1 else 0.0

    def flat_hash_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """All hash ids end to end, and each request's start offset into them (length n + 1)."""
        if self.hash_ids is None:
            raise TraceFormatError(f"trace {self.name!r} has no hash_ids")
        if self._flat_hash_cache is None:
            counts = np.fromiter((len(ids) for ids in self.hash_ids), np.int64, len(self))
            offsets = np.concatenate(([0], np.cumsum(counts)))
            flat = np.fromiter(
                (i for ids in self.hash_ids for i in ids), np.int64, int(offsets[-1])
            )
            self._flat_hash_cache = (_frozen(flat, np.int64), _frozen(offsets, np.int64))
        return self._flat_hash_cache

    def columns(self) -> dict[str, Any]:
        """Everything needed to rebuild this trace with `Trace(**columns)`."""
        data: dict[str, Any] = {c: getattr(self, c) for c in _COLUMNS}
        return data | {
            "hash_ids": self.hash_ids,
            "hash_block_size": self.hash_block_size,
            "name": self.name,
            "provenance": self.provenance,
        }

    # ---- building new traces ---------------------------------------------------------------
    def replace(self, step: str | None = None, **changes: Any) -> Trace:
        """A copy with some columns or metadata changed; `step` is appended to the provenance."""
        data = self.columns() | changes
        if step is not None:
            data["provenance"] = tuple(data["provenance"]) + (step,)
        data.setdefault("load_report", self.load_report)
        return Trace(**data)

    def select(self, key: slice | np.ndarray | Sequence[int], step: str | None = None) -> Trace:
        """The requests picked by a slice, a boolean mask or indices (kept in arrival order)."""
        indices = np.arange(len(self))[key] if isinstance(key, slice) else np.asarray(key)
        if indices.dtype == np.bool_:
            indices = np.flatnonzero(indices)
        indices = indices.astype(np.int64)
        indices = np.sort(np.where(indices < 0, indices + len(self), indices))
        changes: dict[str, Any] = {c: getattr(self, c)[indices] for c in _COLUMNS}
        if self.hash_ids is not None:
            changes["hash_ids"] = [self.hash_ids[i] for i in indices]
        return self.replace(step, **changes)

    @classmethod
    def from_requests(
        cls, requests: Iterable[RequestSpec], name: str = "trace", provenance: Iterable[str] = ()
    ) -> Trace:
        items = sorted(requests, key=lambda r: r.arrival_s)
        with_hashes = [r for r in items if r.hash_ids is not None]
        block_sizes = {r.hash_block_size for r in with_hashes}
        if len(block_sizes) > 1:
            raise TraceFormatError(
                f"requests mix hash block sizes {sorted(block_sizes)}; expected one"
            )
        hash_ids = [list(r.hash_ids or ()) for r in items] if with_hashes else None
        return cls(
            [r.arrival_s for r in items],
            [r.prompt_tokens for r in items],
            [r.output_tokens for r in items],
            hash_ids=hash_ids,
            hash_block_size=block_sizes.pop() if block_sizes else None,
            tenant=[r.tenant for r in items],
            priority=[r.priority for r in items],
            failed=[r.failed for r in items],
            source_line=[r.source_line for r in items],
            name=name,
            provenance=provenance,
        )

    def save(self, path: str | Path, format: str | None = None) -> Path:
        """Write the canonical JSONL (default) or CSV form; `load_trace` reads it back identically."""
        from traces.canonical_writer import save_canonical

        return save_canonical(self, Path(path), format)
