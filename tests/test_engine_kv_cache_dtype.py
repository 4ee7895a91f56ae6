"""kv_cache_dtype in the engine: one setting for LLM(...) and `serve --kv-cache-dtype`; the pool
stored in
that dtype holds ≥ 1.95x the blocks of a float16 pool of the same bytes (kv_stats, /metrics, the
startup
line); generation runs on the quantised cache and stays close to the unquantised one."""

import signal
import subprocess
import sys
import time

import httpx
import pytest
import torch
from live_server import free_port, metric_value, tiny_config

from engine import LLM, SamplingParams
from engine.core.config import CacheConfig
from engine.llm_engine import LLMEngine

POOL_BYTES = 1 << 20


def _engine(kv_cache_dtype: str, **overrides) -> LLMEngine:
    """tiny (head_dim 16) at block_size 16, the default: int8's float32 scale per block and head
    costs
    4 / (16 × 16) of a block here (0.2% at head_dim 128)."""
    return LLMEngine(
        tiny_config(
            num_kv_blocks=None,
            block_size=16,
            kv_cache_memory_bytes=POOL_BYTES,
            kv_cache_dtype=kv_cache_dtype,
            **overrides,
        )
    )


def test_quantised_pool_holds_about_twice_the_blocks_of_float16():
    fp16 = _engine("auto", dtype="float16")
    assert fp16.model_runner.kv_caches[0].k.dtype == torch.float16
    for kv_cache_dtype, storage in (
        ("fp8", torch.float8_e4m3fn),
        ("fp8_e5m2", torch.float8_e5m2),
        ("int8", torch.int8),
    ):
        engine = _engine(kv_cache_dtype, dtype="float16")
        assert engine.model_runner.kv_caches[0].k.dtype == storage
        ratio = engine.kv_stats().num_blocks / fp16.kv_stats().num_blocks
        assert ratio >= 1.95, f"{kv_cache_dtype}: {ratio:.3f}x the float16 pool's blocks"
        # int8's block scales are inside the budget; fp8's per-tensor scales add 8 bytes a layer
        assert engine.model_runner.kv_cache_bytes <= POOL_BYTES + 8 * engine.model_config.num_layers
        assert f"kv_cache_dtype={kv_cache_dtype}" in engine.kv_cache_line()
        assert f"{engine.kv_stats().num_blocks} blocks" in engine.kv_cache_line()


def test_bad_kv_cache_dtype_is_named():
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        CacheConfig(num_kv_blocks=4, kv_cache_dtype="fp4")


@pytest.mark.parametrize("kv_cache_dtype", ["fp8_e4m3", "int8"])
def test_generation_on_a_quantised_cache_follows_the_unquantised_logits(kv_cache_dtype):
    prompts = [[5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45], [7, 3, 99, 4]]
    params = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)
    outputs = {}
    for dtype in ("auto", kv_cache_dtype):
        llm = LLM(
            model="tiny",
            load_format="dummy",
            block_size=8,
            num_kv_blocks=32,
            max_num_seqs=4,
            max_model_len=64,
            kv_cache_dtype=dtype,
            seed=0,
        )
        outputs[dtype] = [out.output_token_ids for out in llm.generate(prompts, params)]
        cache = llm.engine.model_runner.kv_caches[0]
        assert (cache.k_scale is None) == (dtype == "auto")
    same = sum(
        a == b
        for auto, quant in zip(outputs["auto"], outputs[kv_cache_dtype])
        for a, b in zip(auto, quant)
    )
    assert same >= 0.75 * sum(len(o) for o in outputs["auto"]), (
        outputs
    )  # random weights: a loose check only


def test_serve_kv_cache_dtype_startup_line_and_metrics():
    auto_blocks = (
        _engine("auto").kv_stats().num_blocks
    )  # float32 on the CPU: int8 holds about 4x as many
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine.openai.cli",
            "--model",
            "tiny",
            "--load-format",
            "dummy",
            "--max-model-len",
            "64",
            "--block-size",
            "16",
            "--kv-cache-memory",
            str(POOL_BYTES),
            "--kv-cache-dtype",
            "int8",
            "--port",
            str(port),
            "--uvicorn-log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while server.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        text = httpx.get(f"{url}/metrics", timeout=10).text
        info = next(
            line for line in text.splitlines() if line.startswith("vllm:cache_config_info{")
        )
        blocks = int(info.split('num_gpu_blocks="')[1].split('"')[0])
        assert 'cache_dtype="int8"' in info and metric_value(text, "vllm:cache_config_info") == 1
        assert blocks >= 3.9 * auto_blocks
        answer = httpx.post(
            f"{url}/v1/completions",
            json={"prompt": "hi", "max_tokens": 3, "ignore_eos": True},
            timeout=30,
        )
        assert answer.json()["usage"]["completion_tokens"] == 3
    finally:
        server.send_signal(signal.SIGINT)
        output, _ = server.communicate(timeout=30)
    assert f"KV cache: {blocks} blocks x 16 tokens" in output and "kv_cache_dtype=int8" in output, (
        output
    )
    assert server.returncode == 0 and "Traceback" not in output, output
