"""Shared test set-up. TRITON_INTERPRET must be set before any @triton.jit runs, so it comes first."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "soak: the bounded soak, short in CI (benchmarks/soak.py runs the long one)"
    )
    # `make test-compiled` names the build it built; a pass that silently ran the other one would
    # test nothing it meant to.
    expected = os.environ.get("SURGEPLAN_EXPECT_BUILD")
    if expected:
        from compiled_build import modules_not_built_as

        try:
            wrong = modules_not_built_as(expected)
        except ValueError as error:
            raise pytest.UsageError(f"SURGEPLAN_EXPECT_BUILD: {error}") from None
        if wrong:
            raise pytest.UsageError(
                f"SURGEPLAN_EXPECT_BUILD is {expected!r} but {len(wrong)} module(s) of the Makefile's "
                f"CORE_COMPILED imported as the other build: {', '.join(wrong)}; expected "
                "`make compiled` before a mypyc pass (or `make pure` before a pure-Python one)"
            )


def make_tiny_hf_model(
    directory: Path, model_type: str = "llama", seed: int = 0, **overrides
) -> Path:
    """A random Llama or Qwen2 built from a config and saved as safetensors, as a user's model dir would be."""
    import torch
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        MistralConfig,
        MistralForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    settings = dict(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        initializer_range=0.2,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
    )
    settings.update(overrides)
    torch.manual_seed(seed)
    if model_type == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**settings))
    elif model_type == "mistral":
        model = MistralForCausalLM(MistralConfig(sliding_window=256, **settings))
    else:
        model = LlamaForCausalLM(LlamaConfig(**settings))
    model.save_pretrained(directory)
    assert json.loads((directory / "config.json").read_text())["model_type"] == model_type
    return directory


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    return make_tiny_hf_model(tmp_path_factory.mktemp("tiny-llama"), "llama", seed=1)


@pytest.fixture(scope="session")
def tiny_mistral_dir(tmp_path_factory) -> Path:
    return make_tiny_hf_model(
        tmp_path_factory.mktemp("tiny-mistral"), "mistral", seed=3, max_position_embeddings=512
    )


@pytest.fixture(scope="session")
def tiny_qwen2_dir(tmp_path_factory) -> Path:
    return make_tiny_hf_model(tmp_path_factory.mktemp("tiny-qwen2"), "qwen2", seed=2)
