"""One request of a trace, and the records a loader hands back about what it read."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

DEFAULT_TENANT = "default"
# Mooncake's FAST'25 release hashes prompts in blocks of this many tokens.
MOONCAKE_BLOCK_SIZE = 512


class TraceFormatError(ValueError):
    """A trace file (or trace data) that does not follow its format; the message names the spot."""


class RequestSpec(BaseModel):
    """What a client sends: when, how long the prompt is, how many tokens it wants back.

    `hash_ids` (with `hash_block_size`) describe the prompt as a chain of blocks: equal ids in two
    requests mean an identical block of prompt tokens, so prefix caching can be replayed faithfully.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    arrival_s: float = Field(ge=0.0, description="seconds from the trace start")
    prompt_tokens: int = Field(ge=1)
    output_tokens: int = Field(ge=0, description="0 only for requests that failed in production")
    hash_ids: tuple[int, ...] | None = None
    hash_block_size: int | None = Field(default=None, ge=1)
    tenant: str = DEFAULT_TENANT
    priority: int = 0
    failed: bool = False
    source_line: int = Field(
        default=-1, description="line in the file it came from; -1 if generated"
    )

    @model_validator(mode="after")
    def _hash_ids_need_a_block_size(self) -> RequestSpec:
        if self.hash_ids is not None and self.hash_block_size is None:
            raise ValueError("hash_ids are given without hash_block_size; expected both or neither")
        return self


class LoadReport(BaseModel):
    """What a loader did with the rows it read, so skipped or filtered data is never silent."""

    model_config = ConfigDict(frozen=True)

    path: str
    format: str
    rows_read: int = 0
    rows_kept: int = 0
    rows_skipped: int = 0
    rows_filtered: int = Field(default=0, description="valid rows left out by a loader option")
    failed_requests: int = Field(default=0, description="kept rows flagged as failed in production")
    first_errors: tuple[str, ...] = ()
    notes: tuple[str, ...] = Field(
        default=(),
        description="what the loader assumed or left out (e.g. no "
        "prefix sharing in a JSONL trace without hash_ids)",
    )

    def summary(self) -> str:
        parts = [f"{self.rows_kept} of {self.rows_read} rows kept from {self.path} ({self.format})"]
        if self.rows_skipped:
            parts.append(
                f"{self.rows_skipped} bad rows skipped, first: " + "; ".join(self.first_errors)
            )
        if self.rows_filtered:
            parts.append(f"{self.rows_filtered} rows filtered out by options")
        if self.failed_requests:
            parts.append(f"{self.failed_requests} failed requests flagged")
        parts += self.notes
        return "; ".join(parts)
