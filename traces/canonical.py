"""Reading surgeplan's own trace files (JSONL and CSV): every column and the metadata, as written by
`traces.canonical_writer`.

JSONL: a header object `{"surgeplan_trace": 1, "name", "provenance", "hash_block_size"}`, then one
request object per line. CSV: the same header after `# surgeplan-trace ` on line 1, the column
names on line 2, one request per line after that (hash ids space-separated).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np

from traces.canonical_writer import CSV_COLUMNS, CSV_MARKER, VERSION
from traces.request import TraceFormatError
from traces.rows import (
    FieldError,
    RowCollector,
    jsonl_objects,
    open_text,
    parse_count,
    parse_seconds,
)
from traces.trace import Trace


def _check_header(path: Path, header: object) -> dict[str, Any]:
    if not isinstance(header, dict) or header.get("surgeplan_trace") != VERSION:
        raise TraceFormatError(
            f"{path}:1: header is {header!r}; expected a surgeplan trace header "
            f"with surgeplan_trace = {VERSION}"
        )
    return header


def _parse_int(field: str, value: object) -> int:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise FieldError(field, value, "an integer") from None


def _parse_flag(value: object) -> bool:
    if value in (True, False, "0", "1"):
        return value in (True, "1")
    raise FieldError("failed", value, "true/false (JSONL) or 0/1 (CSV)")


def _add_record(
    collector: RowCollector, record: dict[str, Any], hash_ids: list[int] | None
) -> None:
    """Parse every field first, so a bad field leaves nothing half-added."""
    tenant = record.get("tenant")
    if not isinstance(tenant, str):
        raise FieldError("tenant", tenant, "a string")
    arrival = parse_seconds("arrival_s", record.get("arrival_s"))
    prompt = parse_count("prompt_tokens", record.get("prompt_tokens"), minimum=1)
    output = parse_count("output_tokens", record.get("output_tokens"))
    failed = _parse_flag(record.get("failed"))
    priority = _parse_int("priority", record.get("priority"))
    # The saved source line points into the file the request first came from; keep it.
    source_line = _parse_int("source_line", record.get("source_line"))
    collector.add(
        source_line,
        arrival,
        prompt,
        output,
        failed=failed,
        tenant=tenant,
        priority=priority,
        hash_ids=hash_ids,
    )


def _json_hash_ids(record: dict[str, Any]) -> list[int]:
    value = record.get("hash_ids")
    if not isinstance(value, list) or not all(type(i) is int for i in value):
        raise FieldError("hash_ids", value, "a list of integers (the header gives hash_block_size)")
    return value


def load_canonical_jsonl(collector: RowCollector, path: Path) -> Trace:
    objects = jsonl_objects(path)
    first = next(objects, (1, None))
    header = _check_header(path, first[1])
    with_hashes = header.get("hash_block_size") is not None
    for line, record in objects:
        collector.rows_read += 1
        if isinstance(record, str):
            collector.bad_row(line, record)
            continue
        try:
            _add_record(collector, record, _json_hash_ids(record) if with_hashes else None)
        except FieldError as error:
            collector.bad_row(line, str(error))
    return _build(collector, header)


def _csv_hash_ids(text: str) -> list[int]:
    try:
        return [int(i) for i in text.split()]
    except ValueError:
        raise FieldError("hash_ids", text, "integers separated by spaces") from None


def load_canonical_csv(collector: RowCollector, path: Path) -> Trace:
    with open_text(path) as handle:
        first = handle.readline()
        try:
            header = json.loads(first[len(CSV_MARKER) :]) if first.startswith(CSV_MARKER) else None
        except json.JSONDecodeError:
            header = None
        header = _check_header(path, header)
        with_hashes = header.get("hash_block_size") is not None
        reader = csv.reader(handle)
        columns = next(reader, [])
        if tuple(columns) != CSV_COLUMNS:
            raise TraceFormatError(f"{path}:2: columns are {columns}; expected {list(CSV_COLUMNS)}")
        for fields in reader:
            line = reader.line_num + 1  # the reader started counting after the marker line
            if not fields:
                continue
            collector.rows_read += 1
            try:
                if len(fields) != len(CSV_COLUMNS):
                    raise FieldError("row", f"{len(fields)} fields", f"{len(CSV_COLUMNS)} fields")
                record = dict(zip(CSV_COLUMNS, fields))
                _add_record(
                    collector, record, _csv_hash_ids(record["hash_ids"]) if with_hashes else None
                )
            except FieldError as error:
                collector.bad_row(line, str(error))
    return _build(collector, header)


def _build(collector: RowCollector, header: dict[str, Any]) -> Trace:
    if collector.rows_read == 0:
        return Trace(
            np.zeros(0),
            np.zeros(0),
            np.zeros(0),
            name=str(header.get("name", "trace")),
            provenance=header.get("provenance", ()),
            load_report=collector.report(),
            hash_ids=[] if header.get("hash_block_size") else None,
            hash_block_size=header.get("hash_block_size"),
        )
    return collector.build(
        str(header.get("name", "trace")),
        tuple(header.get("provenance", ())),
        hash_block_size=header.get("hash_block_size"),
    )
