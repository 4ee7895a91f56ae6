"""The Llama family (Llama, Mistral, Qwen2) over a paged KV cache, on a flat batch of tokens.

Module names match Hugging Face's, so safetensors load by name. Prefill chunks and decode tokens of
one step run through the linear layers together; attention splits them: decode tokens first (one per
sequence, `paged_decode_attention`), then the prefill/extend tokens (`paged_prefill_attention`).
"""

from dataclasses import dataclass

import torch
from torch import nn

import kernels
from engine.model.config import ModelConfig
from engine.model.rotary import apply_rotary, rope_cos_sin
from kernels.kv_quant import PagedKVCache


@dataclass
class AttentionMetadata:
    slot_mapping: torch.Tensor  # [T] int64: cache slot of every token
    num_decode_tokens: int  # the first num_decode_tokens tokens are decodes
    decode_block_tables: torch.Tensor  # [num_decode, max_blocks] int32
    decode_context_lens: torch.Tensor  # [num_decode] int32
    prefill_cu_seqlens: torch.Tensor  # [num_prefill + 1] int32 over the prefill tokens
    prefill_context_lens: torch.Tensor  # [num_prefill] int32: cached prefix + new tokens
    prefill_block_tables: torch.Tensor  # [num_prefill, max_blocks] int32
    logits_indices: torch.Tensor  # [S] int64: tokens whose next-token logits are needed


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class Attention(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = c.num_heads, c.num_kv_heads, c.head_dim
        self.scale = c.head_dim**-0.5
        self.q_proj = nn.Linear(c.hidden_size, c.num_heads * c.head_dim, bias=c.qkv_bias)
        self.k_proj = nn.Linear(c.hidden_size, c.num_kv_heads * c.head_dim, bias=c.qkv_bias)
        self.v_proj = nn.Linear(c.hidden_size, c.num_kv_heads * c.head_dim, bias=c.qkv_bias)
        self.o_proj = nn.Linear(c.num_heads * c.head_dim, c.hidden_size, bias=False)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        kv_cache: PagedKVCache,
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        # x: [T, hidden]
        num_tokens = x.shape[0]
        q = apply_rotary(self.q_proj(x).view(num_tokens, self.num_heads, self.head_dim), cos, sin)
        k = apply_rotary(
            self.k_proj(x).view(num_tokens, self.num_kv_heads, self.head_dim), cos, sin
        )
        v = self.v_proj(x).view(num_tokens, self.num_kv_heads, self.head_dim)
        k_cache, v_cache, k_scale, v_scale = kv_cache  # scales: None unless the cache is fp8 / int8
        kernels.store_kv_cache(k, v, k_cache, v_cache, meta.slot_mapping, k_scale, v_scale)
        nd = meta.num_decode_tokens
        parts = []
        if nd:
            parts.append(
                kernels.paged_decode_attention(
                    q[:nd],
                    k_cache,
                    v_cache,
                    meta.decode_block_tables,
                    meta.decode_context_lens,
                    self.scale,
                    k_scale,
                    v_scale,
                )
            )
        if nd < num_tokens:
            parts.append(
                kernels.paged_prefill_attention(
                    q[nd:],
                    k_cache,
                    v_cache,
                    meta.prefill_cu_seqlens,
                    meta.prefill_context_lens,
                    meta.prefill_block_tables,
                    self.scale,
                    k_scale,
                    v_scale,
                )
            )
        out = parts[0] if len(parts) == 1 else torch.cat(parts)  # [T, Hq, D]
        return self.o_proj(out.reshape(num_tokens, self.num_heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.self_attn = Attention(c)
        self.mlp = MLP(c)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, x, cos, sin, kv_cache, meta):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, kv_cache, meta)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.num_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class LlamaForCausalLM(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.config = c
        self.model = LlamaModel(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        self.rope_cos: torch.Tensor | None = None
        self.rope_sin: torch.Tensor | None = None

    def tie_weights(self) -> None:
        if self.config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def build_rope(self, max_positions: int, device) -> None:
        self.rope_cos, self.rope_sin = rope_cos_sin(
            self.config.head_dim, self.config.rope_parameters, max_positions, device
        )

    @torch.inference_mode()
    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        kv_caches: list[PagedKVCache],
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        # input_ids, positions: [T] -> logits [S, vocab] float32 at meta.logits_indices
        cos, sin = self.rope_cos[positions], self.rope_sin[positions]  # [T, D]
        x = self.model.embed_tokens(input_ids)
        for layer, kv_cache in zip(self.model.layers, kv_caches):
            x = layer(x, cos, sin, kv_cache, meta)
        x = self.model.norm(x[meta.logits_indices])
        return self.lm_head(x).float()
