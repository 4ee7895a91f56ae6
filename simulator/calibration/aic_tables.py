"""Read NVIDIA aiconfigurator's measured kernel database (Apache-2.0; PyPI `aiconfigurator`, whose
`aiconfigurator-core` wheel holds `systems/data/<system>/<op>/<backend>/<version>/*.parquet`) into
plain arrays: GEMM, prefill (context) and decode (generation) attention and all-reduce times in
seconds. Only what the fitter needs is read; nothing of the database is copied into the project.

Reading needs pyarrow (installed with the dashboard's streamlit) and, for the real database, the
optional extra `pip install 'surgeplan[aic]'`. `database_root(path)` also accepts any folder laid
out the same way, which is how the tests feed the fitter a small table of their own.
"""

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.calibration.aic_repeats import medians, one_attention_kernel

DATABASE_MODE = (
    "SILICON"  # aiconfigurator's name for "measured kernel tables only, no SOL/empirical fill"
)
BACKENDS = ("vllm", "sglang", "trtllm")
_MS = 1e-3  # the tables hold milliseconds
# The GEMM sweep's `gemm_dtype` for each weight_dtype (engine.core.config.WeightDtype) we model:
# auto = the bf16 sweep; fp8 = FP8 E4M3 weights and activations with per-tensor scales (vLLM's
# CutlassFP8ScaledMM, TensorRT-LLM's FP8 linear), not the block-scaled `fp8_block`
GEMM_DTYPES = {"auto": "bfloat16", "fp8": "fp8"}
# The decode-attention sweep's `kv_cache_dtype` for each KV-cache dtype we model beside the model's:
# fp8 = FP8 E4M3 values (TensorRT-LLM's, vLLM's and SGLang's default fp8 cache)
KV_CACHE_DTYPES = {"fp8": "fp8"}
# Per backend: the all-reduce kernel a serving engine runs under CUDA graphs (the eager twin is
# slower), in order of preference.
_ALL_REDUCE_KERNELS = {
    "vllm": ("vLLM_custom_graph", "vLLM_custom_eager"),
    "sglang": ("SGLang_CustomAllReduce_graph", "SGLang_CustomAllReduce_eager", "TRTLLM"),
    "trtllm": ("TRTLLM",),
}


def installed_database_root() -> Path:
    """`systems/data` of the installed aiconfigurator-core wheel; a clear error when absent."""
    try:
        import aiconfigurator_core
    except ImportError as error:
        raise ValueError(
            "aiconfigurator's database is not installed; expected `pip install 'surgeplan[aic]'` "
            "(aiconfigurator and aiconfigurator-core 0.12.0), or pass --aic-dir"
        ) from error
    root = Path(aiconfigurator_core.__file__).parent / "systems" / "data"
    if not root.is_dir():
        raise ValueError(f"{root}: not a folder; expected aiconfigurator-core's systems/data")
    return root


def package_version() -> str:
    from importlib import metadata

    for name in ("aiconfigurator-core", "aiconfigurator"):
        try:
            return f"{name} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return "aiconfigurator (version unknown: a folder laid out like its database)"


def _version_key(version: str) -> tuple:
    """0.5.10 after 0.5.9; 1.3.0rc20 after 1.3.0rc5; a release after its release candidates."""
    parts = re.findall(r"\d+|[a-z]+", version.lower())
    return tuple(
        (0, int(part)) if part.isdigit() else (-1 if part in ("rc", "a", "b") else 1, part)
        for part in parts
    )


def table_path(
    root: Path, system: str, op: str, backend: str, filename: str, version: str | None = None
) -> tuple[Path, str]:
    """(path, version) of the newest version folder of `system/op/backend` holding `filename`
    (or of `version` when given)."""
    folder = Path(root) / system / op / backend
    versions = (
        sorted((d.name for d in folder.iterdir() if (d / filename).exists()), key=_version_key)
        if folder.is_dir()
        else []
    )
    if version is not None:
        versions = [v for v in versions if v == version]
    if not versions:
        raise ValueError(
            f"{folder}: no version folder holds {filename}; expected one of "
            + (
                f"{sorted(d.name for d in folder.iterdir())}"
                if folder.is_dir()
                else "none (no such folder)"
            )
        )
    return folder / versions[-1] / filename, versions[-1]


