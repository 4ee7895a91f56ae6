"""`PromptSource`: the prompt tokens (and the hashes of their trace-named blocks) a simulated replica
hands its scheduler for request i, built only when a request is admitted.

The simulator needs real token ids only where the prefix cache can act: with a host KV tier (each
prompt its own tokens, so no two requests share a block) or a trace that names its prompt blocks
(Mooncake's hash ids: hash-consistent tokens, so equal ids make equal blocks). A plain object, not
closures, so the shards of a parallel run carry it into worker processes.
"""

from __future__ import annotations

from simulator.cluster.replica import SIM_TOKEN_ID
from traces import Trace
from traces.tokens import PromptTokenSynthesizer, num_hash_named_blocks, prompt_block_hashes


class PromptSource:
    """Request i's prompt tokens and the hashes of its leading blocks where the trace names them, built
    when asked. A plain object (not closures), so shards in worker processes can carry it.

    "own": tokens distinct per request (no two share a block), constant within it: cheap to build.
    "hashed": tokens only past the blocks the hash ids name (placeholders before: never hashed, and
    compared only where a difference could not make a hit), the named blocks' hashes from the ids."""

    def __init__(self, trace: Trace, mode: str, block_size: int, vocab_size: int, seed: int):
        self.trace, self.mode, self.block_size = trace, mode, block_size
        self.hash_memo: dict = {}  # `prompt_block_hashes`' reuse of shared prefixes' hashes
        self.prompt_lengths: list[int] = trace.prompt_tokens.tolist()
        self.synthesizer = (
            PromptTokenSynthesizer(vocab_size, seed=seed, min_token_id=3)
            if mode == "hashed"
            else None
        )

    def ids(self, index: int) -> list[int]:
        if self.synthesizer is None:
            return [index + 3] * self.prompt_lengths[index]
        start = num_hash_named_blocks(self.trace, index, self.block_size) * self.block_size
        tokens = [SIM_TOKEN_ID] * self.prompt_lengths[index]  # one list of the prompt's length
        tokens[start:] = self.synthesizer.prompt_token_ids(self.trace, index, start).tolist()
        return tokens

    def hashes(self, index: int) -> list[int]:
        return prompt_block_hashes(self.trace, index, self.block_size, self.hash_memo)
