"""aiconfigurator tables that time one shape more than once. Attention
(`aic_tables.read_attention`): where several kernels time the same shapes (SGLang 0.5.14's
Blackwell tables: FlashInfer and TensorRT-LLM MHA side by side), the rows of the kernel the stack
runs by default, never their mixture; disjoint shapes of two kernels (one stack's dispatch) kept; a
backend with no default among them, or one kernel timing a shape twice, refused. All-reduce
(`read_all_reduce`): a size timed twice read once, at its median."""

import random

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from simulator.calibration import aic_tables  # noqa: E402
from simulator.calibration.aic_fit import fit_decode_attention  # noqa: E402
from simulator.calibration.aic_repeats import AmbiguousTable  # noqa: E402

FLOOR, PER_SEQ, PER_TOKEN = 10e-6, 0.2e-6, 1e-9  # per layer, seconds (an H200-class decode kernel)
BATCHES, CONTEXTS = (1, 4, 16, 64, 256), (64, 512, 2048, 8192)


def decode_s(batch: int, context: int) -> float:
    return FLOOR + PER_SEQ * batch + PER_TOKEN * batch * context


def _rows(kernel: str, slower: float, shapes, name_kernels: bool = True) -> list[dict]:
    rows = []
    for batch, isl, step in shapes:
        row = {
            "batch_size": batch,
            "isl": isl,
            "step": step,
            "num_heads": 16,
            "num_key_value_heads": 2,
            "head_dim": 128,
            "kv_cache_dtype": "bfloat16",
            "window_size": 0,
            "latency": decode_s(batch, isl + step) * slower * 1e3,  # the tables hold ms
        }
        if name_kernels:
            row["kernel_source"] = kernel
        rows.append(row)
    return rows


DECODE_SHAPES = [(b, 1, c - 1) for b in BATCHES for c in CONTEXTS]


