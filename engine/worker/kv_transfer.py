"""Copies KV blocks between paged caches: from one engine's cache to another's (the live engine's side
of prefill/decode disaggregation; the scheduler side is `engine.core.kv_handoff`), and between the GPU
cache and the host tier (`engine.core.host_tier`: saves of evicted blocks, loads of host hits).

In one process the copy is a gather of the source blocks and a scatter into the destination blocks,
layer by layer; between machines the same bytes would go over NVLink, PCIe or the network (the
simulator times that from the link's bandwidth and latency). Returns the bytes moved.
"""

import torch

from kernels.kv_quant import FP8_DTYPES, PagedKVCache

KVCaches = list[
    PagedKVCache
]  # per layer: k, v [N, block_size, Hkv, D] and their scales (None unquantised)


def _block_tensors(layer: PagedKVCache) -> list[torch.Tensor]:
    """The tensors of a layer indexed by block: k, v, and the int8 cache's per-block scales
    [N, Hkv]. (An fp8 cache's per-tensor scale is not per block: see `_match_tensor_scales`.)"""
    tensors = [layer.k, layer.v]
    if layer.k.dtype in FP8_DTYPES:  # copied as bytes: torch's CPU index_copy_ has no fp8 kernel
        tensors = [t.view(torch.uint8) for t in tensors]
    if layer.k_scale is not None and layer.k_scale.dim() == 2:
        tensors += [layer.k_scale, layer.v_scale]
    return tensors


def _match_tensor_scales(src: PagedKVCache, dst: PagedKVCache) -> None:
    """An fp8 cache has one scale per tensor: the destination takes the source's when it has none yet
    (0); two different calibrated scales would make the copied bytes mean other values."""
    if src.k_scale is None or src.k_scale.dim() != 1:
        return
    for s, d in ((src.k_scale, dst.k_scale), (src.v_scale, dst.v_scale)):
        if float(d.item()) == 0.0:
            d.copy_(s.to(d.device))
        assert torch.equal(s.cpu(), d.cpu()), (
            f"fp8 KV scales differ ({float(s.item())} vs {float(d.item())}); expected one scale for both caches"
        )


def copy_kv_blocks(
    src: KVCaches, src_blocks: list[int], dst: KVCaches, dst_blocks: list[int]
) -> int:
    """Copy blocks `src_blocks[i]` of every layer of `src` into `dst_blocks[i]` of `dst`."""
    assert len(src_blocks) == len(dst_blocks), (
        f"{len(src_blocks)} source blocks for {len(dst_blocks)} destinations"
    )
    assert len(src) == len(dst), f"{len(src)} source layers, {len(dst)} destination layers"
    if not src_blocks:
        return 0
    moved = 0
    src_index = torch.tensor(src_blocks, dtype=torch.long, device=src[0].k.device)
    dst_index = torch.tensor(dst_blocks, dtype=torch.long, device=dst[0].k.device)
    for src_layer, dst_layer in zip(src, dst):
        assert (
            src_layer.k.shape[1:] == dst_layer.k.shape[1:]
            and src_layer.k.dtype == dst_layer.k.dtype
        ), (
            f"cache layouts differ: {tuple(src_layer.k.shape)} {src_layer.k.dtype} vs "
            f"{tuple(dst_layer.k.shape)} {dst_layer.k.dtype}"
        )
        _match_tensor_scales(src_layer, dst_layer)
        for s, d in zip(_block_tensors(src_layer), _block_tensors(dst_layer)):
            blocks = s.index_select(0, src_index)  # [n, block_size, Hkv, D] (scales: [n, Hkv])
            d.index_copy_(0, dst_index, blocks.to(d.device))
            moved += blocks.numel() * blocks.element_size()
    return moved


def host_kv_cache(gpu: KVCaches, num_blocks: int) -> KVCaches:
    """The host tier's storage: `num_blocks` blocks per layer, laid out as the GPU cache (with per-block
    scales where the GPU cache has them), in CPU memory (pinned when the cache is on a GPU, so copies can
    go at PCIe speed). An fp8 cache's per-tensor scale stays the GPU's: one engine, one scale."""
    pin = gpu[0].k.device.type == "cuda"

    def like(t: torch.Tensor) -> torch.Tensor:
        return torch.zeros((num_blocks, *t.shape[1:]), dtype=t.dtype, pin_memory=pin)

    host = []
    for layer in gpu:
        per_block = layer.k_scale is not None and layer.k_scale.dim() == 2
        host.append(
            PagedKVCache(
                like(layer.k),
                like(layer.v),
                like(layer.k_scale) if per_block else None,
                like(layer.v_scale) if per_block else None,
            )
        )
    return host


def apply_host_moves(gpu: KVCaches, host: KVCaches, moves: list[tuple[str, int, int]]) -> int:
    """Apply the host tier's recorded moves in order: ("save", GPU block, host slot) copies a block out,
    ("load", host slot, GPU block) copies one back. Returns the bytes moved."""
    moved = 0
    for kind, a, b in moves:
        for gpu_layer, host_layer in zip(gpu, host):
            for g, h in zip(_block_tensors(gpu_layer), _block_tensors(host_layer)):
                if kind == "save":
                    h[b].copy_(g[a])
                else:
                    g[b].copy_(h[a])
                moved += g[0].numel() * g.element_size()
    return moved
