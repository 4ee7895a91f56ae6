"""Outputs counted, not stored (`Request.uniform_output_token`, what the simulator sets): a request
whose every sampled token is one token T must behave exactly as one that stores its T's, through the
request's own methods and through the scheduler (prefix caching of output blocks, preemption and
recompute, decode stretches, KV hand-over), on fresh random workloads."""

import random

import pytest
from scheduler_driver import check_invariants, make_scheduler

from engine.core.kv_handoff import handoff_copy
from engine.core.request import Request
from engine.core.sampling_params import SamplingParams

T = 0  # the simulator's SIM_TOKEN_ID


def _pair(prompt: list[int], max_tokens: int, index: int = 0) -> tuple[Request, Request]:
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    stored = Request(f"r{index}", prompt, params, 0.0)
    counted = Request(f"r{index}", prompt, params, 0.0)
    counted.uniform_output_token = T
    return stored, counted


def _tokens(req: Request) -> tuple:
    n = req.num_tokens
    return (n, req.num_prompt_tokens, req.output_token_ids, req.token_ids(0, n))


def test_request_methods_give_the_stored_tokens():
    rng = random.Random(1)
    for _ in range(200):
        prompt = [rng.randrange(3, 50) for _ in range(rng.randrange(1, 40))]
        stored, counted = _pair(prompt, 64)
        for _ in range(rng.randrange(0, 6)):
            k = rng.randrange(0, 5)
            if k == 0:
                stored.append_output_token(T)
                counted.append_output_token(T)
            elif k == 1:
                tokens = [T] * rng.randrange(0, 4)
                stored.append_decoded_tokens(tokens)
                counted.append_decoded_tokens(tokens)
            elif k == 2:
                tokens = [T] * rng.randrange(0, 6)
                stored.output_token_ids = tokens
                counted.output_token_ids = tokens
            else:
                new_prompt = prompt[: rng.randrange(1, len(prompt) + 1)]
                stored.prompt_token_ids = new_prompt
                counted.prompt_token_ids = new_prompt
            assert _tokens(counted) == _tokens(stored)
            assert counted._output_token_ids == []  # nothing stored
            n = stored.num_tokens
            for _ in range(5):
                start = rng.randrange(0, n + 1)
                end = rng.randrange(start, n + 1)
                assert counted.token_ids(start, end) == stored.token_ids(start, end)
        copy = handoff_copy(counted)
        assert copy.uniform_output_token == T and _tokens(copy) == _tokens(stored)


def test_another_token_is_refused_with_the_request_named():
    _, counted = _pair([5, 6, 7], 8)
    with pytest.raises(
        ValueError, match="r0: output token 4; expected only its uniform_output_token 0"
    ):
        counted.append_output_token(4)
    with pytest.raises(ValueError, match="uniform_output_token"):
        counted.append_decoded_tokens([T, 9])
    with pytest.raises(ValueError, match="uniform_output_token"):
        counted.output_token_ids = [T, 3]


def _state(scheduler, requests: list[Request]) -> tuple:
    """The pool and every request added to `scheduler` (running, waiting or finished)."""
    bm = scheduler.block_manager
    return (
        bm.ref_counts,
        bm.block_hash,
        bm.free_blocks,
        sorted(bm.hash_to_block.items()),
        bm.num_prefix_hits,
        scheduler.num_preemptions,
        [
            (
                r.request_id,
                r.status,
                r.block_table,
                r.block_hashes,
                r.num_computed_tokens,
                r.finish_time,
                r.num_preemptions,
                _tokens(r),
            )
            for r in requests
        ],
    )


@pytest.mark.parametrize("seed", range(12))
def test_the_scheduler_runs_counted_outputs_as_stored_ones(seed):
    """Two schedulers on one random workload (prompts sharing prefixes, a pool small enough to preempt,
    prefix caching that registers output blocks, decode stretches of random length): the same state
    after every step."""
    rng = random.Random(seed)
    settings = dict(
        num_blocks=rng.randrange(12, 40),
        block_size=rng.choice([1, 2, 4]),
        max_num_seqs=rng.randrange(2, 6),
        max_num_batched_tokens=rng.randrange(8, 32),
        max_model_len=96,
    )
    pair = [make_scheduler(**settings), make_scheduler(**settings)]
    added: tuple[list[Request], list[Request]] = ([], [])  # every request, per scheduler
    shared = [rng.randrange(3, 9) for _ in range(12)]
    clock = {"now": 0.0, "steps": 0, "stretched": 0}

    def step() -> bool:
        now = clock["now"]
        outs = [scheduler.schedule(now) for scheduler in pair]
        if outs[0].is_empty:
            return False
        limit = rng.randrange(1, 8)
        lengths = [scheduler.decode_stretch(out, limit) for scheduler, out in zip(pair, outs)]
        assert lengths[0] == lengths[1]
        if lengths[0] > 1:
            ends = [now + 0.01 * (k + 1) for k in range(lengths[0])]
            for scheduler, out in zip(pair, outs):
                scheduler.advance_decodes(out, lengths[0], ends, T)
            clock["now"], clock["stretched"] = ends[-1], clock["stretched"] + 1
        else:
            clock["now"] = now + 0.01
            for scheduler, out in zip(pair, outs):
                scheduler.update(out, [T] * len(out.scheduled), clock["now"])
        clock["steps"] += 1
        for scheduler in pair:
            check_invariants(scheduler)
        assert _state(pair[1], added[1]) == _state(pair[0], added[0])
        return True

    for index in range(rng.randrange(8, 16)):
        prompt = shared[: rng.randrange(0, 13)] + [
            rng.randrange(3, 9) for _ in range(rng.randrange(1, 20))
        ]
        capacity = settings["num_blocks"] * settings["block_size"]  # every request fits the pool
        prompt = prompt[: capacity // 2]
        max_tokens = rng.randrange(1, min(40, capacity - len(prompt)) + 1)
        for scheduler, requests, req in zip(pair, added, _pair(prompt, max_tokens, index)):
            scheduler.add_request(req)
            requests.append(req)
        for _ in range(rng.randrange(0, 4)):
            if not step():
                break
    while pair[0].has_unfinished_requests() and clock["steps"] < 2000:
        assert step()
    assert not pair[1].has_unfinished_requests() and clock["stretched"]  # some steps by stretches
    assert all(r.uniform_output_token == T and r.is_finished for r in added[1])
