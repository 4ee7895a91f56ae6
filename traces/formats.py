"""Readers for the public trace formats: Azure LLM inference (2023/2024), BurstGPT, Mooncake, Vidur.

Each reader fills a `RowCollector`; the loader front door (`traces.loaders`) picks the reader.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from traces.request import TraceFormatError
from traces.rows import (
    FieldError,
    RowCollector,
    jsonl_objects,
    open_text,
    parse_count,
    parse_seconds,
    parse_timestamp_ns,
)

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
BURSTGPT_COLUMNS = (
    "Timestamp",
    "Model",
    "Request tokens",
    "Response tokens",
    "Total tokens",
    "Log Type",
)
VIDUR_COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")
MOONCAKE_KEYS = (
    "timestamp",
    "input_length",
    "output_length",
)  # and `hash_ids`, when prompts share blocks


def normalise(column: str) -> str:
    return column.strip().lower()


def csv_rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str] | str]]:
    """(line number, {normalised column: text}) for each non-blank data row of a CSV file; a row
    with the wrong number of fields comes as a message instead, for the caller to report."""
    with open_text(path) as handle:
        reader = csv.reader(handle)
        header = [normalise(c) for c in next(reader, [])]
        missing = [c for c in required if normalise(c) not in header]
        if missing:
            raise TraceFormatError(
                f"{path}:1: header {header} lacks columns {missing}; expected {list(required)}"
            )
        for fields in reader:
            if not fields or fields == [""]:
                continue
            if len(fields) != len(header):
                yield (
                    reader.line_num,
                    (
                        f"row has {len(fields)} fields; expected {len(header)} "
                        f"like the header {header}"
                    ),
                )
                continue
            yield reader.line_num, dict(zip(header, fields))


def _collect_csv(
    collector: RowCollector,
    path: Path,
    required: tuple[str, ...],
    parse_row: Callable[[int, dict[str, str]], None],
) -> None:
    for line, row in csv_rows(path, required):
        collector.rows_read += 1
        if isinstance(row, str):
            collector.bad_row(line, row)
            continue
        try:
            parse_row(line, row)
        except FieldError as error:
            collector.bad_row(line, str(error))


def read_azure(collector: RowCollector, path: Path) -> np.ndarray:
    """Azure rows; returns arrivals in seconds from the earliest timestamp of the file."""

    def parse_row(line: int, row: dict[str, str]) -> None:
        time_ns = parse_timestamp_ns("TIMESTAMP", row["timestamp"])
        prompt = parse_count("ContextTokens", row["contexttokens"], minimum=1)
        output = parse_count("GeneratedTokens", row["generatedtokens"])
        collector.add(line, time_ns, prompt, output)

    _collect_csv(collector, path, AZURE_COLUMNS, parse_row)
    times_ns = np.asarray(collector.arrival, dtype=np.int64)
    # Subtract in integer nanoseconds first: epoch seconds as float64 would lose sub-microsecond digits.
    return (times_ns - times_ns.min()) / 1e9 if len(times_ns) else np.zeros(0)


def read_burstgpt(
    collector: RowCollector, path: Path, model: str | None = None, drop_failed: bool = False
) -> None:
    """BurstGPT rows; 0 response tokens marks a failed request (flagged, or dropped on request)."""

    def parse_row(line: int, row: dict[str, str]) -> None:
        arrival = parse_seconds("Timestamp", row["timestamp"])
        prompt = parse_count("Request tokens", row["request tokens"], minimum=1)
        output = parse_count("Response tokens", row["response tokens"])
        if (model is not None and row["model"].strip() != model) or (drop_failed and output == 0):
            collector.rows_filtered += 1
            return
        collector.add(line, arrival, prompt, output, failed=output == 0)

    _collect_csv(collector, path, BURSTGPT_COLUMNS, parse_row)


def read_vidur(collector: RowCollector, path: Path) -> None:
    """Vidur's processed traces; extra columns (num_total_tokens, pd_ratio, ...) are ignored."""

    def parse_row(line: int, row: dict[str, str]) -> None:
        arrival = parse_seconds("arrived_at", row["arrived_at"])
        prompt = parse_count("num_prefill_tokens", row["num_prefill_tokens"], minimum=1)
        output = parse_count("num_decode_tokens", row["num_decode_tokens"])
        collector.add(line, arrival, prompt, output)

    _collect_csv(collector, path, VIDUR_COLUMNS, parse_row)


def _parse_hash_ids(value: object) -> list[int]:
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in value
    ):
        raise FieldError("hash_ids", value, "a list of integers")
    return value


def read_mooncake(collector: RowCollector, path: Path) -> bool:
    """Mooncake FAST'25 JSONL: `timestamp` in milliseconds, one hash id per 512-token block. Records
    without `hash_ids` (how many request logs look: time and lengths only) are accepted; then no two
    prompts are known to share a block, and the load report says so. True when every record kept has
    hash ids (the trace keeps them), False otherwise (it keeps none)."""
    without = 0
    for line, record in jsonl_objects(path):
        collector.rows_read += 1
        if isinstance(record, str):
            collector.bad_row(line, record)
            continue
        try:
            missing = [k for k in MOONCAKE_KEYS if k not in record]
            if missing:
                raise FieldError(
                    missing[0],
                    "absent",
                    f"every Mooncake record to have {list(MOONCAKE_KEYS)} "
                    "(and hash_ids for prefix sharing)",
                )
            arrival = parse_seconds("timestamp", record["timestamp"], units_per_s=1000.0)
            prompt = parse_count("input_length", record["input_length"], minimum=1)
            output = parse_count("output_length", record["output_length"])
            hash_ids = _parse_hash_ids(record["hash_ids"]) if "hash_ids" in record else None
        except FieldError as error:
            collector.bad_row(line, str(error))
            continue
        without += hash_ids is None
        collector.add(line, arrival, prompt, output, hash_ids=hash_ids)
    if without:
        collector.notes.append(
            f"{without} of {len(collector.arrival)} records have no hash_ids: no prefix "
            "sharing is known, so the trace carries no block hashes"
        )
    return without == 0
