"""Which of an aiconfigurator table's rows a reader keeps where the table times one shape more than
once: several kernels side by side, one kernel twice, or a measurement repeated.

Why: a fit takes every row it is given as one kernel's, so two kernels' rows fitted together give a
model of neither. SGLang 0.5.14's Blackwell attention tables time its FlashInfer and TensorRT-LLM
MHA kernels on the same shapes (1.1-1.9x apart), and a calibration fitted on both stood halfway
between them. Read by `aic_tables` (attention, all-reduce, GEMM); no I/O here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

# Per backend: where one attention table times the same shapes with several kernels, the kernel the
# stack picks when none is named, most preferred first. SGLang's `get_default_attn_backend`
# (python/sglang/srt/server_args.py) takes trtllm_mha on SM100 / SM103 (B200, B300, GB200, GB300),
# fa3 on Hopper, else flashinfer, else triton; a table holds only the kernels its GPU runs, so the
# first present is that GPU's default. Kernels timing disjoint shapes (vLLM's FlashInfer prefill rows
# beside its decode kernel's one-token rows) are one stack's dispatch and are all kept; a backend
# without a preference here is refused rather than averaged.
ATTENTION_KERNELS = {"sglang": ("trtllm_mha", "fa3", "flashinfer", "triton")}


class AmbiguousTable(ValueError):
    """A table that times one shape more than once in a way the reader does not choose between:
    refused, never averaged, and not taken for a table that lacks the rows (callers that try other
    layouts or dtypes on a ValueError re-raise it)."""


def one_attention_kernel(
    data: dict[str, np.ndarray], keep: np.ndarray, backend: str, path: Path
) -> tuple[np.ndarray, str]:
    """`keep` (one head layout's rows of an attention table: columns batch_size, isl, step,
    kernel_source) narrowed to one kernel's rows when several kernels time one of its shapes, and
    that kernel (else "", `keep` as it is); `AmbiguousTable` when a shape is then still timed more
    than once (rows that differ in a column the reader does not choose by, such as `attn_dtype`)."""
    kernels = data["kernel_source"][keep]
    present = set(kernels.tolist())
    chosen = ""
    if len(present) > 1 and _timed_twice(data, keep, kernels):
        chosen = next((k for k in ATTENTION_KERNELS.get(backend, ()) if k in present), "")
        if not chosen:
            raise AmbiguousTable(
                f"{path}: kernels {sorted(present)} time the same shapes; expected one kernel a "
                f"shape, or a default among them for backend {backend!r} "
                "(aic_repeats.ATTENTION_KERNELS)"
            )
        keep = keep & (data["kernel_source"] == chosen)
    if _timed_twice(data, keep, None):
        raise AmbiguousTable(
            f"{path}: some shapes are timed more than once for this head layout and KV dtype"
            f"{f' by {chosen}' if chosen else ''}; expected one row a shape (rows that differ in "
            "attn_dtype or beam_width are not chosen between)"
        )
    return keep, chosen


def _timed_twice(data: dict[str, np.ndarray], keep: np.ndarray, kernels) -> bool:
    """Whether some (batch, isl, step) of the kept rows has two rows (of two kernels, when
    `kernels` is given: one kernel's repeats do not count)."""
    columns = [data[name][keep].tolist() for name in ("batch_size", "isl", "step")]
    if kernels is not None:
        columns.append(kernels.tolist())
    rows = list(zip(*columns))
    shapes = {row[:3] for row in rows}
    return len(shapes) < len(set(rows)) if kernels is not None else len(shapes) < len(rows)


def medians(keys: np.ndarray, seconds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each distinct key, ascending; the median of its times): one time per GEMM row count or
    all-reduce size where a sweep measured one more than once (SGLang 0.5.10's GB200 / GB300
    all-reduce tables time every size twice)."""
    keys = np.asarray(keys, dtype=float)
    unique = np.unique(keys)
    return unique, np.array([np.median(seconds[keys == key]) for key in unique])
