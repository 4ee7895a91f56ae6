"""A second KV tier in host memory behind the GPU prefix cache (vLLM's CPU offloading, LMCache, Mooncake's
store). Pure Python: it keeps which block hashes it holds; the executor moves the bytes.

- **Store**: a cached block the GPU pool evicts (to hand its slot to a fresh allocation) is copied to
  host memory under its hash, the least recently stored dropped when the tier is full.
- **Load**: when a request's leading blocks miss the GPU cache but continue in the host tier, the block
  manager brings them back into free GPU blocks (`promote`), where they are ordinary prefix-cache hits;
  the step that admits the request pays their PCIe time (`SchedulerOutput.host_loaded_blocks`).
- **Swap instead of recompute**: a preempted request's full blocks are registered in the prefix cache,
  so when they are evicted they land here, and its readmission loads them rather than recomputing them
  (vLLM's old swap mode). Loading is used only while it is cheaper than recomputing: the executor gives
  both per-block costs, and with `load_s_per_block ≥ recompute_s_per_block` the tier stores nothing.

Saves and loads are recorded as (GPU block, host slot) pairs for an executor that moves real bytes (the
live engine copies tensors before the step's forward pass; the simulator only times the loads).
"""

from __future__ import annotations

from collections import OrderedDict


class HostKVTier:
    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        load_s_per_block: float = 0.0,
        recompute_s_per_block: float = float("inf"),
        record_moves: bool = False,
    ):
        if num_blocks < 1:
            raise ValueError(f"host tier of {num_blocks} blocks; expected ≥ 1")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.load_s_per_block = load_s_per_block
        self.recompute_s_per_block = recompute_s_per_block
        self.enabled = (
            load_s_per_block < recompute_s_per_block
        )  # else recomputing is the cheaper way back
        self.slots: OrderedDict[int, int] = (
            OrderedDict()
        )  # block hash -> host slot, least recent first
        self._free_slots = list(range(num_blocks - 1, -1, -1))
        self.record_moves = record_moves
        # ("save", GPU block, host slot) / ("load", host slot, GPU block), to apply in order before the next step
        self.moves: list[tuple[str, int, int]] = []
        self.num_loaded_pending = 0  # blocks loaded since the last `take_loaded`
        self.num_stores = 0
        self.num_hits = 0  # blocks loaded back (each `block_size` prompt tokens)

    def __len__(self) -> int:
        return len(self.slots)

    def store(self, block_hash: int, gpu_block: int) -> None:
        """The GPU pool is evicting `gpu_block`, which caches `block_hash`: keep a copy."""
        if not self.enabled:
            return
        slots = self.slots
        if block_hash in slots:
            slots.move_to_end(block_hash)
            return
        if self._free_slots:
            slot = self._free_slots.pop()
        else:
            _, slot = slots.popitem(last=False)
        slots[block_hash] = slot
        self.num_stores += 1
        if self.record_moves:
            self.moves.append(("save", gpu_block, slot))

    def lookup(self, block_hash: int) -> int | None:
        return self.slots.get(block_hash) if self.enabled else None

    def load(self, block_hash: int, gpu_block: int) -> None:
        """`block_hash`'s KV goes back into `gpu_block` (the host copy stays, most recent)."""
        slot = self.slots[block_hash]
        self.slots.move_to_end(block_hash)
        self.num_hits += 1
        self.num_loaded_pending += 1
        if self.record_moves:
            self.moves.append(("load", slot, gpu_block))

    def take_loaded(self) -> int:
        loaded, self.num_loaded_pending = self.num_loaded_pending, 0
        return loaded

    def set_costs(self, load_s_per_block: float, recompute_s_per_block: float) -> None:
        self.load_s_per_block, self.recompute_s_per_block = load_s_per_block, recompute_s_per_block
        self.enabled = load_s_per_block < recompute_s_per_block

    def take_moves(self) -> list[tuple[str, int, int]]:
        """The saves and loads since the last call, in the order they must be applied (a load may go into
        a GPU block whose old contents a save before it copies out)."""
        moves, self.moves = self.moves, []
        return moves

    @property
    def hit_tokens(self) -> int:
        """Prompt tokens served from the host tier since start."""
        return self.num_hits * self.block_size
