"""Model memory math against hand calculations: weights, KV bytes per token, KV blocks, batch size."""

import math

import numpy as np
import pytest

from engine.model.config import ModelConfig
from engine.model.presets import PRESETS, preset_config
from simulator.hardware.catalog import get_hardware
from simulator.model_spec import ModelSpec, kv_blocks_available, max_batch_size

LLAMA2_7B_PARAMS = 32000 * 4096 * 2 + 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096) + 4096
LLAMA2_70B_PARAMS = (
    32000 * 8192 * 2
    + 80 * (8192 * (8192 + 2 * 1024) + 8192 * 8192 + 3 * 8192 * 28672 + 2 * 8192)
    + 8192
)


def test_llama2_7b_fp16_by_hand():
    model = ModelSpec.from_preset("llama-2-7b")
    assert model.num_params == LLAMA2_7B_PARAMS == 6_738_415_616
    assert model.weight_bytes == 2 * LLAMA2_7B_PARAMS  # the 13.5 GB everyone quotes
    assert model.kv_bytes_per_token == 2 * 32 * 32 * 128 * 2 == 524_288


def test_llama2_70b_gqa_by_hand():
    model = ModelSpec.from_preset("llama-2-70b")
    assert model.num_params == LLAMA2_70B_PARAMS
    assert model.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2 == 327_680
    assert model.kv_bytes_per_token_per_gpu(4) == 327_680 // 4
    # 16 GPUs but 8 KV heads: each GPU keeps one head, so per-GPU KV does not shrink further
    assert model.kv_bytes_per_token_per_gpu(16) == model.kv_bytes_per_token_per_gpu(8)


def test_parameter_count_matches_the_engine_for_bias_free_presets():
    for name in PRESETS:
        config = preset_config(name)
        spec = ModelSpec.from_hf_config(config, name=name)
        if not spec.qkv_bias:
            assert spec.num_params == ModelConfig.from_hf_config(config).num_parameters, name


def test_kv_blocks_on_one_a100_by_hand():
    model, a100 = ModelSpec.from_preset("llama-2-7b"), get_hardware("A100-80GB")
    blocks = kv_blocks_available(
        model, a100, 1, gpu_memory_utilization=0.9, block_size=16, reserved_bytes_per_gpu=0
    )
    a100_bytes = 79.15 * 2**30  # what CUDA reports on an "80GB" A100, not 80e9
    assert blocks == math.floor((a100_bytes * 0.9 - 2 * LLAMA2_7B_PARAMS) / (524_288 * 16)) == 7511


def test_kv_blocks_with_tensor_parallelism_by_hand():
    model, a100 = ModelSpec.from_preset("llama-2-70b"), get_hardware("A100-80GB")
    reserved = 3e9
    blocks = kv_blocks_available(model, a100, 4, 0.9, 16, reserved_bytes_per_gpu=reserved)
    norms = (2 * 80 + 1) * 8192
    weights_per_gpu = (math.ceil((LLAMA2_70B_PARAMS - norms) / 4) + norms) * 2
    budget = 0.9 * 79.15 * 2**30
    assert blocks == math.floor((budget - weights_per_gpu - reserved) / (327_680 / 4 * 16))
    assert kv_blocks_available(model, a100, 1, 0.9, 16) == 0  # 138 GB of weights cannot fit on one


def test_largest_batch_by_hand():
    model, h100 = ModelSpec.from_preset("llama-3-8b"), get_hardware("H100-80GB")
    blocks = kv_blocks_available(model, h100, 1, 0.9, 16, reserved_bytes_per_gpu=1e9)
    assert max_batch_size(
        model, h100, 1000, 500, 1, 0.9, 16, reserved_bytes_per_gpu=1e9
    ) == blocks // math.ceil(1500 / 16)


def test_memory_math_is_monotone_on_random_settings():
    rng = np.random.default_rng(20240611)
    model, gpu = ModelSpec.from_preset("llama-3-8b"), get_hardware("A100-80GB")
    for _ in range(50):
        low, high = sorted(rng.uniform(0.3, 1.0, size=2))
        assert kv_blocks_available(model, gpu, 1, low) <= kv_blocks_available(model, gpu, 1, high)
        prompt, output = int(rng.integers(1, 4000)), int(rng.integers(0, 4000))
        assert max_batch_size(model, gpu, prompt + 16, output) <= max_batch_size(
            model, gpu, prompt, output
        )
        tp = int(rng.choice([1, 2, 4, 8]))
        assert model.weight_bytes_per_gpu(tp) * tp >= model.weight_bytes


def test_bad_inputs_name_what_is_accepted():
    model, gpu = ModelSpec.from_preset("llama-2-7b"), get_hardware("A100-80GB")
    with pytest.raises(ValueError, match="divisor of its 32 attention heads"):
        model.weight_bytes_per_gpu(3)
    with pytest.raises(ValueError, match=r"fraction in \(0, 1\]"):
        kv_blocks_available(model, gpu, 1, gpu_memory_utilization=1.5)
    with pytest.raises(ValueError, match="intermediate_size is None; expected a positive integer"):
        ModelSpec.from_hf_config({"hidden_size": 8})
    with pytest.raises(ValueError, match="dtype 'int3'"):
        ModelSpec.from_preset("llama-2-7b", dtype="int3").dtype_bytes
