"""The free KV blocks as maximal runs of adjacent block numbers: what static batching's contiguous
reservation searches, first fit (the lowest-numbered run long enough).

Searching by sorting every free block at each admission costs O(free · log free); the runs themselves,
kept up to date as blocks are freed and reserved, make an admission a scan of the runs only: under the
static policy at most one more than the requests holding reservations. Pure Python, like the block
manager that owns it (and builds it only when a contiguous reservation is first asked for, so the
continuous policy never pays for it).
"""

from collections.abc import Iterable


class FreeRuns:
    def __init__(self, free_blocks: Iterable[int], num_blocks: int):
        self._end_of: dict[int, int] = {}  # a run's first block -> one past its last block
        self._start_of: dict[int, int] = {}  # one past a run's last block -> its first block
        is_free = bytearray(num_blocks)
        for block in free_blocks:
            is_free[block] = 1
        position = 0
        while (start := is_free.find(1, position)) != -1:
            end = is_free.find(0, start)
            end = num_blocks if end == -1 else end
            self._end_of[start], self._start_of[end] = end, start
            position = end

    def first_fit(self, num_blocks: int) -> int | None:
        """The first block of the lowest-numbered run of at least `num_blocks` free blocks, or None."""
        best = None
        for start, end in self._end_of.items():
            if end - start >= num_blocks and (best is None or start < best):
                best = start
        return best

    def take(self, start: int, num_blocks: int) -> None:
        """The first `num_blocks` blocks of the run beginning at `start` are no longer free."""
        end = self._end_of.pop(start)
        del self._start_of[end]
        assert end - start >= num_blocks, (
            f"the free run at block {start} has {end - start} blocks, not {num_blocks}"
        )
        if start + num_blocks < end:
            self._end_of[start + num_blocks], self._start_of[end] = end, start + num_blocks

    def add(self, block: int) -> None:
        """`block` became free: it joins the runs that end just before it and begin just after it."""
        start, end = block, block + 1
        if start in self._start_of:  # a run ends right before it
            start = self._start_of.pop(start)
            del self._end_of[start]
        if end in self._end_of:  # a run begins right after it
            end = self._end_of.pop(end)
            del self._start_of[end]
        self._end_of[start], self._start_of[end] = end, start
