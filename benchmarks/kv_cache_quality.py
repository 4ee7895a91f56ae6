"""What a quantised KV cache costs in quality, measured on a real (if small) model trained here.

A tiny Llama (4 layers, 4 query / 2 KV heads of 32, byte vocabulary; 0.79M parameters) is trained
on the
CPU for 250 steps (batch 8 x 128 bytes) on a fixed English text, the Python documentation topics
that ship with
CPython (`pydoc_data.topics`, 465k characters); the last tenth of the topics (sorted by name) is
held
out. The weights are cached under benchmarks/.cache/ (git-ignored) by a hash of the training
settings;
delete it to retrain (seeded, deterministic on one machine).

Then held-out sequences are served through the engine's own model and paged-KV kernels as a server
runs them: a 32-token prompt prefilled, then every later token decoded one step at a time
(teacher-forced)
over the paged cache stored in each kv_cache_dtype. Per token it compares the next-token
distribution
with the unquantised cache's: KL(p_auto || p_dtype), top-1 agreement, and each dtype's perplexity
on the
held-out text; and the cache itself: layer 0's dequantised K/V against the unquantised cache
(relative
error; layer 0's inputs are the same in every run). Writes simulator/data/kv_cache_quality.json,
which
the planner and dashboard show beside what each dtype buys.

  .venv/bin/python benchmarks/kv_cache_quality.py [--steps 250] [--sequences 8] [--length 160]
"""

import argparse
import datetime as dt
import hashlib
import json
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.model.config import ModelConfig  # noqa: E402
from engine.model.llama import AttentionMetadata  # noqa: E402
from engine.model.loader import build_model  # noqa: E402
from kernels.kv_quant import allocate_layer, dequantize  # noqa: E402
from simulator.kv_quality import QUALITY_FILE  # noqa: E402

CACHE = ROOT / "benchmarks" / ".cache"
KV_DTYPES = ["auto", "fp8_e4m3", "fp8_e5m2", "int8"]
CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 256,
    "hidden_size": 128,
    "intermediate_size": 344,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "bos_token_id": None,
    "eos_token_id": None,
    "dtype": "float32",
}
BLOCK_SIZE = 16
PROMPT_TOKENS = 32


def corpus() -> tuple[bytes, bytes]:
    """(training bytes, held-out bytes): CPython's documentation topics, the last tenth held out."""
    from pydoc_data.topics import topics

    names = sorted(topics)
    cut = int(len(names) * 0.9)
    join = lambda keys: "\n\n".join(topics[k] for k in keys).encode("ascii", "replace")  # noqa: E731
    return join(names[:cut]), join(names[cut:])


def train(steps: int, seed: int = 0) -> Path:
    """The trained model directory (config.json + model.safetensors), from the cache when
    present."""
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    text, _ = corpus()
    settings = json.dumps(
        {
            "config": CONFIG,
            "steps": steps,
            "seed": seed,
            "batch": 8,
            "seq": 128,
            "lr": 3e-3,
            "text_sha": hashlib.sha256(text).hexdigest(),
        },
        sort_keys=True,
    )
    directory = CACHE / f"kv-quality-{hashlib.sha256(settings.encode()).hexdigest()[:12]}"
    if (directory / "model.safetensors").is_file():
        print(f"trained model from the cache: {directory}", file=sys.stderr)
        return directory
    torch.manual_seed(seed)
    hf_config = {k: v for k, v in CONFIG.items() if k not in ("architectures", "dtype")}
    model = LlamaForCausalLM(LlamaConfig(**hf_config))
    data = torch.tensor(list(text), dtype=torch.long)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=3e-3, total_steps=steps, pct_start=0.1
    )
    generator = torch.Generator().manual_seed(seed)
    started = time.perf_counter()
    for step in range(steps):
        starts = torch.randint(0, len(data) - 129, (8,), generator=generator)
        batch = torch.stack([data[s : s + 129] for s in starts.tolist()])  # [8, 129]
        logits = model(input_ids=batch[:, :-1]).logits  # [8, 128, 256]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), batch[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 25 == 0 or step == steps - 1:
            print(
                f"step {step:4d}  train loss {loss.item():.3f}  ({time.perf_counter() - started:.0f} s)",
                file=sys.stderr,
            )
    directory.mkdir(parents=True, exist_ok=True)
    save_file(
        {k: v.contiguous() for k, v in model.state_dict().items()},
        str(directory / "model.safetensors"),
    )
    (directory / "config.json").write_text(json.dumps(CONFIG, indent=1))
    return directory


