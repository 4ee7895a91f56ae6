"""A fixed pool of KV blocks: per-request block tables, reference counts and a prefix cache.

Pure Python, shared by the live engine and the simulator. A block holds `block_size` token slots.
Full blocks are registered in the prefix cache under a chained hash of their tokens, so a later
request with the same prefix shares them. Free blocks are handed out in LRU order: a cached block stays
findable until a fresh allocation evicts it, and blocks holding nothing reusable go first, the last one
freed first. So the free list is two parts: a stack of the uncached free blocks, then the cached ones in
LRU order; a block never changes part while it is free. Every count the scheduler reads per step is a
length or a counter kept up to date, O(1). Static batching's contiguous reservations search the free
blocks as runs of adjacent blocks (`FreeRuns`), kept up to date once the first one is asked for.

The per-block loops read block ids and hashes through `list[Any]` / `dict[Any, ...]` views of the same
containers (`make compiled`: mypyc keeps an `Any` item as the object already stored, where an `int` one
is unboxed and boxed again, a new int object for every block id above 256 and every other hash, each
time it is stored or looked up; in CPython the annotation changes nothing).
"""

from collections import Counter, OrderedDict
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any

from engine.core.free_runs import FreeRuns
from engine.core.host_tier import HostKVTier
from engine.core.request import Request


def blocks_for(num_tokens: int, block_size: int) -> int:
    return (num_tokens + block_size - 1) // block_size


