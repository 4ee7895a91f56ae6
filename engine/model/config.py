"""The architecture read from a Hugging Face `config.json` (Llama, Mistral, Qwen2), pure Python."""

import json
from dataclasses import dataclass
from pathlib import Path

from engine.core.memory import llama_parameters
from engine.model.presets import PRESETS, preset_config

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2")


@dataclass(frozen=True)
class ModelConfig:
    model_type: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    max_position_embeddings: int
    rms_norm_eps: float
    rope_parameters: dict
    tie_word_embeddings: bool
    qkv_bias: bool
    dtype: str
    eos_token_ids: tuple[int, ...]
    bos_token_id: int | None
    sliding_window: int | None = None  # attention span, where the config limits it

    @classmethod
    def from_hf_config(cls, config: dict, source: str = "config.json") -> "ModelConfig":
        model_type = config.get("model_type", "llama")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"{source}: model_type is {model_type!r}; expected one of {SUPPORTED_MODEL_TYPES}"
            )
        for key in (
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "vocab_size",
        ):
            if not isinstance(config.get(key), int) or config[key] < 1:
                raise ValueError(
                    f"{source}: {key} is {config.get(key)!r}; expected a positive integer"
                )
        heads = config["num_attention_heads"]
        kv_heads = config.get("num_key_value_heads") or heads
        if heads % kv_heads:
            raise ValueError(
                f"{source}: num_attention_heads={heads} is not a multiple of num_key_value_heads={kv_heads}"
            )
        eos = config.get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, list) else (() if eos is None else (eos,))
        return cls(
            model_type=model_type,
            hidden_size=config["hidden_size"],
            intermediate_size=config["intermediate_size"],
            num_layers=config["num_hidden_layers"],
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=config.get("head_dim") or config["hidden_size"] // heads,
            vocab_size=config["vocab_size"],
            max_position_embeddings=config.get("max_position_embeddings", 2048),
            rms_norm_eps=config.get("rms_norm_eps", 1e-6),
            rope_parameters=_rope_parameters(config),
            tie_word_embeddings=config.get("tie_word_embeddings", False),
            qkv_bias=model_type == "qwen2" or bool(config.get("attention_bias", False)),
            dtype=str(config.get("dtype") or config.get("torch_dtype") or "float32"),
            eos_token_ids=eos_ids,
            bos_token_id=config.get("bos_token_id"),
            sliding_window=_sliding_window(config),
        )

    @classmethod
    def load(cls, model: str) -> "ModelConfig":
        """`model` is a preset name or a local directory holding config.json."""
        if model in PRESETS:
            return cls.from_hf_config(preset_config(model), source=f"preset {model}")
        path = Path(model) / "config.json"
        if not path.is_file():
            raise ValueError(
                f"model {model!r} is neither a preset {sorted(PRESETS)} nor a directory with config.json"
            )
        return cls.from_hf_config(json.loads(path.read_text()), source=str(path))

    @property
    def num_parameters(self) -> int:
        return llama_parameters(
            self.hidden_size,
            self.intermediate_size,
            self.num_layers,
            self.num_heads,
            self.num_kv_heads,
            self.head_dim,
            self.vocab_size,
            self.tie_word_embeddings,
            self.qkv_bias,
        )


def _sliding_window(config: dict) -> int | None:
    # Mistral limits attention to its window; Qwen2 only when use_sliding_window is set
    if config.get("model_type") == "qwen2" and not config.get("use_sliding_window", False):
        return None
    return config.get("sliding_window")


def _rope_parameters(config: dict) -> dict:
    # transformers 5 keeps rope settings in rope_parameters; older files use rope_theta + rope_scaling
    params = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    params.setdefault("rope_theta", config.get("rope_theta", 10000.0))
    params.setdefault("rope_type", params.pop("type", "default"))
    return params
