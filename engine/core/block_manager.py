"""A fixed pool of KV blocks: per-request block tables, reference counts and a prefix cache.

Pure Python, shared by the live engine and the simulator. A block holds `block_size` token slots.
Full blocks are registered in the prefix cache under a chained hash of their tokens, so a later
request with the same prefix shares them. Free blocks are kept in LRU order: a cached block stays
findable until a fresh allocation evicts it, and blocks holding nothing reusable go first.
"""
from collections import Counter, OrderedDict
from collections.abc import Sequence

from engine.core.request import Request


def blocks_for(num_tokens: int, block_size: int) -> int:
    return (num_tokens + block_size - 1) // block_size


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True,
                 tenant_block_quota: dict[str, int] | None = None):
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"num_blocks={num_blocks}, block_size={block_size}; expected both ≥ 1")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.tenant_block_quota = dict(tenant_block_quota or {})
        self.ref_counts = [0] * num_blocks
        self.block_hash: list[int | None] = [None] * num_blocks
        self.free_blocks: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))  # LRU first
        self.hash_to_block: dict[int, int] = {}
        self.tenant_blocks: Counter[str] = Counter()
        self.num_allocations = 0            # fresh blocks handed out since start (allocation rate)
        self.num_prefix_queries = 0         # prompt tokens looked up in the prefix cache
        self.num_prefix_hits = 0            # of which served from it

    # ---- accounting ----------------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        return len(self.free_blocks)

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - len(self.free_blocks)

    @property
    def num_cached_free_blocks(self) -> int:
        return sum(1 for b in self.free_blocks if self.block_hash[b] is not None)

    def tenant_headroom(self, tenant: str) -> int | None:
        quota = self.tenant_block_quota.get(tenant)
        return None if quota is None else quota - self.tenant_blocks[tenant]

    # ---- prefix cache ----------------------------------------------------------------------------
    def _hashes_upto(self, request: Request, num_full_blocks: int) -> list[int]:
        hashes, size = request.block_hashes, self.block_size
        while len(hashes) < num_full_blocks:
            i = len(hashes)
            parent = hashes[-1] if hashes else None
            hashes.append(hash((parent, tuple(request.token_ids(i * size, (i + 1) * size)))))
        return hashes

    def get_computed_blocks(self, request: Request) -> list[int]:
        """Cached blocks matching the request's leading full blocks; the last token is always left
        to compute, so the step still produces logits."""
        if not self.enable_prefix_caching:
            return []
        num_full = (request.num_tokens - 1) // self.block_size
        hits: list[int] = []
        for h in self._hashes_upto(request, num_full):
            block = self.hash_to_block.get(h)
            if block is None:
                break
            hits.append(block)
        return hits

    def cache_full_blocks(self, request: Request) -> None:
        """Register the request's blocks that became full of computed tokens."""
        if not self.enable_prefix_caching:
            return
        num_full = request.num_computed_tokens // self.block_size
        if num_full <= request.num_hashed_blocks:
            return
        hashes = self._hashes_upto(request, num_full)
        for i in range(request.num_hashed_blocks, num_full):
            block, h = request.block_table[i], hashes[i]
            if h not in self.hash_to_block and self.block_hash[block] is None:
                self.hash_to_block[h] = block
                self.block_hash[block] = h
        request.num_hashed_blocks = num_full

    # ---- allocation ------------------------------------------------------------------------------
    def _new_blocks_needed(self, request: Request, num_tokens: int, cached_blocks: Sequence[int]) -> int:
        have = len(request.block_table) + len(cached_blocks)
        return max(0, blocks_for(num_tokens, self.block_size) - have)

    def can_allocate(self, request: Request, num_tokens: int, cached_blocks: Sequence[int] = ()) -> bool:
        """Whether the request's table can grow to cover `num_tokens` tokens (cached blocks first)."""
        fresh = self._new_blocks_needed(request, num_tokens, cached_blocks)
        revived = sum(1 for b in cached_blocks if self.ref_counts[b] == 0)
        if fresh + revived > len(self.free_blocks):
            return False
        headroom = self.tenant_headroom(request.tenant)
        return headroom is None or fresh + len(cached_blocks) <= headroom

    def allocate(self, request: Request, num_tokens: int, cached_blocks: Sequence[int] = ()) -> None:
        assert self.can_allocate(request, num_tokens, cached_blocks), f"{request} cannot get blocks for {num_tokens} tokens"
        fresh = self._new_blocks_needed(request, num_tokens, cached_blocks)
        if self.enable_prefix_caching and not request.block_table:     # an admission: count its lookup
            self.num_prefix_queries += request.num_tokens
            self.num_prefix_hits += len(cached_blocks) * self.block_size
        for block in cached_blocks:
            if self.ref_counts[block] == 0:
                del self.free_blocks[block]
            self.ref_counts[block] += 1
        request.block_table.extend(cached_blocks)
        request.num_hashed_blocks += len(cached_blocks)
        request.block_table.extend(self._take_fresh() for _ in range(fresh))
        self.tenant_blocks[request.tenant] += fresh + len(cached_blocks)

    def can_allocate_contiguous(self, request: Request, num_blocks: int) -> bool:
        headroom = self.tenant_headroom(request.tenant)
        return (headroom is None or num_blocks <= headroom) and self._find_run(num_blocks) is not None

    def allocate_contiguous(self, request: Request, num_blocks: int) -> None:
        """Static batching's reservation: one run of adjacent blocks for the longest possible sequence."""
        start = self._find_run(num_blocks)
        assert start is not None and not request.block_table, f"{request} cannot reserve {num_blocks} contiguous blocks"
        for block in range(start, start + num_blocks):
            del self.free_blocks[block]
            self._evict(block)
            self.ref_counts[block] = 1
        request.block_table.extend(range(start, start + num_blocks))
        self.num_allocations += num_blocks
        self.tenant_blocks[request.tenant] += num_blocks

    def free(self, request: Request) -> None:
        """Release the request's blocks, tail first, so shared prefixes outlive private suffixes."""
        for block in reversed(request.block_table):
            self.ref_counts[block] -= 1
            if self.ref_counts[block] == 0:
                self.free_blocks[block] = None
                if self.block_hash[block] is None:
                    self.free_blocks.move_to_end(block, last=False)   # nothing to reuse: hand it out first
        self.tenant_blocks[request.tenant] -= len(request.block_table)
        request.block_table = []
        request.num_hashed_blocks = 0

    def _take_fresh(self) -> int:
        block, _ = self.free_blocks.popitem(last=False)
        self._evict(block)
        self.ref_counts[block] = 1
        self.num_allocations += 1
        return block

    def _evict(self, block: int) -> None:
        h = self.block_hash[block]
        if h is not None:
            if self.hash_to_block.get(h) == block:
                del self.hash_to_block[h]
            self.block_hash[block] = None

    def _find_run(self, num_blocks: int) -> int | None:
        run_start, run_len = None, 0
        for block in sorted(self.free_blocks):
            if run_len and block == run_start + run_len:
                run_len += 1
            else:
                run_start, run_len = block, 1
            if run_len >= num_blocks:
                return run_start
        return None
