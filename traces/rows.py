"""Row-by-row parsing shared by the loaders: field parsers, and a collector that turns rows into a
`Trace` while either stopping at the first bad row or skipping bad rows and counting them."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

import numpy as np

from traces.request import DEFAULT_TENANT, LoadReport, TraceFormatError
from traces.trace import Trace

MAX_ERRORS_REPORTED = 5
_NS_PER_S = 1_000_000_000
_TIMESTAMP = re.compile(
    r"\s*(\d{4}-\d{2}-\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?\s*(Z|[+-]\d{2}:?\d{2})?\s*$"
)


def open_text(path: Path) -> IO[str]:
    """A trace file for reading as text; `.gz` files are decompressed on the fly."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", newline="", encoding="utf-8-sig")
    return path.open(newline="", encoding="utf-8-sig")


class FieldError(Exception):
    """One field of one row is wrong; the collector adds the file and line."""

    def __init__(self, field: str, value: Any, expected: str) -> None:
        super().__init__(f"{field} is {value!r}; expected {expected}")


def parse_count(field: str, text: str, minimum: int = 0) -> int:
    """A token count: an integer (or an integral float such as `12.0`) of at least `minimum`."""
    if isinstance(text, bool):
        raise FieldError(field, text, f"a count ≥ {minimum}")
    try:
        value = int(text) if isinstance(text, (str, int)) else _integral_float(field, text, minimum)
    except ValueError:
        value = _integral_float(field, text, minimum)
    if value < minimum:
        raise FieldError(field, text, f"a count ≥ {minimum}")
    return value


def _integral_float(field: str, text: Any, minimum: int) -> int:
    try:
        number = float(text)
    except (ValueError, TypeError):
        raise FieldError(field, text, f"a whole number ≥ {minimum}") from None
    if not number.is_integer():
        raise FieldError(field, text, f"a whole number ≥ {minimum}")
    return int(number)


def parse_seconds(field: str, text: Any, units_per_s: float = 1.0) -> float:
    """A finite, non-negative time in the file's unit (`units_per_s` of them make a second)."""
    try:
        if isinstance(text, bool):
            raise TypeError
        value = float(text) / units_per_s
    except (ValueError, TypeError):
        raise FieldError(field, text, "a number of seconds ≥ 0") from None
    if not np.isfinite(value) or value < 0:
        raise FieldError(field, text, "a number of seconds ≥ 0")
    return value


@lru_cache(maxsize=4096)
def _epoch_day(date_text: str) -> int:
    return dt.date.fromisoformat(date_text).toordinal() - dt.date(1970, 1, 1).toordinal()


def _zone_offset_s(zone: str | None) -> int:
    if zone is None or zone == "Z":
        return 0
    sign = -1 if zone[0] == "-" else 1
    digits = zone[1:].replace(":", "")
    return sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)


def parse_timestamp_ns(field: str, text: str) -> int:
    """`YYYY-MM-DD HH:MM:SS[.fraction][zone]` as integer nanoseconds since the epoch (UTC).

    Integer nanoseconds keep the 100 ns resolution of Azure's 7-digit fractions exact; a float of
    seconds since 1970 would not.
    """
    match = _TIMESTAMP.match(text)
    expected = "a time like 2023-11-16 18:17:03.9799600 (optional fraction digits and zone)"
    if match is None:
        raise FieldError(field, text, expected)
    date_text, hours, minutes, seconds, fraction, zone = match.groups()
    if int(hours) > 23 or int(minutes) > 59 or int(seconds) > 60:
        raise FieldError(field, text, expected)
    try:
        day = _epoch_day(date_text)
    except ValueError:
        raise FieldError(field, text, expected) from None
    whole_s = (
        day * 86400 + int(hours) * 3600 + int(minutes) * 60 + int(seconds) - _zone_offset_s(zone)
    )
    fraction_ns = int(fraction.ljust(9, "0")) if fraction else 0
    return whole_s * _NS_PER_S + fraction_ns


class RowCollector:
    """Gathers parsed rows as columns; bad rows raise at once unless `skip_bad_rows` is set."""

    def __init__(self, path: Path, format_name: str, skip_bad_rows: bool) -> None:
        self.path, self.format_name, self.skip_bad_rows = path, format_name, skip_bad_rows
        self.arrival: list[float] = []
        self.prompt: list[int] = []
        self.output: list[int] = []
        self.hash_ids: list[list[int]] = []
        self.failed: list[bool] = []
        self.lines: list[int] = []
        self.tenant: list[str] = []
        self.priority: list[int] = []
        self.rows_read = self.rows_skipped = self.rows_filtered = 0
        self.errors: list[str] = []
        self.notes: list[str] = []  # what the loader assumed or left out, for the load report

    def add(
        self,
        line: int,
        arrival: float,
        prompt: int,
        output: int,
        *,
        failed: bool = False,
        hash_ids: list[int] | None = None,
        tenant: str = DEFAULT_TENANT,
        priority: int = 0,
    ) -> None:
        self.arrival.append(arrival)
        self.prompt.append(prompt)
        self.output.append(output)
        self.failed.append(failed)
        self.lines.append(line)
        self.tenant.append(tenant)
        self.priority.append(priority)
        if hash_ids is not None:
            self.hash_ids.append(hash_ids)

    def bad_row(self, line: int, message: str) -> None:
        text = f"{self.path}:{line}: {message}"
        if not self.skip_bad_rows:
            raise TraceFormatError(text)
        self.rows_skipped += 1
        if len(self.errors) < MAX_ERRORS_REPORTED:
            self.errors.append(text)

    def report(self) -> LoadReport:
        return LoadReport(
            path=str(self.path),
            format=self.format_name,
            rows_read=self.rows_read,
            rows_kept=len(self.arrival),
            rows_skipped=self.rows_skipped,
            rows_filtered=self.rows_filtered,
            failed_requests=int(sum(self.failed)),
            first_errors=tuple(self.errors),
            notes=tuple(self.notes),
        )

    def build(
        self,
        name: str,
        provenance: tuple[str, ...],
        hash_block_size: int | None = None,
        arrival_s: np.ndarray | None = None,
    ) -> Trace:
        """The trace in arrival order (stable, so equal times keep file order)."""
        if self.rows_read == 0:
            raise TraceFormatError(f"{self.path}: no data rows; expected at least one request")
        arrival = np.asarray(self.arrival if arrival_s is None else arrival_s, dtype=np.float64)
        order = np.argsort(arrival, kind="stable")
        hash_ids = [self.hash_ids[i] for i in order] if hash_block_size is not None else None
        return Trace(
            arrival[order],
            np.asarray(self.prompt)[order],
            np.asarray(self.output)[order],
            hash_ids=hash_ids,
            hash_block_size=hash_block_size,
            tenant=np.asarray(self.tenant)[order],
            priority=np.asarray(self.priority)[order],
            failed=np.asarray(self.failed)[order],
            source_line=np.asarray(self.lines)[order],
            name=name,
            provenance=provenance,
            load_report=self.report(),
        )


def jsonl_objects(path: Path) -> Iterator[tuple[int, dict | str]]:
    """(line number, object) per non-blank line; a line that is not a JSON object yields a message."""
    with open_text(path) as handle:
        for line, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as error:
                yield line, f"is not valid JSON ({error.msg}); expected one JSON object per line"
                continue
            yield (
                line,
                record if isinstance(record, dict) else "is not a JSON object; expected {...}",
            )
