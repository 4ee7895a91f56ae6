"""Static batching's contiguous reservations, searched in kept-up-to-date free runs, against the algorithm
they replaced (sort every free block per admission, first fit): on a random sequence of reservations,
paged allocations with prefix-cache hits, and frees, both managers hand out the same blocks and keep the
same free list, in the same order."""

import random
from itertools import chain

import pytest
from compiled_build import pure_python_only

from engine.core.block_manager import BlockManager
from engine.core.request import Request
from engine.core.sampling_params import SamplingParams


class SortingBlockManager(BlockManager):
    """The block manager as it was: contiguous runs found by sorting the free blocks on every call."""

    def _find_run(self, num_blocks: int) -> int | None:
        run_start, run_len = None, 0
        for block in sorted(chain(self._free_uncached, self._free_cached)):
            if run_len and block == run_start + run_len:
                run_len += 1
            else:
                run_start, run_len = block, 1
            if run_len >= num_blocks:
                return run_start
        return None

    def allocate_contiguous(self, request: Request, num_blocks: int) -> None:
        start = self._find_run(num_blocks)
        assert start is not None and not request.block_table
        run = range(start, start + num_blocks)
        for block in run:
            if self.block_hash[block] is not None:
                del self._free_cached[block]
                self._evict(block)
            self.ref_counts[block] = 1
        self._free_uncached = [block for block in self._free_uncached if block not in run]
        request.block_table.extend(run)
        self.num_allocations += num_blocks
        self.tenant_blocks[request.tenant] += num_blocks


def _request(name: str, tokens: list[int]) -> Request:
    return Request(name, tokens, SamplingParams(max_tokens=1), 0.0)


@pure_python_only  # (it subclasses BlockManager)
@pytest.mark.parametrize("seed", range(3))
def test_reservations_match_the_sorting_algorithm(seed):
    rng = random.Random(seed)
    block_size, num_blocks = 4, 96
    managers = [BlockManager(num_blocks, block_size), SortingBlockManager(num_blocks, block_size)]
    prefixes = [
        [rng.randrange(50) for _ in range(12)] for _ in range(3)
    ]  # shared prompts: cache hits
    holders: list[tuple[Request, Request]] = []
    reserved = num_hits = 0
    for step in range(3000):
        action = rng.random()
        if action < 0.45:  # a static reservation
            num = rng.randint(1, 14)
            pair = (_request(f"c{step}", [1]), _request(f"c{step}", [1]))
            fits = [bm.can_allocate_contiguous(req, num) for bm, req in zip(managers, pair)]
            assert fits[0] == fits[1], f"step {step}: reserving {num} blocks"
            if fits[0]:
                for bm, req in zip(managers, pair):
                    bm.allocate_contiguous(req, num)
                holders.append(pair)
                reserved += 1
        elif action < 0.65:  # a paged allocation, maybe from the cache
            tokens = rng.choice(prefixes) + [rng.randrange(50) for _ in range(rng.randint(1, 9))]
            pair = (_request(f"p{step}", tokens), _request(f"p{step}", tokens))
            cached = [bm.get_computed_blocks(req) for bm, req in zip(managers, pair)]
            fits = [
                bm.can_allocate(req, len(tokens), hits)
                for bm, req, hits in zip(managers, pair, cached)
            ]
            assert cached[0] == cached[1] and fits[0] == fits[1], f"step {step}: paged allocation"
            if fits[0]:
                for bm, req, hits in zip(managers, pair, cached):
                    bm.allocate(req, len(tokens), hits)
                    req.num_computed_tokens = len(tokens)
                    bm.cache_full_blocks(req)
                holders.append(pair)
                num_hits += len(cached[0])
        elif holders:  # a request finishes
            pair = holders.pop(rng.randrange(len(holders)))
            for bm, req in zip(managers, pair):
                bm.free(req)
        new, old = managers
        assert new.free_blocks == old.free_blocks, f"step {step}: free lists differ"
        assert [a.block_table for a, _ in holders] == [b.block_table for _, b in holders], (
            f"step {step}"
        )
        assert new.hash_to_block == old.hash_to_block
    assert reserved > 300 and num_hits > 50  # the sequence did reserve, and did hit the cache