def served_logits(model, config: ModelConfig, sequences: torch.Tensor, kv_cache_dtype: str):
    """Log-probabilities [B, L-1, vocab] of each next token: prefill PROMPT_TOKENS, then decode one
    token per
    step over the paged cache in `kv_cache_dtype`; and the layer-0 cache (K/V values,
    dequantised)."""
    batch, length = sequences.shape
    blocks_per_seq = -(-length // BLOCK_SIZE)
    caches = [
        allocate_layer(
            batch * blocks_per_seq,
            BLOCK_SIZE,
            config.num_kv_heads,
            config.head_dim,
            kv_cache_dtype,
            torch.float32,
            torch.device("cpu"),
        )
        for _ in range(config.num_layers)
    ]
    tables = torch.arange(batch * blocks_per_seq, dtype=torch.int32).view(batch, blocks_per_seq)
    slots = (tables.long()[:, :, None] * BLOCK_SIZE + torch.arange(BLOCK_SIZE)).view(
        batch, -1
    )  # [B, slots]
    rows = []
    # prefill: every sequence's prompt in one step
    cu = torch.arange(batch + 1, dtype=torch.int32) * PROMPT_TOKENS
    meta = AttentionMetadata(
        slot_mapping=slots[:, :PROMPT_TOKENS].reshape(-1),
        num_decode_tokens=0,
        decode_block_tables=tables[:0],
        decode_context_lens=torch.zeros(0, dtype=torch.int32),
        prefill_cu_seqlens=cu,
        prefill_context_lens=torch.full((batch,), PROMPT_TOKENS, dtype=torch.int32),
        prefill_block_tables=tables,
        logits_indices=torch.arange(batch * PROMPT_TOKENS),
    )
    logits = model(
        sequences[:, :PROMPT_TOKENS].reshape(-1),
        torch.arange(PROMPT_TOKENS).repeat(batch),
        caches,
        meta,
    )
    rows.append(logits.view(batch, PROMPT_TOKENS, -1))
    for position in range(PROMPT_TOKENS, length - 1):  # decode, teacher-forced
        meta = AttentionMetadata(
            slot_mapping=slots[:, position],
            num_decode_tokens=batch,
            decode_block_tables=tables,
            decode_context_lens=torch.full((batch,), position + 1, dtype=torch.int32),
            prefill_cu_seqlens=torch.zeros(1, dtype=torch.int32),
            prefill_context_lens=torch.zeros(0, dtype=torch.int32),
            prefill_block_tables=tables[:0],
            logits_indices=torch.arange(batch),
        )
        logits = model(sequences[:, position], torch.full((batch,), position), caches, meta)
        rows.append(logits.view(batch, 1, -1))
    layer0 = caches[0]
    ids = torch.arange(layer0.k.shape[0])
    cache_values = (
        dequantize(layer0.k, ids, layer0.k_scale),
        dequantize(layer0.v, ids, layer0.v_scale),
    )
    return torch.log_softmax(torch.cat(rows, dim=1).double(), -1), cache_values


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--steps", type=int, default=250, help="training steps (batch 8 x 128 bytes)"
    )
    parser.add_argument("--sequences", type=int, default=8, help="held-out sequences")
    parser.add_argument("--length", type=int, default=160, help="tokens per held-out sequence")
    parser.add_argument("--out", type=Path, default=QUALITY_FILE)
    args = parser.parse_args()
    torch.set_num_threads(1)  # a tiny model: one thread is as fast, and the run is repeatable
    directory = train(args.steps)
    config = ModelConfig.load(str(directory))
    model = build_model(config, str(directory), "safetensors", torch.float32, torch.device("cpu"))
    _, held_out = corpus()
    stride = (len(held_out) - args.length) // args.sequences
    sequences = torch.tensor(
        [list(held_out[i * stride : i * stride + args.length]) for i in range(args.sequences)]
    )
    targets = sequences[:, 1:]  # [B, L-1]
    results, reference = {}, None
    for kv_cache_dtype in KV_DTYPES:
        started = time.perf_counter()
        logprobs, (k0, v0) = served_logits(model, config, sequences, kv_cache_dtype)  # [B, L-1, V]
        nll = -logprobs.gather(-1, targets[..., None]).squeeze(-1)
        row = {"perplexity": float(nll.mean().exp()), "tokens": int(nll.numel())}
        if reference is None:
            reference = (logprobs, k0, v0)
            row |= {"kl_divergence": 0.0, "top1_agreement": 1.0, "k_error": 0.0, "v_error": 0.0}
        else:
            ref_logprobs, ref_k, ref_v = reference
            kl = (ref_logprobs.exp() * (ref_logprobs - logprobs)).sum(
                -1
            )  # KL(p_auto || p_dtype) per token
            row |= {
                "kl_divergence": float(kl.mean()),
                "kl_divergence_max": float(kl.max()),
                "top1_agreement": float(
                    (ref_logprobs.argmax(-1) == logprobs.argmax(-1)).double().mean()
                ),
                "k_error": float((k0 - ref_k).norm() / ref_k.norm()),
                "v_error": float((v0 - ref_v).norm() / ref_v.norm()),
            }
        row["seconds"] = time.perf_counter() - started
        results[kv_cache_dtype] = row
    table = {
        "model": f"tiny Llama trained {args.steps} steps on CPython's pydoc topics "
        f"({config.num_parameters / 1e6:.2f}M parameters, 4 layers, 2 KV heads x 32, byte "
        "vocabulary), float32 weights",
        "held_out": f"{args.sequences} sequences x {args.length} bytes: {PROMPT_TOKENS}-token prompt "
        "prefilled, the rest decoded one token a step over the paged cache",
        "hardware": f"{platform.processor() or platform.machine()}, torch {torch.__version__} (CPU)",
        "date": dt.date.today().isoformat(),
        "reference": "auto (float32 cache)",
        "rows": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(table, indent=1) + "\n")
    print(
        f"KV cache quality: {table['model']}; {table['held_out']}; {table['hardware']}, {table['date']}"
    )
    print(
        f"{'kv_cache_dtype':<15}{'perplexity':>11}{'KL(auto||x)':>13}{'top-1 agree':>13}{'K err':>9}{'V err':>9}"
    )
    for name, row in results.items():
        print(
            f"{name:<15}{row['perplexity']:>11.3f}{row['kl_divergence']:>13.2e}{row['top1_agreement']:>13.2%}"
            f"{row['k_error']:>9.4f}{row['v_error']:>9.4f}"
        )
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
