"""Request streams for surgeplan: real production traces, synthetic traffic, and their statistics.

`from traces import load_trace, Trace, RequestSpec` is the entry point other packages use.
"""

from traces.loaders import FORMATS, detect_format, load_trace
from traces.request import LoadReport, RequestSpec, TraceFormatError
from traces.stats import TraceStats, compute_stats
from traces.synthetic import SyntheticTraceSpec, spike_trace, synthesize
from traces.tokens import PromptTokenSynthesizer
from traces.trace import Trace

__all__ = [
    "FORMATS",
    "LoadReport",
    "PromptTokenSynthesizer",
    "RequestSpec",
    "SyntheticTraceSpec",
    "Trace",
    "TraceFormatError",
    "TraceStats",
    "compute_stats",
    "detect_format",
    "load_trace",
    "spike_trace",
    "synthesize",
]
