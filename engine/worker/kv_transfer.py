"""Copies KV blocks between paged caches: from one engine's cache to another's (the live engine's side
of prefill/decode disaggregation; the scheduler side is `engine.core.kv_handoff`), and between the GPU
cache and the host tier (`engine.core.host_tier`: saves of evicted blocks, loads of host hits).

In one process the copy is a gather of the source blocks and a scatter into the destination blocks,
layer by layer; between machines the same bytes would go over NVLink, PCIe or the network (the
simulator times that from the link's bandwidth and latency). Returns the bytes moved.
"""

import torch

KVCaches = list[
    tuple[torch.Tensor, torch.Tensor]
]  # per layer: (key, value), each [N, block_size, Hkv, D]


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
    src_index = torch.tensor(src_blocks, dtype=torch.long, device=src[0][0].device)
    dst_index = torch.tensor(dst_blocks, dtype=torch.long, device=dst[0][0].device)
    for (src_k, src_v), (dst_k, dst_v) in zip(src, dst):
        assert src_k.shape[1:] == dst_k.shape[1:] and src_k.dtype == dst_k.dtype, (
            f"cache layouts differ: {tuple(src_k.shape)} {src_k.dtype} vs {tuple(dst_k.shape)} {dst_k.dtype}"
        )
        for s, d in ((src_k, dst_k), (src_v, dst_v)):
            blocks = s.index_select(0, src_index)  # [n, block_size, Hkv, D]
            d.index_copy_(0, dst_index, blocks.to(d.device))
            moved += blocks.numel() * blocks.element_size()
    return moved


def host_kv_cache(gpu: KVCaches, num_blocks: int) -> KVCaches:
    """The host tier's storage: `num_blocks` blocks per layer, laid out as the GPU cache, in CPU memory
    (pinned when the cache is on a GPU, so copies can go at PCIe speed)."""
    pin = gpu[0][0].device.type == "cuda"
    return [
        tuple(
            torch.zeros((num_blocks, *k.shape[1:]), dtype=k.dtype, pin_memory=pin)
            for k in (key, value)
        )
        for key, value in gpu
    ]


def apply_host_moves(gpu: KVCaches, host: KVCaches, moves: list[tuple[str, int, int]]) -> int:
    """Apply the host tier's recorded moves in order: ("save", GPU block, host slot) copies a block out,
    ("load", host slot, GPU block) copies one back. Returns the bytes moved."""
    moved = 0
    for kind, a, b in moves:
        for (gpu_k, gpu_v), (host_k, host_v) in zip(gpu, host):
            for g, h in ((gpu_k, host_k), (gpu_v, host_v)):
                if kind == "save":
                    h[b].copy_(g[a])
                else:
                    g[b].copy_(h[a])
                moved += g[0].numel() * g.element_size()
    return moved
