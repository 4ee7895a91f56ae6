"""One memory formula: the live engine's GPU pool and the simulator's replica pool come from
`engine.core.memory` and agree block for block, for every KV cache dtype; fp8/int8 hold ≥ 1.95x the
float16 blocks in the same memory."""

import pytest
import torch

from engine.config import EngineConfig
from engine.model.config import ModelConfig
from engine.worker.resources import gpu_kv_pool_blocks
from simulator import Scenario
from simulator.hardware.catalog import get_hardware
from simulator.model_spec import ModelSpec, kv_blocks_available
from simulator.resolve import resolve_pool

KV_DTYPES = ["auto", "fp8", "fp8_e5m2", "int8"]


@pytest.mark.parametrize("preset", ["llama-2-7b", "llama-3-8b", "qwen2.5-7b"])
@pytest.mark.parametrize("gpu", ["A100-80GB", "H100-80GB"])
def test_engine_and_simulator_size_the_same_pool(preset, gpu):
    hardware = get_hardware(gpu)
    blocks = {}
    for kv_cache_dtype in KV_DTYPES:
        settings = dict(
            block_size=16,
            gpu_memory_utilization=0.9,
            max_num_batched_tokens=4096,
            max_num_seqs=128,
            kv_cache_dtype=kv_cache_dtype,
        )
        engine = gpu_kv_pool_blocks(
            EngineConfig(model=preset, **settings),
            ModelConfig.load(preset),
            torch.float16,
            hardware.memory_bytes,
        )
        simulated = kv_blocks_available(
            ModelSpec.from_preset(preset, dtype="float16"),
            hardware,
            1,
            0.9,
            16,
            kv_cache_dtype=kv_cache_dtype,
            max_num_batched_tokens=4096,
            max_num_seqs=128,
        )
        scenario = Scenario(
            model={"name": preset, "dtype": "float16"},
            hardware={"gpu": gpu},
            scheduler={k: v for k, v in settings.items()},
        )
        assert (
            engine
            == simulated
            == resolve_pool(scenario, ModelSpec.from_preset(preset, dtype="float16"))
            > 0
        )
        blocks[kv_cache_dtype] = engine
    for kv_cache_dtype in KV_DTYPES[1:]:
        assert blocks[kv_cache_dtype] / blocks["auto"] >= 1.95, (kv_cache_dtype, blocks)


@pytest.mark.parametrize(
    "preset, tensor_parallel, logged_blocks",
    [("llama-2-7b", 1, 7449), ("llama-2-70b", 4, 31615)],
)
def test_the_pool_is_the_one_vllm_logged_on_an_a100(preset, tensor_parallel, logged_blocks):
    """vLLM's own pools on A100-80GB, logged in vllm-project/vllm#2031 (Dec 2023, fp16, 16-token blocks,
    gpu_memory_utilization 0.9, torch-only profiling as ours; 4,096 tokens profiled): within 1.5%. With
    the nameplate read as 80e9 bytes the pools come out 7% and 10% short."""
    blocks = kv_blocks_available(
        ModelSpec.from_preset(preset, dtype="float16"),
        get_hardware("A100-80GB"),
        tensor_parallel,
        0.9,
        16,
        max_num_batched_tokens=4096,
        max_num_seqs=256,
    )
    assert blocks == pytest.approx(logged_blocks, rel=0.015)