class BlockManager:
    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        enable_prefix_caching: bool = True,
        tenant_block_quota: dict[str, int] | None = None,
    ):
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"num_blocks={num_blocks}, block_size={block_size}; expected both ≥ 1")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.tenant_block_quota = dict(tenant_block_quota or {})
        self.ref_counts = [0] * num_blocks
        self.block_hash: list[int | None] = [None] * num_blocks
        self._free_uncached = list(
            range(num_blocks - 1, -1, -1)
        )  # a stack: the next one out is last
        self._free_cached: OrderedDict[int, None] = OrderedDict()  # least recently used first
        # the free blocks as runs, for contiguous reservations: built when one is first asked for, kept up
        # to date by frees and reservations, dropped when blocks go out one by one (rebuilt when next needed)
        self._runs: FreeRuns | None = None
        self.hash_to_block: dict[int, int] = {}
        self.tenant_blocks: Counter[str] = Counter()
        self.num_allocations = 0  # fresh blocks handed out since start (allocation rate)
        self.num_prefix_queries = 0  # prompt tokens looked up in the prefix cache
        self.num_prefix_hits = 0  # of which served from it (host-tier loads included)
        self.host_tier: HostKVTier | None = None  # a KV tier in host memory (engine.core.host_tier)

    # ---- accounting ----------------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        return len(self._free_uncached) + len(self._free_cached)

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - len(self._free_uncached) - len(self._free_cached)

    @property
    def num_cached_free_blocks(self) -> int:
        return len(self._free_cached)

    def iter_free_blocks(self) -> Iterator[int]:
        """The free blocks in the order fresh allocations take them."""
        return chain(reversed(self._free_uncached), self._free_cached)

    @property
    def free_blocks(self) -> list[int]:
        return list(self.iter_free_blocks())

    def tenant_headroom(self, tenant: str) -> int | None:
        quota = self.tenant_block_quota.get(tenant)
        return None if quota is None else quota - self.tenant_blocks[tenant]

    # ---- prefix cache ----------------------------------------------------------------------------
    def _hashes_upto(self, request: Request, num_full_blocks: int) -> list[int]:
        hashes, size = request.block_hashes, self.block_size
        start = len(hashes)
        if start < num_full_blocks:
            tokens = request.token_ids(start * size, num_full_blocks * size)
            parent = hashes[-1] if hashes else None
            for offset in range(0, len(tokens), size):
                parent = hash((parent, tuple(tokens[offset : offset + size])))
                hashes.append(parent)
        return hashes

    def get_computed_blocks(self, request: Request) -> list[int]:
        """Cached blocks matching the request's leading full blocks; the last token is always left
        to compute, so the step still produces logits."""
        if not self.enable_prefix_caching:
            return []
        num_full = (request.num_tokens - 1) // self.block_size
        hashes: list[Any] = self._hashes_upto(request, num_full)
        # the blocks of the leading hashes found, up to the first not found (a plain loop: as fast as
        # map/takewhile in CPython, and mypyc compiles it to native dict lookups)
        hash_to_block: dict[Any, Any] = self.hash_to_block
        hits: list[Any] = []
        for h in hashes:
            block = hash_to_block.get(h)
            if block is None:
                break
            hits.append(block)
        if self.host_tier is not None and len(hits) < num_full:
            self._promote_from_host(hashes[len(hits) : num_full], hits)
        return hits

    def _promote_from_host(self, hashes: list[int], hits: list[int]) -> None:
        """Bring the blocks that continue `hits` in the host tier back into free GPU blocks (cached, so
        they are ordinary hits), while a free block that is not itself a hit is left to take."""
        tier, uncached, cached = self.host_tier, self._free_uncached, self._free_cached
        assert tier is not None  # (called only with a host tier)
        hit_set = set(hits)
        for h in hashes:
            if tier.lookup(h) is None:
                break
            if uncached:
                block = uncached.pop()
            elif cached and next(iter(cached)) not in hit_set:
                block, _ = cached.popitem(last=False)
                self._evict(block)
            else:
                break
            self._runs = None
            self.block_hash[block] = h
            self.hash_to_block[h] = block
            cached[block] = None
            tier.load(h, block)
            hits.append(block)
            hit_set.add(block)

    def cache_full_blocks(self, request: Request, num_full: int | None = None) -> None:
        """Register the request's blocks that became full of computed tokens (the first `num_full`
        blocks, when given: a decode stretch registers them step by step)."""
        if not self.enable_prefix_caching:
            return
        if num_full is None:
            num_full = request.num_computed_tokens // self.block_size
        if num_full <= request.num_hashed_blocks:
            return
        hashes: list[Any] = self._hashes_upto(request, num_full)
        table: list[Any] = request.block_table
        block_hash: list[Any] = self.block_hash
        hash_to_block: dict[Any, Any] = self.hash_to_block
        for i in range(request.num_hashed_blocks, num_full):
            block, h = table[i], hashes[i]
            if h not in hash_to_block and block_hash[block] is None:
                hash_to_block[h] = block
                block_hash[block] = h
        request.num_hashed_blocks = num_full

    # ---- allocation ------------------------------------------------------------------------------
    def _new_blocks_needed(
        self, request: Request, num_tokens: int, cached_blocks: Sequence[int]
    ) -> int:
        fresh = -(-num_tokens // self.block_size) - len(request.block_table) - len(cached_blocks)
        return fresh if fresh > 0 else 0

    def can_allocate(
        self, request: Request, num_tokens: int, cached_blocks: Sequence[int] = ()
    ) -> bool:
        """Whether the request's table can grow to cover `num_tokens` tokens (cached blocks first)."""
        fresh = self._new_blocks_needed(request, num_tokens, cached_blocks)
        ref_counts, revived = self.ref_counts, 0  # cached blocks that are free now
        for block in cached_blocks:
            if ref_counts[block] == 0:
                revived += 1
        if fresh + revived > len(self._free_uncached) + len(self._free_cached):
            return False
        quota = self.tenant_block_quota.get(request.tenant) if self.tenant_block_quota else None
        return (
            quota is None
            or fresh + len(cached_blocks) <= quota - self.tenant_blocks[request.tenant]
        )

    def allocate(
        self, request: Request, num_tokens: int, cached_blocks: Sequence[int] = ()
    ) -> None:
        assert self.can_allocate(request, num_tokens, cached_blocks), (
            f"{request} cannot get blocks for {num_tokens} tokens"
        )
        fresh = self._new_blocks_needed(request, num_tokens, cached_blocks)
        if self.enable_prefix_caching and not request.block_table:  # an admission: count its lookup
            self.num_prefix_queries += request.num_tokens
            self.num_prefix_hits += len(cached_blocks) * self.block_size
        ref_counts = self.ref_counts
        for block in cached_blocks:
            count = ref_counts[block]
            if count == 0:
                del self._free_cached[block]  # a hit is a cached block
                self._runs = None
            ref_counts[block] = count + 1
        request.block_table.extend(cached_blocks)
        request.num_hashed_blocks += len(cached_blocks)
        self.tenant_blocks[request.tenant] += len(cached_blocks)
        if fresh:
            self.take_fresh_blocks(request, fresh)

    def grow(self, request: Request, num_tokens: int) -> bool:
        """`allocate(request, num_tokens)` if `can_allocate(request, num_tokens)`, in one pass (a running
        request's next tokens: no cached blocks); False, changing nothing, when it cannot."""
        fresh = -(-num_tokens // self.block_size) - len(request.block_table)
        if fresh <= 0:
            return True  # `allocate` would hand out nothing (and count no lookup: the table is not empty)
        if fresh > len(self._free_uncached) + len(self._free_cached):
            return False
        if self.tenant_block_quota:
            quota = self.tenant_block_quota.get(request.tenant)
            if quota is not None and fresh > quota - self.tenant_blocks[request.tenant]:
                return False
        if self.enable_prefix_caching and not request.block_table:
            self.num_prefix_queries += request.num_tokens
        self.take_fresh_blocks(request, fresh)
        return True

    def take_fresh_blocks(self, request: Request, count: int = 1) -> None:
        """Hand the `count` least recently used free blocks to the end of the request's table (evicting
        what they cached); the caller has checked the pool and the tenant's quota."""
        uncached: list[Any] = self._free_uncached
        table: list[Any] = request.block_table
        ref_counts = self.ref_counts
        self._runs = None
        first = len(table)
        if count == 1 and uncached:  # a running request's next block: the commonest case
            table.append(uncached.pop())
        elif count <= len(uncached):  # the loop below, in bulk: the uncached stack has them all
            table.extend(reversed(uncached[len(uncached) - count :]))
            del uncached[len(uncached) - count :]
        else:
            cached: OrderedDict[Any, None] = self._free_cached
            for _ in range(count):
                if uncached:
                    block = uncached.pop()
                else:
                    block, _ = cached.popitem(last=False)
                    self._evict(block)
                table.append(block)
        for i in range(first, len(table)):
            index: int = table[i]
            ref_counts[index] = 1
        self.num_allocations += count
        self.tenant_blocks[request.tenant] += count

    def take_fresh_block_each(self, requests: Sequence[Request]) -> None:
        """Exactly `take_fresh_blocks(request)` for each of `requests` in turn (a request may repeat), in
        one loop: what a decode stretch's block crossings do, in the step-by-step order."""
        uncached: list[Any] = self._free_uncached
        cached: OrderedDict[Any, None] = self._free_cached
        ref_counts = self.ref_counts
        self._runs = None
        tenants: dict[str, int] = {}
        for request in requests:
            if uncached:
                block = uncached.pop()
            else:
                block, _ = cached.popitem(last=False)
                self._evict(block)
            index: int = block
            ref_counts[index] = 1
            table: list[Any] = request.block_table
            table.append(block)
            tenants[request.tenant] = tenants.get(request.tenant, 0) + 1
        self.num_allocations += len(requests)
        for tenant, count in tenants.items():
            self.tenant_blocks[tenant] += count

    def can_allocate_contiguous(self, request: Request, num_blocks: int) -> bool:
        headroom = self.tenant_headroom(request.tenant)
        return (headroom is None or num_blocks <= headroom) and self._find_run(
            num_blocks
        ) is not None

    def allocate_contiguous(self, request: Request, num_blocks: int) -> None:
        """Static batching's reservation: one run of adjacent blocks for the longest possible sequence."""
        start = self._find_run(num_blocks)
        assert start is not None and not request.block_table, (
            f"{request} cannot reserve {num_blocks} contiguous blocks"
        )
        end = start + num_blocks
        run = range(start, end)
        for block in run:
            if self.block_hash[block] is not None:
                del self._free_cached[block]
                self._evict(block)
            self.ref_counts[block] = 1
        assert self._runs is not None  # built by `_find_run`
        self._runs.take(start, num_blocks)
        self._free_uncached = [block for block in self._free_uncached if not start <= block < end]
        request.block_table.extend(run)
        self.num_allocations += num_blocks
        self.tenant_blocks[request.tenant] += num_blocks

    def free(self, request: Request) -> None:
        """Release the request's blocks, tail first, so shared prefixes outlive private suffixes."""
        ref_counts, block_hash = self.ref_counts, self.block_hash
        uncached: list[Any] = self._free_uncached
        cached: OrderedDict[Any, None] = self._free_cached
        runs = self._runs
        table: list[Any] = request.block_table
        if not self.enable_prefix_caching and runs is None:
            # without the prefix cache a block has one holder and no hash: the loop below, in bulk
            for block in table:
                index: int = block
                ref_counts[index] = 0
            uncached.extend(reversed(table))
        else:
            # tail first (an index loop: mypyc cannot reverse a list[Any])
            for i in range(len(table) - 1, -1, -1):
                block = table[i]
                index = block
                count = ref_counts[index] - 1
                ref_counts[index] = count
                if count == 0:
                    if block_hash[index] is None:
                        uncached.append(block)  # nothing to reuse: hand it out first
                    else:
                        cached[block] = None
                    if runs is not None:
                        runs.add(index)
        left = self.tenant_blocks[request.tenant] - len(request.block_table)
        if left:
            self.tenant_blocks[request.tenant] = left
        else:
            self.tenant_blocks.pop(request.tenant, None)  # no zero entry per tenant name ever seen
        request.block_table = []
        request.num_hashed_blocks = 0

    def _evict(self, block: Any) -> None:
        index: int = block
        h: Any = self.block_hash[index]
        if h is not None:
            hash_to_block: dict[Any, Any] = self.hash_to_block
            if hash_to_block.get(h) == block:
                del hash_to_block[h]
            self.block_hash[index] = None
            if self.host_tier is not None:
                self.host_tier.store(h, index)

    def _find_run(self, num_blocks: int) -> int | None:
        """First fit: the first block of the lowest-numbered run of `num_blocks` free adjacent blocks."""
        if self._runs is None:
            self._runs = FreeRuns(self.iter_free_blocks(), self.num_blocks)
        return self._runs.first_fit(num_blocks)
