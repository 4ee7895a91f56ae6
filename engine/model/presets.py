"""Named model shapes for dummy weights: realistic sizes without any download.

Each preset is a Hugging Face `config.json` dict; `preset_config(name)` returns a copy.
"""

import copy

_LLAMA2_ROPE = {"rope_type": "default", "rope_theta": 10000.0}
_LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


def _llama(hidden, intermediate, layers, heads, kv_heads, vocab, max_len, rope, **extra) -> dict:
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": hidden // heads,
        "vocab_size": vocab,
        "max_position_embeddings": max_len,
        "rms_norm_eps": 1e-5,
        "rope_parameters": dict(rope),
        "tie_word_embeddings": False,
        "attention_bias": False,
        "hidden_act": "silu",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "dtype": "bfloat16",
    }
    config.update(extra)
    return config


PRESETS: dict[str, dict] = {
    # ~56M parameters: decodes a batch of 32 on a 2-core CPU in well under a second.
    "cpu-small": _llama(512, 1408, 8, 8, 4, 32000, 2048, _LLAMA2_ROPE, dtype="float32"),
    # A few-hundred-thousand-parameter model for tests that run kernels under the Triton interpreter.
    "tiny": _llama(64, 128, 2, 4, 2, 512, 512, _LLAMA2_ROPE, dtype="float32"),
    "llama-2-7b": _llama(4096, 11008, 32, 32, 32, 32000, 4096, _LLAMA2_ROPE, dtype="float16"),
    "llama-2-13b": _llama(5120, 13824, 40, 40, 40, 32000, 4096, _LLAMA2_ROPE, dtype="float16"),
    "llama-2-70b": _llama(8192, 28672, 80, 64, 8, 32000, 4096, _LLAMA2_ROPE, dtype="float16"),
    "llama-3-8b": _llama(
        4096, 14336, 32, 32, 8, 128256, 8192, _LLAMA3_ROPE, bos_token_id=128000, eos_token_id=128001
    ),
    "llama-3-70b": _llama(
        8192, 28672, 80, 64, 8, 128256, 8192, _LLAMA3_ROPE, bos_token_id=128000, eos_token_id=128001
    ),
    "qwen2.5-7b": _llama(
        3584,
        18944,
        28,
        28,
        4,
        152064,
        32768,
        {"rope_type": "default", "rope_theta": 1000000.0},
        architectures=["Qwen2ForCausalLM"],
        model_type="qwen2",
        rms_norm_eps=1e-6,
        bos_token_id=151643,
        eos_token_id=151645,
    ),
}


def preset_names() -> list[str]:
    return sorted(PRESETS)


def preset_config(name: str) -> dict:
    if name not in PRESETS:
        raise ValueError(
            f"model preset {name!r} is unknown; expected a local model directory or one of {preset_names()}"
        )
    return copy.deepcopy(PRESETS[name])
