"""KV block copies (prefill/decode hand-over, host tier) carry a quantised cache's scales: an int8
cache's per-block scales travel with its blocks, an fp8 cache's per-tensor scale is adopted by a fresh
destination and must match a calibrated one."""

import pytest
import torch

from engine.worker.kv_transfer import apply_host_moves, copy_kv_blocks, host_kv_cache
from kernels.kv_quant import allocate_layer

CPU = torch.device("cpu")


def _filled(kv_cache_dtype: str, num_blocks: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    layers = [
        allocate_layer(num_blocks, 4, 2, 8, kv_cache_dtype, torch.float32, CPU) for _ in range(2)
    ]
    for layer in layers:
        for t in (layer.k, layer.v):
            t.copy_(torch.randint(-100, 100, t.shape, generator=generator).to(t.dtype))
        for scale in (layer.k_scale, layer.v_scale):
            if scale is not None:
                scale.copy_(torch.rand(scale.shape, generator=generator) + 0.1)
    return layers


def test_int8_blocks_copy_with_their_scales():
    src, dst = _filled("int8", 6, seed=1), _filled("int8", 5, seed=2)
    moved = copy_kv_blocks(src, [4, 0], dst, [1, 3])
    for s, d in zip(src, dst):
        for a, b in ((s.k, d.k), (s.v, d.v), (s.k_scale, d.k_scale), (s.v_scale, d.v_scale)):
            assert torch.equal(a[4], b[1]) and torch.equal(a[0], b[3])
    # 2 layers x 2 blocks x (k + v: 4 x 2 x 8 int8 bytes; scales: 2 heads x float32)
    assert moved == 2 * 2 * (2 * 64 + 2 * 2 * 4)


def test_host_tier_round_trip_keeps_int8_scales():
    gpu = _filled("int8", 4, seed=3)
    host = host_kv_cache(gpu, 3)
    assert host[0].k_scale is not None and host[0].k_scale.shape == (3, 2)
    expected = [(layer.k[2].clone(), layer.k_scale[2].clone()) for layer in gpu]
    apply_host_moves(gpu, host, [("save", 2, 1)])
    for layer in gpu:
        layer.k[2].zero_()
        layer.k_scale[2].zero_()
    apply_host_moves(gpu, host, [("load", 1, 0)])
    for layer, (k, scale) in zip(gpu, expected):
        assert torch.equal(layer.k[0], k) and torch.equal(layer.k_scale[0], scale)


def test_fp8_destination_takes_the_source_scale_and_refuses_another():
    src = _filled("fp8", 3, seed=4)
    fresh = [allocate_layer(3, 4, 2, 8, "fp8", torch.float32, CPU) for _ in range(2)]
    copy_kv_blocks(src, [0], fresh, [2])
    for s, d in zip(src, fresh):
        assert torch.equal(s.k_scale, d.k_scale) and torch.equal(s.k[0], d.k[2])
    other = _filled("fp8", 3, seed=5)
    with pytest.raises(AssertionError, match="fp8 KV scales differ"):
        copy_kv_blocks(src, [0], other, [1])
