"""The flat batch of one step: token ids, positions, cache slots and attention metadata."""

from dataclasses import dataclass

import torch

from engine.core.request import Request
from engine.model.llama import AttentionMetadata


@dataclass
class StepInputs:
    input_ids: torch.Tensor  # [T] int64
    positions: torch.Tensor  # [T] int64
    meta: AttentionMetadata
    producing_entries: list[int]  # scheduled indices that get a token, in logits-row order


def _is_decode(req: Request, num_new: int) -> bool:
    return num_new == 1 and req.num_computed_tokens > 0


def _padded_tables(tables: list[list[int]], device) -> torch.Tensor:
    width = max((len(t) for t in tables), default=0)
    rows = [t + [0] * (width - len(t)) for t in tables]
    return torch.tensor(rows, dtype=torch.int32, device=device).reshape(len(tables), width)


def build_inputs(scheduled: list[tuple[Request, int]], block_size: int, device) -> StepInputs:
    decode = [i for i, (r, n) in enumerate(scheduled) if _is_decode(r, n)]
    prefill = [i for i, (r, n) in enumerate(scheduled) if not _is_decode(r, n)]
    ids, positions, slots, logits_indices, producing = [], [], [], [], []
    cu_seqlens, lens = [0], []
    for k, i in enumerate(decode + prefill):
        req, num_new = scheduled[i]
        start, end = req.num_computed_tokens, req.num_computed_tokens + num_new
        ids.extend(req.token_ids(start, end))
        positions.extend(range(start, end))
        table = req.block_table
        slots.extend(
            table[p // block_size] * block_size + p % block_size for p in range(start, end)
        )
        lens.append(end)
        if k >= len(decode):
            cu_seqlens.append(cu_seqlens[-1] + num_new)
        if end == req.num_tokens:  # this step reaches its last token: sample
            logits_indices.append(len(ids) - 1)
            producing.append(i)
    nd = len(decode)

    def tensor(values, dtype):
        return torch.tensor(values, dtype=dtype, device=device)

    meta = AttentionMetadata(
        slot_mapping=tensor(slots, torch.int64),
        num_decode_tokens=nd,
        decode_block_tables=_padded_tables([scheduled[i][0].block_table for i in decode], device),
        decode_context_lens=tensor(lens[:nd], torch.int32),
        prefill_cu_seqlens=tensor(cu_seqlens, torch.int32),
        prefill_context_lens=tensor(lens[nd:], torch.int32),
        prefill_block_tables=_padded_tables([scheduled[i][0].block_table for i in prefill], device),
        logits_indices=tensor(logits_indices, torch.int64),
    )
    return StepInputs(tensor(ids, torch.int64), tensor(positions, torch.int64), meta, producing)
