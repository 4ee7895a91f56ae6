"""Decode steps through `DecodeGraphs`' padded static buffers give the eager step's logits and tokens.

There are no CUDA graphs on a CPU, so these run the graphs' buffers eagerly (`capture=False`): the
padding (rows past the batch write no KV, read a one-token context, and their logits are dropped),
the table widths and the size choice are what a replay on a GPU runs too. Prompt lengths and batch
sizes are drawn fresh each run; the seed is in every message.
"""

import os
import random

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

import pytest  # noqa: E402
import torch  # noqa: E402

from engine import LLM, SamplingParams  # noqa: E402
from engine.worker.cuda_graphs import DecodeGraphs, capture_sizes, graphs_supported  # noqa: E402
from engine.worker.inputs import build_inputs  # noqa: E402

BLOCK_SIZE, MAX_MODEL_LEN, MAX_NUM_SEQS = 16, 96, 6


def _llm(model_dir, **settings) -> LLM:
    return LLM(
        model=str(model_dir),
        load_format="safetensors",
        dtype="float32",
        block_size=BLOCK_SIZE,
        num_kv_blocks=48,
        max_num_seqs=MAX_NUM_SEQS,
        max_num_batched_tokens=128,
        max_model_len=MAX_MODEL_LEN,
        **settings,
    )


def _graphs(llm: LLM) -> DecodeGraphs:
    return _graphs_of(llm.engine.model_runner)


def _graphs_of(runner) -> DecodeGraphs:
    return DecodeGraphs(
        runner.model,
        runner.kv_caches,
        max_num_seqs=MAX_NUM_SEQS,
        max_model_len=MAX_MODEL_LEN,
        device=runner.device,
        capture=False,
    )


def _prompts(rng: random.Random, count: int) -> list[list[int]]:
    return [[rng.randrange(3, 300) for _ in range(rng.randint(1, 40))] for _ in range(count)]


def test_capture_sizes_follow_vllm_defaults():
    assert capture_sizes(1) == [1]
    assert capture_sizes(8) == [1, 2, 4, 8]
    assert capture_sizes(30) == [1, 2, 4, 8, 16, 24, 30]
    assert capture_sizes(256)[-3:] == [240, 248, 256]
    with pytest.raises(ValueError, match="max_num_seqs is 0"):
        capture_sizes(0)


@pytest.mark.parametrize("kernels", ["reference", "triton"])
def test_padded_decode_step_matches_eager(tiny_llama_dir, monkeypatch, kernels):
    monkeypatch.setenv("SURGEPLAN_KERNELS", kernels)
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    batch = rng.choice([3, 5]) if kernels == "reference" else 3  # interpreted Triton: keep it small
    llm = _llm(tiny_llama_dir)
    engine = llm.engine
    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    for i, prompt in enumerate(_prompts(rng, batch)):
        engine.add_request(str(i), prompt, params)
    while True:  # until a step is decodes alone
        out = engine.scheduler.schedule(now=0.0)
        if out.scheduled and all(r.num_computed_tokens > 0 and n == 1 for r, n in out.scheduled):
            break
        result = engine.model_runner.execute(out.scheduled)
        engine.scheduler.update(out, result.sampled_token_ids, now=0.0)
    inputs = build_inputs(out.scheduled, BLOCK_SIZE, engine.device)
    runner = engine.model_runner
    eager = runner.model(inputs.input_ids, inputs.positions, runner.kv_caches, inputs.meta)
    cache_after_eager = [t.clone() for layer in runner.kv_caches for t in layer if t is not None]
    graphs = _graphs(llm)
    padded = graphs.run(inputs)
    assert graphs.size_for(batch) > batch, f"seed {seed}: the batch was not padded"
    assert padded.shape == eager.shape, f"seed {seed}"
    torch.testing.assert_close(padded, eager, rtol=1e-4, atol=1e-4, msg=f"seed {seed}")
    # the batch's own slots got (nearly) the eager values again; every other slot is untouched
    real = torch.zeros(cache_after_eager[0].shape[0] * BLOCK_SIZE, dtype=torch.bool)
    real[inputs.meta.slot_mapping] = True
    cache_now = [t for layer in runner.kv_caches for t in layer if t is not None]
    for before, now in zip(cache_after_eager, cache_now):
        before, now = before.flatten(0, 1), now.flatten(0, 1)  # [slots, heads, head_dim]
        assert torch.equal(before[~real], now[~real]), f"seed {seed}: padding wrote into the cache"
        torch.testing.assert_close(now[real], before[real], msg=f"seed {seed}")
    assert graphs.slot_mapping[batch:].eq(-1).all() and graphs.context_lens[batch:].eq(1).all()


