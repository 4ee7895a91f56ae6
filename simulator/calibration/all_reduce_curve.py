"""`AllReduceCurve`: a step's tensor-parallel all-reduces as measured, and the one place they are
read. One call's time is no straight line in its size (a latency floor, then protocols of growing
bandwidth): an affine fit ran 15-43% short at decode sizes and 15-22% long at 4,096-8,192 tokens on
aiconfigurator's H100 / H200 / B200 tables, so a kernel-table calibration keeps the table (count x
one call at each measured message size, in tokens = elements / hidden size) and reads it log-log
between sizes. Read by the cost model's `all_reduce_curve` feature on the per-step path and by the
importer's whole-step check."""

from __future__ import annotations

import bisect
import math

from pydantic import BaseModel, ConfigDict, Field, model_validator


class AllReduceCurve(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokens: list[float] = Field(min_length=2, description="measured sizes, ascending, in tokens")
    seconds: list[float] = Field(min_length=2, description="a step's all-reduces at each size")

    @model_validator(mode="after")
    def _check(self) -> AllReduceCurve:
        if len(self.tokens) != len(self.seconds):
            raise ValueError(
                f"all-reduce curve has {len(self.tokens)} sizes and {len(self.seconds)} times; "
                "expected one time per size"
            )
        if any(b <= a for a, b in zip(self.tokens, self.tokens[1:])) or min(self.tokens) <= 0:
            raise ValueError(
                f"all-reduce curve sizes {self.tokens[:4]}...; expected positive, ascending sizes"
            )
        if min(self.seconds) <= 0:
            raise ValueError("all-reduce curve has a time <= 0; expected measured times > 0")
        return self

    def seconds_at(self, tokens: float) -> float:
        """A step's all-reduces at `tokens`: log-log between measured sizes, the smallest size's
        time below it, the last two sizes' slope beyond the largest (bandwidth-bound there). Once
        per step: ~0.6 us (a cache on the model costs more: pydantic's private attributes are
        read through `__getattr__`)."""
        sizes, seconds = self.tokens, self.seconds
        if tokens <= sizes[0]:
            return seconds[0]
        last = len(sizes) - 1
        if tokens >= sizes[last]:
            slope = (seconds[last] - seconds[last - 1]) / (sizes[last] - sizes[last - 1])
            return seconds[last] + slope * (tokens - sizes[last])
        i = bisect.bisect_right(sizes, tokens)  # sizes[i - 1] <= tokens < sizes[i]
        share = math.log(tokens / sizes[i - 1]) / math.log(sizes[i] / sizes[i - 1])
        return seconds[i - 1] * (seconds[i] / seconds[i - 1]) ** share


__all__ = ["AllReduceCurve"]
