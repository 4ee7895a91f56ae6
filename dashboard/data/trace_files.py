"""Traces for the Traces and What-if pages: the shared public traces, uploads kept by content hash,
synthetic spikes; each described (rate per window, lengths, lognormal fits) for the charts, or
the reason it cannot be read."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import numpy as np
import streamlit as st

from dashboard.data.saved_files import ROOT
from traces import compute_stats, detect_format, load_trace, spike_trace
from traces.lengths import fit_trace_lengths
from traces.stats import rate_per_window

SHARED_TRACES = ROOT.parent / "shared" / "traces"
UPLOADS = Path(tempfile.gettempdir()) / "surgeplan-dashboard-uploads"


def shared_traces() -> list[Path]:
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(
        p for p in SHARED_TRACES.iterdir() if p.suffix in (".csv", ".jsonl", ".gz") and p.is_file()
    )


def _describe(trace, format_name: str, window_s: float, path: str | None = None) -> dict:
    stats = compute_stats(trace, window_s)
    starts, rates = rate_per_window(trace, window_s)
    fits = fit_trace_lengths(trace) if len(trace) else {}
    rng = np.random.default_rng(0)
    keep = rng.choice(len(trace), size=min(len(trace), 20000), replace=False) if len(trace) else []
    return {
        "format": format_name,
        "path": path,
        "stats": stats.model_dump(),
        "starts": starts.tolist(),
        "rates": rates.tolist(),
        "prompt": trace.prompt_tokens[keep].tolist(),
        "output": trace.output_tokens[keep].tolist(),
        "lognormal": {k: v["lognormal_median_sigma"] for k, v in fits.items()},
    }


def _load_and_describe(path: str, window_s: float) -> tuple[dict | None, str | None]:
    try:
        return _describe(load_trace(path), detect_format(path), window_s, path), None
    except (ValueError, OSError) as error:  # TraceFormatError is a ValueError
        return None, str(error)


@st.cache_data(max_entries=16, show_spinner=False)
def trace_file(path: str, mtime: float, window_s: float) -> tuple[dict | None, str | None]:
    """A trace file described (`mtime` keys the cache to the file's version)."""
    return _load_and_describe(path, window_s)


def keep_upload(data: bytes, filename: str) -> Path:
    """An uploaded file written where later runs and other pages can read it: a folder named by the
    content's hash, so one content is written once and a scenario naming it always means the same bytes."""
    name = Path(filename).name or "upload"
    folder = UPLOADS / hashlib.sha256(data).hexdigest()[:16]
    path = folder / name
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return path


@st.cache_data(max_entries=8, show_spinner=False)
def trace_upload(data: bytes, filename: str, window_s: float) -> tuple[dict | None, str | None]:
    """An uploaded trace described (with the `path` it was kept at), or why it cannot be read."""
    path = keep_upload(data, filename)
    described, error = _load_and_describe(str(path), window_s)
    return described, error and error.replace(str(path), filename)


@st.cache_data(max_entries=16, show_spinner=False)
def trace_spike(
    baseline_rps: float,
    multiplier: float,
    duration_s: float,
    start_s: float,
    ramp_s: float,
    hold_s: float,
    window_s: float,
    seed: int = 0,
) -> tuple[dict | None, str | None]:
    try:
        trace = spike_trace(
            baseline_rps,
            multiplier,
            duration_s,
            start_s=start_s,
            ramp_up_s=ramp_s,
            hold_s=hold_s,
            ramp_down_s=ramp_s,
            seed=seed,
            name=f"{multiplier:g}x spike",
        )
    except ValueError as error:
        return None, str(error)
    return _describe(trace, "synthetic", window_s), None
