"""Bad input raises ValueError naming the problem, and requests already in flight are untouched."""

import pytest

from engine import LLM, SamplingParams


@pytest.fixture(scope="module")
def llm():
    return LLM("tiny", load_format="dummy", max_model_len=64, num_kv_blocks=32, block_size=8)


BAD_REQUESTS = {
    "prompt longer than max_model_len": (
        lambda: ([7] * 65, SamplingParams(max_tokens=1)),
        "longer than max_model_len=64",
    ),
    "prompt + max_tokens over max_model_len": (
        lambda: ([7] * 60, SamplingParams(max_tokens=10)),
        "= 70 exceeds max_model_len=64",
    ),
    "empty prompt": (lambda: ([], SamplingParams()), "prompt is empty"),
    "token id past the vocabulary": (
        lambda: ([5, 512], SamplingParams()),
        "512 is outside the vocabulary",
    ),
    "negative token id": (lambda: ([-1], SamplingParams()), "-1 is outside the vocabulary"),
}

BAD_PARAMS = {
    "max_tokens 0": (dict(max_tokens=0), "max_tokens is 0"),
    "temperature < 0": (dict(temperature=-0.5), "temperature is -0.5"),
    "top_p 0": (dict(top_p=0.0), "top_p is 0.0"),
    "top_p over 1": (dict(top_p=1.5), "top_p is 1.5"),
}


@pytest.mark.parametrize("case", list(BAD_REQUESTS))
def test_bad_request_is_refused_and_others_finish(llm, case):
    make, message = BAD_REQUESTS[case]
    engine = llm.engine
    good = engine.add_request(
        None, [5, 6, 7, 8], SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    )
    prompt, params = make()
    with pytest.raises(ValueError, match=message.replace("+", r"\+")):
        engine.add_request(None, prompt, params)
    finished = {}
    while engine.has_unfinished_requests():
        finished.update({o.request_id: o for o in engine.step() if o.finished})
    assert list(finished) == [good] and len(finished[good].output_token_ids) == 4


@pytest.mark.parametrize("case", list(BAD_PARAMS))
def test_bad_sampling_params_are_refused(case):
    kwargs, message = BAD_PARAMS[case]
    with pytest.raises(ValueError, match=message):
        SamplingParams(**kwargs)


def test_request_that_can_never_fit_the_pool_is_refused():
    small = LLM("tiny", load_format="dummy", max_model_len=128, num_kv_blocks=4, block_size=8)
    with pytest.raises(ValueError, match="may need 6 KV blocks but the pool has 4"):
        small.engine.add_request(None, [5] * 40, SamplingParams(max_tokens=8))


def test_unknown_model_names_the_choices():
    with pytest.raises(ValueError, match="neither a preset"):
        LLM("no-such-model", load_format="dummy")


def test_abort_frees_blocks_and_keeps_others(llm):
    engine = llm.engine
    keep = engine.add_request(
        None, [9] * 20, SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    )
    drop = engine.add_request(
        None, [8] * 20, SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    )
    engine.step()
    assert engine.abort_request(drop) and not engine.abort_request(drop)
    outs = {}
    while engine.has_unfinished_requests():
        outs.update({o.request_id: o for o in engine.step() if o.finished})
    assert list(outs) == [keep] and engine.kv_stats().num_used_blocks == 0
