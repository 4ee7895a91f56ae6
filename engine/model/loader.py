"""Build the model on a device and fill its weights: safetensors by Hugging Face names, or dummy."""

from pathlib import Path

import torch

from engine.model.config import ModelConfig
from engine.model.llama import LlamaForCausalLM

DUMMY_WEIGHT_STD = 0.02  # the scale Hugging Face initialises Llama linears with


def build_model(
    config: ModelConfig,
    model: str,
    load_format: str,
    dtype: torch.dtype,
    device: torch.device,
    seed: int = 0,
) -> LlamaForCausalLM:
    with torch.device("meta"):
        net = LlamaForCausalLM(config)
    net = net.to_empty(device=device).to(dtype)
    if load_format == "dummy":
        _fill_dummy(net, seed)
    elif load_format in ("auto", "safetensors"):
        _load_safetensors(net, Path(model))
    else:
        raise ValueError(
            f"load_format is {load_format!r}; expected 'auto', 'safetensors' or 'dummy'"
        )
    net.tie_weights()
    net.build_rope(config.max_position_embeddings, device)
    return net.eval()


@torch.no_grad()
def _fill_dummy(net: LlamaForCausalLM, seed: int) -> None:
    device = next(net.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    for name, param in net.named_parameters():
        if name.endswith("norm.weight"):
            param.fill_(1.0)
        elif name.endswith(".bias"):
            param.zero_()
        else:  # drawn where the weights live: an 8B model's weights never pass through the host
            param.normal_(0.0, DUMMY_WEIGHT_STD, generator=generator)


@torch.no_grad()
def _load_safetensors(net: LlamaForCausalLM, directory: Path) -> None:
    from safetensors import safe_open

    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise ValueError(
            f"{directory}: no *.safetensors files; expected Hugging Face weights there, or load_format='dummy'"
        )
    params = dict(net.named_parameters())
    if net.config.tie_word_embeddings:
        params.pop("lm_head.weight", None)
    loaded: set[str] = set()
    for file in files:
        with safe_open(str(file), framework="pt") as f:
            for name in f.keys():
                if name not in params:
                    if "rotary_emb" in name or (
                        name == "lm_head.weight" and net.config.tie_word_embeddings
                    ):
                        continue  # derived buffers and tied copies
                    raise ValueError(
                        f"{file}: weight {name!r} has no place in a {net.config.model_type} model"
                    )
                tensor = f.get_tensor(name)
                if tensor.shape != params[name].shape:
                    raise ValueError(
                        f"{file}: {name} has shape {tuple(tensor.shape)}; expected {tuple(params[name].shape)}"
                    )
                params[name].copy_(tensor)
                loaded.add(name)
    missing = sorted(set(params) - loaded)
    if missing:
        raise ValueError(
            f"{directory}: weights missing from the safetensors files: {missing[:5]}{' …' if len(missing) > 5 else ''}"
        )
