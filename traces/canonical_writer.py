"""Writing surgeplan's own trace files (JSONL and CSV); `traces.canonical` reads them back identically.

JSONL: a header object `{"surgeplan_trace": 1, "name", "provenance", "hash_block_size"}`, then one
request object per line. CSV: the same header after `# surgeplan-trace ` on line 1, the column
names on line 2, one request per line after that (hash ids space-separated). Takes any object with a
`Trace`'s columns, so `Trace.save` can call it without an import cycle.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from traces.trace import Trace

VERSION = 1
CSV_MARKER = "# surgeplan-trace "
CSV_COLUMNS = (
    "arrival_s",
    "prompt_tokens",
    "output_tokens",
    "tenant",
    "priority",
    "failed",
    "source_line",
    "hash_ids",
)
SUFFIX_FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}


def _header(trace: Trace) -> dict[str, Any]:
    return {
        "surgeplan_trace": VERSION,
        "name": trace.name,
        "provenance": list(trace.provenance),
        "hash_block_size": trace.hash_block_size,
    }


def save_canonical(trace: Trace, path: Path, format: str | None = None) -> Path:
    chosen = format or SUFFIX_FORMATS.get(path.suffix.lower())
    if chosen not in ("jsonl", "csv"):
        raise ValueError(
            f"cannot tell the format of {path}: suffix {path.suffix!r}, format {format!r}; "
            f"expected a suffix in {sorted(SUFFIX_FORMATS)} or format 'jsonl' or 'csv'"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    (_save_jsonl if chosen == "jsonl" else _save_csv)(trace, path)
    return path


def _row_values(trace: Trace) -> zip:
    return zip(
        trace.arrival_s.tolist(),
        trace.prompt_tokens.tolist(),
        trace.output_tokens.tolist(),
        trace.tenant.tolist(),
        trace.priority.tolist(),
        trace.failed.tolist(),
        trace.source_line.tolist(),
        trace.hash_ids or [None] * len(trace),
    )


def _hash_suffix(hash_ids: list[int] | None) -> str:
    return "" if hash_ids is None else f', "hash_ids": {list(hash_ids)}'


def _jsonl_lines(trace: Trace) -> list[str]:
    tenant_json = {t: json.dumps(t) for t in np.unique(trace.tenant).tolist()}
    # Formatted by hand: json.dumps per request is several times slower on million-request traces.
    return [
        f'{{"arrival_s": {arrival!r}, "prompt_tokens": {prompt}, "output_tokens": {output}, '
        f'"tenant": {tenant_json[tenant]}, "priority": {priority}, '
        f'"failed": {"true" if failed else "false"}, "source_line": {line}{_hash_suffix(hash_ids)}}}\n'
        for arrival, prompt, output, tenant, priority, failed, line, hash_ids in _row_values(trace)
    ]


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
            writer.writerow(
                (repr(arrival), prompt, output, tenant, priority, int(failed), line, hashes)
            )