def _read(path: Path, columns: list[str], defaults: dict | None = None) -> dict[str, np.ndarray]:
    """The named columns as arrays; a column in `defaults` an older table lacks takes its value."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    defaults = defaults or {}
    missing = [
        column for column in columns if column not in table.column_names and column not in defaults
    ]
    if missing:
        raise ValueError(f"{path}: columns {missing} are missing; expected {columns}")
    return {
        column: np.asarray(table.column(column).to_pylist())
        if column in table.column_names
        else np.full(table.num_rows, defaults[column])
        for column in columns
    }


@dataclass(frozen=True)
class GemmTable:
    """GEMM times of one `gemm_dtype` (bfloat16, fp8): time_s[(n, k)] = (m values [rows], seconds
    [rows]) sorted by m."""

    path: Path
    version: str
    by_nk: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]
    dtype: str = "bfloat16"

    def ms(self) -> np.ndarray:
        """The token counts (m) measured for every (n, k) of the grid."""
        common = None
        for m, _ in self.by_nk.values():
            common = set(m.tolist()) if common is None else common & set(m.tolist())
        return np.array(sorted(common or ()), dtype=float)

    def time_s(self, m: float, n: int, k: int) -> float:
        """Bilinear in (n, k) between the measured grid lines around them, at a measured m: exact
        for a time of the form a + b·n + c·k + d·n·k, which a GEMM's is away from its tile steps."""
        ns = sorted({key[0] for key in self.by_nk})
        ks = sorted({key[1] for key in self.by_nk})
        # Wider or deeper than the sweep (a 128k-vocabulary LM head; a small GPU's shorter sweep):
        # as that fraction more of the largest measured GEMM, whose time grows in proportion.
        if n > ns[-1]:
            return self.time_s(m, ns[-1], k) * n / ns[-1]
        if k > ks[-1]:
            return self.time_s(m, n, ks[-1]) * k / ks[-1]
        n0, n1 = _bracket(ns, n, "n", self.path)
        k0, k1 = _bracket(ks, k, "k", self.path)
        corners = {(a, b): self._at(m, a, b) for a in (n0, n1) for b in (k0, k1)}
        wn = 0.0 if n1 == n0 else (n - n0) / (n1 - n0)
        wk = 0.0 if k1 == k0 else (k - k0) / (k1 - k0)
        return (
            (1 - wn) * (1 - wk) * corners[n0, k0]
            + wn * (1 - wk) * corners[n1, k0]
            + (1 - wn) * wk * corners[n0, k1]
            + wn * wk * corners[n1, k1]
        )

    def beyond_grid(self, n: int, k: int) -> bool:
        """Whether (n, k) lies past the sweep's largest n or k (`time_s` then scales)."""
        return n > max(key[0] for key in self.by_nk) or k > max(key[1] for key in self.by_nk)

    def _at(self, m: float, n: int, k: int) -> float:
        if (n, k) not in self.by_nk:
            raise ValueError(
                f"{self.path}: no {self.dtype} rows for n={n}, k={k}; the grid lacks this corner"
            )
        ms, seconds = self.by_nk[n, k]
        hit = np.flatnonzero(ms == m)
        if not len(hit):
            raise ValueError(f"{self.path}: n={n}, k={k} has no row at m={m:g}")
        return float(seconds[hit[0]])


def _bracket(grid: list[int], value: int, name: str, path: Path) -> tuple[int, int]:
    if value < grid[0] or value > grid[-1]:
        raise ValueError(f"{path}: {name}={value} is outside the measured {grid[0]}..{grid[-1]}")
    upper = next(g for g in grid if g >= value)
    lower = max(g for g in grid if g <= value)
    return lower, upper


@functools.lru_cache(maxsize=8)  # one sweep serves every model and TP of a GPU × backend
def read_gemm(
    root: Path,
    system: str,
    backend: str,
    version: str | None = None,
    gemm_dtype: str = "bfloat16",
) -> GemmTable:
    """The dense GEMM sweep of `gemm_dtype` (a value of `GEMM_DTYPES`); a clear error when the
    table has no rows of it (A100s have no fp8)."""
    path, found = table_path(root, system, "gemm", backend, "gemm_perf.parquet", version)
    data = _read(path, ["gemm_dtype", "m", "n", "k", "latency"])
    keep = data["gemm_dtype"] == gemm_dtype
    if not keep.any():
        raise ValueError(
            f"{path}: no {gemm_dtype} rows; expected the dense {gemm_dtype} GEMM sweep (the table "
            f"holds {sorted(set(data['gemm_dtype'].tolist()))})"
        )
    m, n, k = (data[column][keep] for column in ("m", "n", "k"))
    seconds = data["latency"][keep] * _MS
    by_nk: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    for key in set(zip(n.tolist(), k.tolist())):
        rows = np.flatnonzero((n == key[0]) & (k == key[1]))
        by_nk[key] = medians(m[rows], seconds[rows])  # ascending m, repeated rows: one time
    return GemmTable(path, found, by_nk, gemm_dtype)