def _table(root, backend: str, rows: list[dict]):
    path = (
        root / "b200_sxm" / "attention" / backend / "0.5.14" / "generation_attention_perf.parquet"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    aic_tables.read_attention.cache_clear()
    return root


def _read(root, backend: str):
    return aic_tables.read_attention(root, "b200_sxm", backend, "generation", 16, 2, 128)


@pytest.mark.parametrize(
    "kernels, default",
    [
        (("flashinfer", "trtllm_mha"), "trtllm_mha"),  # SM100 / SM103: SGLang's trtllm_mha
        (("triton", "flashinfer"), "flashinfer"),  # no trtllm_mha (SM120): flashinfer
        (("triton", "fa3"), "fa3"),  # Hopper: fa3
    ],
)
def test_sglang_keeps_its_default_kernels_rows_and_the_fit_gives_them_back(
    tmp_path, kernels, default
):
    slower = random.uniform(1.1, 1.9)  # the other kernel, as far off as the real tables' are
    other = next(k for k in kernels if k != default)
    rows = _rows(other, slower, DECODE_SHAPES) + _rows(default, 1.0, DECODE_SHAPES)
    random.shuffle(rows)
    table = _read(_table(tmp_path, "sglang", rows), "sglang")
    assert table.kernel == default
    assert len(table.seconds) == len(DECODE_SHAPES)
    expected = [decode_s(b, c) for b, c in zip(table.batch, table.length)]
    assert table.seconds == pytest.approx(expected, rel=1e-9)
    fit = fit_decode_attention(table)
    assert fit.coefficients == pytest.approx([FLOOR, PER_SEQ, PER_TOKEN], rel=1e-6)


def test_two_kernels_on_disjoint_shapes_are_one_stacks_dispatch_and_both_stay(tmp_path):
    # vLLM's context table: FlashInfer's prefill kernel, and its decode kernel on one-token rows
    prefill = [(b, c, 0) for b in BATCHES for c in CONTEXTS]
    rows = _rows("vllm_flashinfer_trtllmprefill", 1.0, prefill) + _rows(
        "vllm_flashinfer_trtllmdecode", 1.0, [(b, 1, 0) for b in BATCHES]
    )
    table = _read(_table(tmp_path, "vllm", rows), "vllm")
    assert table.kernel == ""
    assert len(table.seconds) == len(prefill) + len(BATCHES)


def test_a_backend_with_no_default_among_the_kernels_is_refused_not_averaged(tmp_path):
    rows = _rows("kernel_a", 1.0, DECODE_SHAPES) + _rows("kernel_b", 1.5, DECODE_SHAPES)
    root = _table(tmp_path, "vllm", rows)
    with pytest.raises(ValueError, match=r"kernel_a.*kernel_b.*time the same shapes.*'vllm'"):
        _read(root, "vllm")


def test_a_table_that_names_no_kernel_is_read_as_one(tmp_path):
    rows = _rows("", 1.0, DECODE_SHAPES, name_kernels=False)
    table = _read(_table(tmp_path, "sglang", rows), "sglang")
    assert table.kernel == "" and len(table.seconds) == len(DECODE_SHAPES)


def test_one_kernel_timing_a_shape_twice_is_refused(tmp_path):
    # e.g. TensorRT-LLM's fp8-KV prefill rows, timed with bf16 and with fp8 attention arithmetic
    rows = _rows("torch_flow", 1.0, DECODE_SHAPES) + _rows("torch_flow", 0.9, DECODE_SHAPES[:3])
    root = _table(tmp_path, "trtllm", rows)
    with pytest.raises(AmbiguousTable, match="timed more than once"):
        _read(root, "trtllm")


def test_an_ambiguous_layout_is_not_passed_over_for_a_smaller_one(tmp_path):
    """The importer tries fewer KV heads when a layout has no rows; an ambiguous layout has rows, so
    the build stops on it instead of fitting another layout's kernel."""
    import pyarrow.compute as pc
    from aic_fixture import write_fixture_db

    from simulator.calibration.aic_import import aic_calibration

    root = write_fixture_db(tmp_path / "data")
    path = root / "h200_sxm/attention/vllm/0.24.0/generation_attention_perf.parquet"
    table = pq.read_table(path)
    # a second kernel on the model's own layout (32 / 8 heads), and a clean 32 / 4 layout to fall to
    second = table.set_column(
        table.column_names.index("kernel_source"),
        "kernel_source",
        pa.array(["another"] * table.num_rows),
    )
    fewer = table.set_column(
        table.column_names.index("num_key_value_heads"),
        "num_key_value_heads",
        pc.divide(table.column("num_key_value_heads"), 2),
    )
    pq.write_table(pa.concat_tables([table, second, fewer]), path)
    for other in ("context",):  # the 32 / 4 layout needs prefill rows too
        other_path = root / f"h200_sxm/attention/vllm/0.24.0/{other}_attention_perf.parquet"
        prefill = pq.read_table(other_path)
        halved = prefill.set_column(
            prefill.column_names.index("num_key_value_heads"),
            "num_key_value_heads",
            pc.divide(prefill.column("num_key_value_heads"), 2),
        )
        pq.write_table(pa.concat_tables([prefill, halved]), other_path)
    aic_tables.read_attention.cache_clear()
    with pytest.raises(AmbiguousTable, match=r"another.*fixture"):
        aic_calibration("llama-3-8b", "H200-141GB", 1, "vllm", root=root)
    aic_tables.read_attention.cache_clear()


def test_an_all_reduce_size_timed_twice_is_read_once_at_its_median(tmp_path):
    """SGLang 0.5.10's GB200 / GB300 all-reduce tables time every size twice; the curve needs one
    time a size (ascending sizes), so the reader takes each size's median."""
    sizes = [2**p for p in range(10, 20)]
    rng = random.Random()
    rows = []
    for size in sizes:
        for factor in (1.0, rng.uniform(1.01, 1.5), rng.uniform(0.5, 0.99)):  # median: the first
            rows.append(
                {
                    "kernel_source": "SGLang_CustomAllReduce_graph",
                    "num_gpus": 4,
                    "message_size": size,
                    "allreduce_dtype": "bfloat16",
                    "latency": (6e-3 + 1e-9 * size) * factor,
                }
            )
    rng.shuffle(rows)
    path = tmp_path / "gb200" / "comm" / "sglang" / "0.5.10" / "custom_allreduce_perf.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    table = aic_tables.read_all_reduce(tmp_path, "gb200", "sglang", 4)
    assert table.elements.tolist() == sizes
    assert table.seconds == pytest.approx([(6e-3 + 1e-9 * s) * 1e-3 for s in sizes], rel=1e-12)
