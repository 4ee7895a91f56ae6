"""The paged-KV, continuous-batching engine: `LLM` offline, `LLMEngine` step by step."""

from engine.config import CacheConfig, EngineConfig, SchedulerConfig
from engine.core.outputs import RequestMetrics, RequestOutput
from engine.core.sampling_params import SamplingParams

__all__ = [
    "LLM",
    "LLMEngine",
    "SamplingParams",
    "RequestOutput",
    "RequestMetrics",
    "EngineConfig",
    "CacheConfig",
    "SchedulerConfig",
]


def __getattr__(name: str):
    # torch-bearing modules load on first use, so the pure-Python scheduler imports without torch
    if name == "LLM":
        from engine.llm import LLM

        return LLM
    if name == "LLMEngine":
        from engine.llm_engine import LLMEngine

        return LLMEngine
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
