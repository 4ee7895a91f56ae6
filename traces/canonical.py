"""surgeplan's own trace files (JSONL and CSV): every column and the metadata, read back identically.

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

from traces.formats import jsonl_objects
from traces.request import TraceFormatError
from traces.rows import FieldError, RowCollector, open_text, parse_count, parse_seconds
from traces.trace import Trace

VERSION = 1
CSV_MARKER = "# surgeplan-trace "
CSV_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens", "tenant", "priority", "failed",
               "source_line", "hash_ids")
SUFFIX_FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}


def _header(trace: Trace) -> dict[str, Any]:
    return {"surgeplan_trace": VERSION, "name": trace.name, "provenance": list(trace.provenance),
            "hash_block_size": trace.hash_block_size}


def save_canonical(trace: Trace, path: Path, format: str | None = None) -> Path:
    chosen = format or SUFFIX_FORMATS.get(path.suffix.lower())
    if chosen not in ("jsonl", "csv"):
        raise ValueError(f"cannot tell the format of {path}: suffix {path.suffix!r}, format {format!r}; "
                         f"expected a suffix in {sorted(SUFFIX_FORMATS)} or format 'jsonl' or 'csv'")
    path.parent.mkdir(parents=True, exist_ok=True)
    (_save_jsonl if chosen == "jsonl" else _save_csv)(trace, path)
    return path


def _row_values(trace: Trace) -> zip:
    return zip(trace.arrival_s.tolist(), trace.prompt_tokens.tolist(), trace.output_tokens.tolist(),
               trace.tenant.tolist(), trace.priority.tolist(), trace.failed.tolist(),
               trace.source_line.tolist(), trace.hash_ids or [None] * len(trace))


def _hash_suffix(hash_ids: list[int] | None) -> str:
    return "" if hash_ids is None else f', "hash_ids": {list(hash_ids)}'


def _jsonl_lines(trace: Trace) -> list[str]:
    tenant_json = {t: json.dumps(t) for t in np.unique(trace.tenant).tolist()}
    # Formatted by hand: json.dumps per request is several times slower on million-request traces.
    return [f'{{"arrival_s": {arrival!r}, "prompt_tokens": {prompt}, "output_tokens": {output}, '
            f'"tenant": {tenant_json[tenant]}, "priority": {priority}, '
            f'"failed": {"true" if failed else "false"}, "source_line": {line}{_hash_suffix(hash_ids)}}}\n'
            for arrival, prompt, output, tenant, priority, failed, line, hash_ids in _row_values(trace)]


def _save_jsonl(trace: Trace, path: Path) -> None:
    with path.open("w", encoding="utf-8") as handle:
        handle.write(json.dumps(_header(trace)) + "\n")
        handle.writelines(_jsonl_lines(trace))


def _save_csv(trace: Trace, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        handle.write(CSV_MARKER + json.dumps(_header(trace)) + "\n")
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for arrival, prompt, output, tenant, priority, failed, line, hash_ids in _row_values(trace):
            hashes = "" if hash_ids is None else " ".join(map(str, hash_ids))
            writer.writerow((repr(arrival), prompt, output, tenant, priority, int(failed), line, hashes))


def _check_header(path: Path, header: object) -> dict[str, Any]:
    if not isinstance(header, dict) or header.get("surgeplan_trace") != VERSION:
        raise TraceFormatError(f"{path}:1: header is {header!r}; expected a surgeplan trace header "
                               f"with surgeplan_trace = {VERSION}")
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


def _add_record(collector: RowCollector, record: dict[str, Any], hash_ids: list[int] | None) -> None:
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
    collector.add(source_line, arrival, prompt, output, failed=failed, tenant=tenant, priority=priority,
                  hash_ids=hash_ids)


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
            header = json.loads(first[len(CSV_MARKER):]) if first.startswith(CSV_MARKER) else None
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
                _add_record(collector, record, _csv_hash_ids(record["hash_ids"]) if with_hashes else None)
            except FieldError as error:
                collector.bad_row(line, str(error))
    return _build(collector, header)


def _build(collector: RowCollector, header: dict[str, Any]) -> Trace:
    if collector.rows_read == 0:
        return Trace(np.zeros(0), np.zeros(0), np.zeros(0), name=str(header.get("name", "trace")),
                     provenance=header.get("provenance", ()), load_report=collector.report(),
                     hash_ids=[] if header.get("hash_block_size") else None,
                     hash_block_size=header.get("hash_block_size"))
    return collector.build(str(header.get("name", "trace")), tuple(header.get("provenance", ())),
                           hash_block_size=header.get("hash_block_size"))
