"""Rotary position embedding tables (default, linear and llama3 scaling), as Hugging Face computes them."""

import math

import torch


def rope_inv_freq(head_dim: int, rope_parameters: dict) -> torch.Tensor:
    base = float(rope_parameters.get("rope_theta", 10000.0))
    inv_freq = 1.0 / (
        base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim)
    )  # [D/2]
    rope_type = rope_parameters.get("rope_type", "default")
    if rope_type == "default":
        return inv_freq
    if rope_type == "linear":
        return inv_freq / float(rope_parameters["factor"])
    if rope_type == "llama3":
        return _llama3_inv_freq(inv_freq, rope_parameters)
    raise ValueError(
        f"rope_type {rope_type!r} is not supported; expected default, linear or llama3"
    )


def _llama3_inv_freq(inv_freq: torch.Tensor, p: dict) -> torch.Tensor:
    factor, low, high = (
        float(p["factor"]),
        float(p["low_freq_factor"]),
        float(p["high_freq_factor"]),
    )
    old_len = float(p["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old_len / high) * ~(wavelen > old_len / low)
    return torch.where(medium, smoothed, scaled)


def rope_cos_sin(
    head_dim: int, rope_parameters: dict, max_positions: int, device
) -> tuple[torch.Tensor, torch.Tensor]:
    # -> cos, sin: [max_positions, head_dim] float32
    inv_freq = rope_inv_freq(head_dim, rope_parameters)
    freqs = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv_freq)  # [P, D/2]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(device), emb.sin().to(device)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: [T, H, D]; cos, sin: [T, D] already gathered at the tokens' positions
    cos, sin = cos[:, None, :].to(x.dtype), sin[:, None, :].to(x.dtype)
    return x * cos + _rotate_half(x) * sin
