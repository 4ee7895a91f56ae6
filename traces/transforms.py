"""Transforms: each takes a `Trace` and returns a new one, recording itself in the provenance."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

from traces.frozen import FrozenList
from traces.request import TraceFormatError
from traces.trace import Trace


def window(trace: Trace, start_s: float, end_s: float, rebase: bool = True) -> Trace:
    """Requests arriving in [start_s, end_s); with `rebase`, times restart from start_s = 0."""
    if end_s <= start_s:
        raise ValueError(f"window end_s={end_s} ≤ start_s={start_s}; expected start_s < end_s")
    keep = (trace.arrival_s >= start_s) & (trace.arrival_s < end_s)
    picked = trace.select(keep, step=f"window [{start_s}, {end_s}) s{' rebased' if rebase else ''}")
    return picked.replace(arrival_s=picked.arrival_s - start_s) if rebase else picked


def scale_rate(trace: Trace, factor: float) -> Trace:
    """The same requests `factor` times faster (factor 2 doubles the rate and halves the span)."""
    if not factor > 0:
        raise ValueError(f"rate factor is {factor}; expected a number > 0")
    return trace.replace(f"scale_rate x{factor}", arrival_s=trace.arrival_s / factor)


def _cut_hash_ids(trace: Trace, prompt_tokens: np.ndarray) -> list[list[int]] | None:
    if trace.hash_ids is None:
        return None
    block = trace.hash_block_size or 1
    # slices of the trace's own (frozen) ids hold ints already: frozen as they are, not int() by int()
    return [FrozenList(ids[: -(-int(p) // block)]) for ids, p in zip(trace.hash_ids, prompt_tokens)]


def cap_lengths(
    trace: Trace, max_model_len: int, mode: Literal["clip", "drop"] = "clip"
) -> tuple[Trace, int]:
    """Fit every request into a model's context: prompt + output ≤ max_model_len.

    clip: keep the request, cutting the prompt to at most max_model_len − 1 (one token of room
    to answer) and the output to what is left. drop: leave such requests out.
    Returns the new trace and how many requests were clipped or dropped.
    """
    if max_model_len < 2:
        raise ValueError(
            f"max_model_len is {max_model_len}; expected ≥ 2 (a prompt token and an answer)"
        )
    too_long = trace.prompt_tokens + trace.output_tokens > max_model_len
    affected = int(too_long.sum())
    step = f"cap_lengths max_model_len={max_model_len} {mode}: {affected} requests"
    if mode == "drop":
        return trace.select(~too_long, step=step), affected
    if mode != "clip":
        raise ValueError(f"cap mode is {mode!r}; expected 'clip' or 'drop'")
    prompt = np.minimum(trace.prompt_tokens, max_model_len - 1)
    output = np.minimum(trace.output_tokens, max_model_len - prompt)
    clipped = trace.replace(
        step, prompt_tokens=prompt, output_tokens=output, hash_ids=_cut_hash_ids(trace, prompt)
    )
    return clipped, affected


def sample(
    trace: Trace, *, fraction: float | None = None, count: int | None = None, seed: int = 0
) -> Trace:
    """A random subset without replacement, in arrival order: a `fraction` or an exact `count`."""
    if (fraction is None) == (count is None):
        raise ValueError("give exactly one of fraction= or count=")
    if fraction is not None and not 0 <= fraction <= 1:
        raise ValueError(f"fraction is {fraction}; expected 0 ≤ fraction ≤ 1")
    wanted = round(len(trace) * fraction) if fraction is not None else int(count)  # type: ignore[arg-type]
    if not 0 <= wanted <= len(trace):
        raise ValueError(f"count is {wanted}; expected 0 ≤ count ≤ {len(trace)} (the trace size)")
    picked = np.random.default_rng(seed).choice(len(trace), size=wanted, replace=False)
    return trace.select(picked, step=f"sample {wanted} of {len(trace)} (seed {seed})")


def _joined_hash_ids(traces: Sequence[Trace]) -> tuple[list[list[int]] | None, int | None]:
    sizes = {t.hash_block_size for t in traces if t.hash_ids is not None}
    if not sizes:
        return None, None
    if len(sizes) > 1:
        raise TraceFormatError(
            f"cannot join traces with hash block sizes {sorted(sizes)}; expected one"
        )
    # A trace without hash ids shares no prefix blocks: empty lists say exactly that.
    joined = [
        ids for t in traces for ids in (t.hash_ids if t.hash_ids is not None else [[]] * len(t))
    ]
    return joined, sizes.pop()


def _joined(traces: Sequence[Trace], arrival_s: np.ndarray, name: str, step: str) -> Trace:
    hash_ids, block_size = _joined_hash_ids(traces)
    columns = {
        c: np.concatenate([getattr(t, c) for t in traces])
        for c in ("prompt_tokens", "output_tokens", "tenant", "priority", "failed", "source_line")
    }
    order = np.argsort(arrival_s, kind="stable")
    return Trace(
        arrival_s[order],
        **{c: v[order] for c, v in columns.items()},
        hash_ids=None if hash_ids is None else [hash_ids[i] for i in order],
        hash_block_size=block_size,
        name=name,
        provenance=tuple(p for t in traces for p in t.provenance) + (step,),
    )


def concat(traces: Sequence[Trace], gap_s: float = 0.0, name: str | None = None) -> Trace:
    """One after another: each trace starts `gap_s` after the previous one's last arrival."""
    if not traces:
        raise ValueError("concat needs at least one trace")
    shifted, offset = [], 0.0
    for trace in traces:
        first = trace.arrival_s[0] if len(trace) else 0.0
        shifted.append(trace.arrival_s - first + offset)
        offset += trace.duration_s + gap_s
    names = "+".join(t.name for t in traces)
    return _joined(traces, np.concatenate(shifted), name or names, f"concat {names} gap {gap_s} s")


