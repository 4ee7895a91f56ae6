"""The measured quality cost of each KV cache dtype, as `benchmarks/kv_cache_quality.py` wrote it to
`simulator/data/kv_cache_quality.json` (KL divergence of next-token distributions, top-1 agreement
and
perplexity on held-out text, quantised cache vs the model-dtype cache, on a small model trained
locally).
The planner and the dashboard show it beside what each dtype buys."""

import functools
import json
from pathlib import Path

QUALITY_FILE = Path(__file__).parent / "data" / "kv_cache_quality.json"


@functools.lru_cache(maxsize=1)
def quality_table() -> dict:
    """{"model", "hardware", "date", "rows": {kv_cache_dtype: {...}}}; empty rows when not measured
    yet."""
    if not QUALITY_FILE.is_file():
        return {"rows": {}}
    return json.loads(QUALITY_FILE.read_text())


def measured_quality(kv_cache_dtype: str) -> dict | None:
    """The row for `kv_cache_dtype` (fp8 is fp8_e4m3), labelled measured with its model; None if
    absent."""
    name = "fp8_e4m3" if kv_cache_dtype == "fp8" else kv_cache_dtype
    table = quality_table()
    row = table["rows"].get(name)
    if row is None:
        return None
    return row | {
        "label": "measured",
        "model": table.get("model"),
        "source": "benchmarks/kv_cache_quality.py",
    }