def test_engine_through_graph_buffers_gives_eager_tokens(tiny_llama_dir, monkeypatch):
    monkeypatch.setenv("SURGEPLAN_KERNELS", "reference")
    seed = random.randrange(2**32)
    prompts = _prompts(random.Random(seed), 5)
    params = SamplingParams(temperature=0, max_tokens=10, ignore_eos=True)
    eager = [o.output_token_ids for o in _llm(tiny_llama_dir).generate(prompts, params)]
    llm = _llm(tiny_llama_dir)
    assert llm.engine.model_runner.decode_graphs is None  # a CPU captures nothing
    llm.engine.model_runner.decode_graphs = _graphs(llm)  # the buffers, run eagerly
    replayed, kinds = [], set()
    for i, prompt in enumerate(prompts):
        llm.engine.add_request(str(i), prompt, params)
    while llm.engine.has_unfinished_requests():
        for out in llm.engine.step():
            if out.finished:
                replayed.append((int(out.request_id), out.output_token_ids))
        stats = llm.engine.last_step
        kinds.add((stats.shape.num_prefill_tokens == 0, stats.cuda_graph))
    assert [tokens for _, tokens in sorted(replayed)] == eager, f"seed {seed}"
    # decode-only steps went through the graphs' buffers, steps with a prefill did not
    assert kinds == {(True, True), (False, False)}, f"seed {seed}: {kinds}"


def test_graphs_need_cuda_and_an_unquantised_cache(tiny_llama_dir):
    runner = _llm(tiny_llama_dir).engine.model_runner
    assert not graphs_supported(torch.device("cpu"), runner.kv_caches)
    assert graphs_supported(torch.device("cuda"), runner.kv_caches)
    quantised = _llm(tiny_llama_dir, kv_cache_dtype="fp8").engine.model_runner.kv_caches
    assert not graphs_supported(torch.device("cuda"), quantised)


def test_a_table_wider_than_the_graphs_is_refused(tiny_llama_dir, monkeypatch):
    monkeypatch.setenv("SURGEPLAN_KERNELS", "reference")
    llm = _llm(tiny_llama_dir)
    graphs = _graphs(llm)
    llm.engine.add_request("0", [5] * 20, SamplingParams(temperature=0, max_tokens=4))
    llm.engine.step()  # the prefill
    out = llm.engine.scheduler.schedule(now=0.0)
    inputs = build_inputs(out.scheduled, BLOCK_SIZE, llm.engine.device)
    too_narrow = DecodeGraphs(
        graphs.model, graphs.kv_caches, max_num_seqs=2, max_model_len=BLOCK_SIZE,
        device=graphs.device, capture=False,
    )  # fmt: skip
    with pytest.raises(ValueError, match="2 blocks wide; the graphs hold 1"):
        too_narrow.run(inputs)


class _Replay:
    """Stands in for a captured graph on the CPU: its replay writes `logits` into the size's output."""

    def __init__(self, graphs: DecodeGraphs, size: int, wrong: bool):
        self.graphs, self.size, self.wrong = graphs, size, wrong

    def replay(self) -> None:
        logits = self.graphs._forward(self.size)
        self.graphs.logits[self.size] = logits.roll(1, dims=-1) if self.wrong else logits


@pytest.mark.parametrize("wrong", [False, True])
def test_graphs_that_do_not_replay_the_eager_forward_are_dropped(
    tiny_llama_dir, monkeypatch, wrong
):
    monkeypatch.setenv("SURGEPLAN_KERNELS", "reference")
    runner = _llm(tiny_llama_dir).engine.model_runner
    graphs = _graphs_of(runner)
    for size in graphs.sizes:
        graphs.graphs[size] = _Replay(graphs, size, wrong and size == graphs.sizes[-1])
    kept = runner._checked(graphs, start=0.0)
    assert (kept is None) == wrong