@dataclass(frozen=True)
class AttentionTable:
    """One attention table restricted to one head layout, bf16 KV, no sliding window."""

    path: Path
    version: str
    batch: np.ndarray  # [rows] sequences
    length: np.ndarray  # [rows] prefill: new tokens per sequence; decode: context length read
    seconds: np.ndarray  # [rows]
    kernel: str = ""  # the kernel kept where the table times the same shapes with several; else ""


@functools.lru_cache(maxsize=32)
def read_attention(
    root: Path,
    system: str,
    backend: str,
    phase: str,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    version: str | None = None,
    kv_cache_dtype: str = "bfloat16",
) -> AttentionTable:
    """phase 'context' (prefill, no cached prefix) or 'generation' (one decode token per sequence);
    heads are those one GPU holds (divided by the tensor-parallel degree); the rows of kernels
    reading a `kv_cache_dtype` cache (the table's name: 'bfloat16', 'fp8'); of one kernel where
    several time the same shapes (`aic_repeats`)."""
    if phase not in ("context", "generation"):
        raise ValueError(f"attention phase {phase!r}; expected 'context' or 'generation'")
    path, found = table_path(
        root, system, "attention", backend, f"{phase}_attention_perf.parquet", version
    )
    columns = [
        "batch_size",
        "isl",
        "step",
        "num_heads",
        "num_key_value_heads",
        "head_dim",
        "kv_cache_dtype",
        "window_size",
        "kernel_source",
        "latency",
    ]
    # older tables predate sliding windows, and some name no kernel
    data = _read(path, columns, defaults={"window_size": 0, "kernel_source": ""})
    keep = (
        (data["num_heads"] == num_heads)
        & (data["num_key_value_heads"] == num_kv_heads)
        & (data["head_dim"] == head_dim)
        & (data["kv_cache_dtype"] == kv_cache_dtype)
        & (data["window_size"] == 0)
    )
    if not keep.any():
        raise ValueError(
            f"{path}: no rows with a {kv_cache_dtype} KV cache for {num_heads} heads / "
            f"{num_kv_heads} KV heads / head_dim {head_dim}"
        )
    keep, kernel = one_attention_kernel(data, keep, backend, path)
    # generation rows time the step-th decode token after an isl-token prompt: context isl + step
    length = data["isl"][keep] + (data["step"][keep] if phase == "generation" else 0)
    return AttentionTable(
        path,
        found,
        data["batch_size"][keep].astype(float),
        length.astype(float),
        data["latency"][keep] * _MS,
        kernel,
    )


@dataclass(frozen=True)
class AllReduceTable:
    path: Path
    version: str
    kernel: str
    elements: np.ndarray  # [rows] bf16 elements reduced
    seconds: np.ndarray  # [rows]


def read_all_reduce(root: Path, system: str, backend: str, num_gpus: int) -> AllReduceTable:
    """The newest custom all-reduce table of this backend with rows for `num_gpus`, in the backend's
    CUDA-graph kernel when measured (what a serving engine runs), else its eager one; one time per
    message size, ascending."""
    folder = Path(root) / system / "comm" / backend
    versions = (
        sorted(
            (d.name for d in folder.iterdir() if (d / "custom_allreduce_perf.parquet").exists()),
            key=_version_key,
            reverse=True,
        )
        if folder.is_dir()
        else []
    )
    for version in versions:
        path = folder / version / "custom_allreduce_perf.parquet"
        data = _read(
            path, ["kernel_source", "num_gpus", "message_size", "latency", "allreduce_dtype"]
        )
        for kernel in _ALL_REDUCE_KERNELS[backend]:
            keep = (
                (data["kernel_source"] == kernel)
                & (data["num_gpus"] == num_gpus)
                & (data["allreduce_dtype"] == "bfloat16")
            )
            if keep.any():
                # one time a size (the curve needs ascending sizes), as for the GEMM sweep
                sizes, seconds = medians(data["message_size"][keep], data["latency"][keep] * _MS)
                return AllReduceTable(path, version, kernel, sizes, seconds)
    raise ValueError(
        f"{folder}: no custom all-reduce rows for {num_gpus} GPUs in {versions or 'any version'}"
    )
