"""Prompt token ids for replaying a trace: exact lengths, and shared prefixes where the trace says so.

A trace carries lengths, not text. For a replay we need concrete token ids. Where the trace has
hash ids, block i of a prompt is filled from hash id i alone, so two requests with equal hash ids
get identical token blocks and a prefix cache sees the same hits as production did. Tokens not
covered by a hash id are unique to their request. Everything is a pure function of
(seed, hash id or request index, position): no state, same ids on every machine and run.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from traces.trace import Trace

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
# Different domains keep a hash id and a request index with the same value from colliding.
_BLOCK_DOMAIN, _REQUEST_DOMAIN = 0x5151, 0xA7A7
# Streams up to this many tokens are mixed on Python ints, longer ones on numpy arrays (same values):
# a simulated prompt whose blocks the trace names needs only its last block's few tokens made, and
# there numpy's per-call overhead was most of the simulator's cost of making a prompt (2026-12-04).
_SHORT_SPAN = 32


def _mix_int(value: int) -> int:
    """splitmix64's finaliser on a Python int (a strong 64-bit bit mixer)."""
    z = value & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _mix_array(z: np.ndarray) -> np.ndarray:
    # z: [n] uint64; numpy array arithmetic wraps modulo 2**64 as the mixer needs.
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class PromptTokenSynthesizer:
    """Token ids in [min_token_id, vocab_size) for each request of a trace.

    min_token_id lets a replay keep clear of special tokens (BOS/EOS/pad) at the low ids.
    """

    def __init__(self, vocab_size: int, seed: int = 0, min_token_id: int = 0) -> None:
        if not 0 <= min_token_id < vocab_size:
            raise ValueError(
                f"token range [{min_token_id}, {vocab_size}) is empty; expected "
                f"0 ≤ min_token_id < vocab_size"
            )
        self.vocab_size, self.seed, self.min_token_id = vocab_size, seed, min_token_id

    def _stream(self, domain: int, key: int, start: int, length: int) -> np.ndarray:
        base = _mix_int(_mix_int(self.seed * _GOLDEN + domain) ^ (key & _MASK))
        if length <= _SHORT_SPAN:  # the same values from Python ints (numpy's calls cost more here)
            span, low = self.vocab_size - self.min_token_id, self.min_token_id
            return np.array(
                [_mix_int(base + i * _GOLDEN) % span + low for i in range(start, start + length)],
                dtype=np.int64,
            )
        counters = np.uint64(base) + np.arange(start, start + length, dtype=np.uint64) * np.uint64(
            _GOLDEN
        )
        span = np.uint64(self.vocab_size - self.min_token_id)
        return (_mix_array(counters) % span).astype(np.int64) + self.min_token_id

    def block_tokens(self, hash_id: int, length: int) -> np.ndarray:
        """The first `length` tokens of the block named by `hash_id` (same id, same tokens)."""
        return self._stream(_BLOCK_DOMAIN, hash_id, 0, length)

    def prompt_token_ids(self, trace: Trace, index: int, start: int = 0) -> np.ndarray:
        """Exactly `trace.prompt_tokens[index]` token ids for request `index` (from `start` on: the same
        tokens at the same positions, the ones before `start` not made)."""
        prompt_len = int(trace.prompt_tokens[index])
        # tokens: [prompt_len - start]
        tokens = np.empty(max(prompt_len - start, 0), dtype=np.int64)
        covered = 0
        if trace.hash_ids is not None:
            block = trace.hash_block_size or 1
            ids = trace.hash_ids[index]
            first = min(start // block, len(ids))  # the hash blocks before `start`: skipped
            covered = min(first * block, prompt_len)
            for hash_id in ids[first:]:
                if covered >= prompt_len:
                    break
                length = min(block, prompt_len - covered)
                skip = max(start - covered, 0)
                tokens[covered + skip - start : covered + length - start] = self.block_tokens(
                    hash_id, length
                )[skip:]
                covered += length
        if covered < prompt_len:
            first = max(covered, start)
            tokens[first - start :] = self._stream(
                _REQUEST_DOMAIN, index, first, prompt_len - first
            )
        return tokens

    def iter_prompts(self, trace: Trace) -> Iterator[np.ndarray]:
        return (self.prompt_token_ids(trace, i) for i in range(len(trace)))


def prompt_token_ids(
    trace: Trace, index: int, vocab_size: int, seed: int = 0, min_token_id: int = 0
) -> list[int]:
    """One request's prompt as a plain list of ints (what an engine's `add_request` takes)."""
    return (
        PromptTokenSynthesizer(vocab_size, seed, min_token_id)
        .prompt_token_ids(trace, index)
        .tolist()
    )


def prompt_block_hashes(
    trace: Trace, index: int, block_size: int, memo: dict | None = None
) -> list[int]:
    """The prefix cache's chained hashes of request `index`'s leading `block_size`-token blocks that its
    hash ids cover whole (all but the block of its last token, which a prefix cache never looks up),
    made from the hash ids, not from tokens: block j is named by the hash ids its tokens come from and
    its offset in the first of them, chained on the block before it. Two requests get equal hashes for
    block j exactly when `prompt_token_ids` gives them equal tokens up to the end of block j (equal
    hash ids up to there), so a prefix cache keyed by them hits as one keyed by token hashes would,
    without making those tokens. Empty without hash ids.

    `memo` (an empty dict first, then kept for this trace and block size): the hashes of an earlier
    request starting with the same hash id are reused as far as both requests' hash ids agree (block j's
    hash is a function of the ids up to its end alone), so requests sharing a long prefix hash only
    their own blocks; the same hashes as without it. (Kept once a first id recurs: a trace without
    shared prefixes holds one empty entry per request.)"""
    if trace.hash_ids is None:
        return []
    ids, hash_block = trace.hash_ids[index], trace.hash_block_size or 1
    hashes: list[int] = []
    parent: int | None = None
    num_blocks = num_hash_named_blocks(trace, index, block_size)
    first_block = common = 0
    if memo is not None and num_blocks:
        seen = memo.get(ids[0])
        if seen is not None:  # blocks whose ids all lie in the common prefix: the same hashes
            seen_ids, seen_hashes, common = seen
            common = _common_prefix_len(ids, seen_ids, common)
            first_block = min(
                common * hash_block // block_size,
                len(seen_hashes),
                num_blocks,
            )
            hashes = seen_hashes[:first_block]
            parent = hashes[-1] if hashes else None
    if hash_block % block_size == 0:  # each block inside one hash block: the same keys, made faster
        per = hash_block // block_size
        for j in range(first_block, num_blocks):
            first, part = divmod(j, per)
            parent = hash((parent, ((ids[first],), part * block_size)))
            hashes.append(parent)
    else:
        for j in range(first_block, num_blocks):
            start = j * block_size
            first, last = start // hash_block, (start + block_size - 1) // hash_block
            parent = hash((parent, (tuple(ids[first : last + 1]), start - first * hash_block)))
            hashes.append(parent)
    if memo is not None and num_blocks:  # kept from a first id's second request on (it recurs)
        # (a copy: the caller's grows; and the ids' common length with the request before, to try first)
        memo[ids[0]] = (ids, hashes[:], common) if ids[0] in memo else None
    return hashes


def _common_prefix_len(a: list[int], b: list[int], guess: int) -> int:
    """How many leading items `a` and `b` share (slice comparisons: `guess` first, then bisected)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    if 0 < guess < n and a[guess] != b[guess] and a[:guess] == b[:guess]:
        return guess  # (requests of one shared prefix: the same length each time)
    low, high = 0, n  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 1:
        mid = (low + high) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid
    return low


def num_hash_named_blocks(trace: Trace, index: int, block_size: int) -> int:
    """How many blocks `prompt_block_hashes` names for request `index` (0 without hash ids)."""
    if trace.hash_ids is None:
        return 0
    prompt_len = int(trace.prompt_tokens[index])
    covered = min(prompt_len, len(trace.hash_ids[index]) * (trace.hash_block_size or 1))
    return min(covered // block_size, (prompt_len - 1) // block_size)
