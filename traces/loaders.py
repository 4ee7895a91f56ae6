"""`load_trace`: one front door for every supported trace file, with format auto-detection."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

from traces import formats
from traces.canonical import CSV_MARKER, load_canonical_csv, load_canonical_jsonl
from traces.request import MOONCAKE_BLOCK_SIZE, TraceFormatError
from traces.rows import RowCollector, open_text
from traces.trace import Trace

FORMATS = ("azure", "burstgpt", "mooncake", "vidur", "surgeplan-jsonl", "surgeplan-csv")
FORMAT_ALIASES = {
    "azure2023": "azure",
    "azure2024": "azure",
    "jsonl": "surgeplan-jsonl",
    "csv": "surgeplan-csv",
    "canonical-jsonl": "surgeplan-jsonl",
    "canonical-csv": "surgeplan-csv",
}
_HEADER_FORMATS = (
    ("azure", formats.AZURE_COLUMNS),
    ("burstgpt", formats.BURSTGPT_COLUMNS),
    ("vidur", formats.VIDUR_COLUMNS),
)


def _first_line(path: Path) -> str:
    with open_text(path) as handle:
        for line in handle:
            if line.strip():
                return line.strip()
    raise TraceFormatError(f"{path}: the file is empty; expected a trace with a header or records")


def _detect_json_line(path: Path, line: str) -> str:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        record = None
    if isinstance(record, dict) and "surgeplan_trace" in record:
        return "surgeplan-jsonl"
    if isinstance(record, dict) and {"timestamp", "input_length", "output_length"} <= record.keys():
        return "mooncake"
    raise TraceFormatError(
        f"{path}:1: a JSON line that is neither a surgeplan trace header nor a "
        f"Mooncake record; expected the keys {list(formats.MOONCAKE_KEYS)} (hash_ids optional)"
    )


def detect_format(path: str | Path) -> str:
    """The format name for a file, from its first non-blank line."""
    path = Path(path)
    line = _first_line(path)
    if line.startswith(CSV_MARKER.strip()):
        return "surgeplan-csv"
    if line.startswith("{"):
        return _detect_json_line(path, line)
    header = {formats.normalise(c) for c in line.split(",")}
    for name, columns in _HEADER_FORMATS:
        if {formats.normalise(c) for c in columns} <= header:
            return name
    accepted = "; ".join(f"{name}: {','.join(columns)}" for name, columns in _HEADER_FORMATS)
    raise TraceFormatError(
        f"{path}:1: cannot tell the trace format from {line[:120]!r}; expected a CSV "
        f"header ({accepted}), a Mooncake JSON line, or a surgeplan trace"
    )


def _file_provenance(path: Path, format_name: str) -> str:
    # Hash the stored bytes (compressed or not): that is what identifies the file.
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return f"loaded {format_name} trace {path.name} (sha256 {digest[:16]})"


def _stem(path: Path) -> str:
    """`conv` for conv.csv and for conv.csv.gz."""
    return Path(path.name.removesuffix(".gz")).stem


def _resolve_format(path: Path, format: str | None) -> str:
    if format is None:
        return detect_format(path)
    name = FORMAT_ALIASES.get(format.lower(), format.lower())
    if name not in FORMATS:
        raise ValueError(
            f"unknown trace format {format!r}; expected one of {list(FORMATS)} "
            f"or an alias in {sorted(FORMAT_ALIASES)}"
        )
    return name


def load_trace(
    path: str | Path,
    format: str | None = None,
    skip_bad_rows: bool = False,
    *,
    model: str | None = None,
    drop_failed: bool = False,
    name: str | None = None,
) -> Trace:
    """Read a trace file into a `Trace` (arrivals in seconds from the trace start, sorted).

    format: None to detect it, or one of FORMATS (aliases: azure2023, azure2024, jsonl, csv).
    skip_bad_rows: skip malformed rows instead of raising; `trace.load_report` counts them and
        keeps the first few messages.
    model, drop_failed: BurstGPT only: keep one `Model`; drop failed requests (0 response tokens)
        instead of keeping them flagged in `trace.failed`.
    Plain or gzip-compressed (`.gz`) UTF-8 files are read.
    """
    try:
        return _load(Path(path), format, skip_bad_rows, model, drop_failed, name)
    except (UnicodeDecodeError, EOFError, gzip.BadGzipFile) as error:
        raise TraceFormatError(
            f"{path}: cannot be read as UTF-8 text ({error}); expected a CSV or "
            f"JSONL trace, optionally gzip-compressed"
        ) from None


def _load(
    path: Path,
    format: str | None,
    skip_bad_rows: bool,
    model: str | None,
    drop_failed: bool,
    name: str | None,
) -> Trace:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such trace file")
    format_name = _resolve_format(path, format)
    if format_name != "burstgpt" and (model is not None or drop_failed):
        raise ValueError(
            f"model= and drop_failed= apply to BurstGPT traces; {path} is {format_name}"
        )
    collector = RowCollector(path, format_name, skip_bad_rows)
    if format_name in ("surgeplan-jsonl", "surgeplan-csv"):
        load_canonical = (
            load_canonical_jsonl if format_name == "surgeplan-jsonl" else load_canonical_csv
        )
        trace = load_canonical(collector, path)
        return trace if name is None else trace.replace(name=name)
    arrival_s, block_size = None, None
    if format_name == "azure":
        arrival_s = formats.read_azure(collector, path)
    elif format_name == "burstgpt":
        formats.read_burstgpt(collector, path, model=model, drop_failed=drop_failed)
    elif format_name == "vidur":
        formats.read_vidur(collector, path)
    else:
        block_size = MOONCAKE_BLOCK_SIZE if formats.read_mooncake(collector, path) else None
    return collector.build(
        name or _stem(path),
        (_file_provenance(path, format_name),),
        hash_block_size=block_size,
        arrival_s=arrival_s,
    )
