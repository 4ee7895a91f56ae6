"""The engine end to end on a tiny model: the Triton kernels (interpreted) give the torch twins' greedy tokens."""

import os

os.environ.setdefault(
    "TRITON_INTERPRET", "1"
)  # before triton is imported, so kernels are interpreted

import torch  # noqa: E402

from engine import LLM, SamplingParams  # noqa: E402
from kernels import triton_ops  # noqa: E402

KERNEL_NAMES = ("store_kv_cache", "paged_decode_attention", "paged_prefill_attention")


def _prompts(vocab_size: int) -> list[list[int]]:
    """One token; exactly one block; a prompt longer than the step's token budget (chunked prefill); and two
    prompts sharing two full blocks (prefix-cache reuse) with different tails."""
    generator = torch.Generator().manual_seed(2024)

    def tokens(n: int) -> list[int]:
        return torch.randint(3, vocab_size, (n,), generator=generator).tolist()

    shared = tokens(32)
    return [tokens(1), tokens(16), tokens(70), shared + tokens(5), shared + tokens(9)]


def _generate(model_dir, prompts) -> list[list[int]]:
    llm = LLM(
        model=str(model_dir),
        load_format="safetensors",
        dtype="float32",
        block_size=16,
        num_kv_blocks=64,
        max_num_seqs=4,
        max_num_batched_tokens=64,
        max_model_len=128,
    )
    outputs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=6, ignore_eos=True))
    return [list(out.output_token_ids) for out in outputs]


def _count_calls(monkeypatch) -> dict[str, int]:
    """Counts calls into the real Triton entry points, proving the engine ran them."""
    calls = dict.fromkeys(KERNEL_NAMES, 0)
    for name in KERNEL_NAMES:
        real = getattr(triton_ops, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(triton_ops, name, counted)
    return calls


def test_greedy_tokens_match_between_triton_and_reference(tiny_llama_dir, monkeypatch):
    prompts = _prompts(vocab_size=300)
    monkeypatch.setenv("SURGEPLAN_KERNELS", "reference")
    expected = _generate(tiny_llama_dir, prompts)

    monkeypatch.setenv("SURGEPLAN_KERNELS", "triton")
    calls = _count_calls(monkeypatch)
    actual = _generate(tiny_llama_dir, prompts)

    assert all(count > 0 for count in calls.values()), f"Triton kernels not all used: {calls}"
    assert len({token for tokens in expected for token in tokens}) > 3, (
        "degenerate model output proves little"
    )
    assert actual == expected