def merge(traces: Sequence[Trace], name: str | None = None) -> Trace:
    """Superpose traces on one clock (e.g. several tenants' traffic on one cluster)."""
    if not traces:
        raise ValueError("merge needs at least one trace")
    names = "|".join(t.name for t in traces)
    arrival_s = np.concatenate([t.arrival_s for t in traces])
    return _joined(traces, arrival_s, name or names, f"merge {names}")


def assign_tenants(trace: Trace, shares: Mapping[str, float], seed: int = 0) -> Trace:
    """Give each request a tenant drawn at random with the given relative shares."""
    names = list(shares)
    weights = np.asarray([shares[n] for n in names], dtype=np.float64)
    if not names or np.any(weights < 0) or weights.sum() <= 0:
        raise ValueError(
            f"tenant shares are {dict(shares)}; expected names with shares ≥ 0, not all 0"
        )
    codes = np.random.default_rng(seed).choice(
        len(names), size=len(trace), p=weights / weights.sum()
    )
    step = f"assign_tenants {dict(shares)} (seed {seed})"
    return trace.replace(step, tenant=np.asarray(names, dtype=np.str_)[codes])


def set_priority(trace: Trace, priority_by_tenant: Mapping[str, int], default: int = 0) -> Trace:
    """Priority per tenant (tenants not named get `default`)."""
    priority = np.full(len(trace), default, dtype=np.int64)
    for tenant, value in priority_by_tenant.items():
        priority[trace.tenant == tenant] = value
    return trace.replace(
        f"set_priority {dict(priority_by_tenant)} default {default}", priority=priority
    )


def share_prefixes(
    trace: Trace, groups: int, prefix_tokens: int, block_size: int = 16, seed: int = 0
) -> Trace:
    """Mooncake-style prefix sharing: each request starts with one of `groups` shared prefixes of
    `prefix_tokens` tokens (a system prompt, a document), drawn uniformly, followed by its own tokens.
    Prompts shorter than the prefix grow to it. Writes `hash_ids` per `block_size`-token block: a block
    id names the same tokens wherever it appears, as in Mooncake's traces."""
    if groups < 1 or prefix_tokens < 1 or block_size < 1:
        raise ValueError(
            f"share_prefixes: groups={groups}, prefix_tokens={prefix_tokens}, block_size={block_size}; "
            "expected each ≥ 1"
        )
    group = np.random.default_rng(seed).integers(0, groups, size=len(trace))
    prompt = np.maximum(trace.prompt_tokens, prefix_tokens + 1)
    prefix_blocks = prefix_tokens // block_size  # only full blocks can be shared
    next_id = groups * prefix_blocks
    hash_ids = []
    for g, length in zip(group.tolist(), prompt.tolist()):
        total = -(-length // block_size)
        own = total - prefix_blocks
        hash_ids.append(  # ints already: frozen as they are
            FrozenList(
                list(range(g * prefix_blocks, (g + 1) * prefix_blocks))
                + list(range(next_id, next_id + own))
            )
        )
        next_id += own
    step = f"share_prefixes groups={groups} prefix_tokens={prefix_tokens} block_size={block_size} (seed {seed})"
    return trace.replace(step, prompt_tokens=prompt, hash_ids=hash_ids, hash_block_size=block_size)
