"""RequestSpec and Trace: validation, immutability, selection, equality."""

import numpy as np
import pytest
from pydantic import ValidationError

from traces import RequestSpec, Trace, TraceFormatError


def random_trace(seed: int, n: int = 50, with_hashes: bool = True) -> Trace:
    rng = np.random.default_rng(seed)
    arrival = np.sort(rng.uniform(0, 100, n))
    prompt = rng.integers(1, 2000, n)
    hash_ids = (
        [rng.integers(0, 30, int(np.ceil(p / 64))).tolist() for p in prompt]
        if with_hashes
        else None
    )
    return Trace(
        arrival,
        prompt,
        rng.integers(0, 500, n),
        hash_ids=hash_ids,
        hash_block_size=64 if with_hashes else None,
        tenant=rng.choice(["a", "bb", "ccc"], n),
        priority=rng.integers(-2, 3, n),
        failed=rng.random(n) < 0.1,
        source_line=np.arange(n) + 2,
        name=f"random-{seed}",
        provenance=("test",),
    )


def test_request_spec_validates_its_fields():
    spec = RequestSpec(
        arrival_s=1.5, prompt_tokens=10, output_tokens=0, hash_ids=(1, 2), hash_block_size=8
    )
    assert spec.hash_ids == (1, 2)
    with pytest.raises(ValidationError):
        RequestSpec(arrival_s=0.0, prompt_tokens=0, output_tokens=3)
    with pytest.raises(ValidationError):
        RequestSpec(arrival_s=-1.0, prompt_tokens=5, output_tokens=3)
    with pytest.raises(ValidationError, match="hash_block_size"):
        RequestSpec(arrival_s=0.0, prompt_tokens=5, output_tokens=3, hash_ids=(1,))
    with pytest.raises(ValidationError):
        spec.prompt_tokens = 5  # frozen


def test_trace_columns_are_read_only():
    trace = random_trace(1)
    for column in (
        trace.arrival_s,
        trace.prompt_tokens,
        trace.output_tokens,
        trace.tenant,
        trace.failed,
    ):
        with pytest.raises(ValueError):
            column[0] = column[1]
    with pytest.raises(TypeError):
        trace.hash_ids[0].append(5)
    with pytest.raises(TypeError):
        trace.hash_ids[0] = [1]
    assert isinstance(trace.hash_ids[0], list)
    assert trace.hash_ids[3] == list(trace.hash_ids[3])


def test_trace_does_not_share_memory_with_its_inputs():
    arrival = np.array([0.0, 1.0, 2.0])
    trace = Trace(arrival, [5, 6, 7], [1, 2, 3])
    arrival[0] = 9.0
    assert trace.arrival_s[0] == 0.0


@pytest.mark.parametrize(
    "bad",
    [
        dict(arrival_s=[1.0, 0.5], prompt_tokens=[1, 1], output_tokens=[1, 1]),
        dict(arrival_s=[0.0, 0.5], prompt_tokens=[0, 1], output_tokens=[1, 1]),
        dict(arrival_s=[0.0, 0.5], prompt_tokens=[1, 1], output_tokens=[1, -1]),
        dict(arrival_s=[0.0, np.nan], prompt_tokens=[1, 1], output_tokens=[1, 1]),
        dict(arrival_s=[0.0, 0.5], prompt_tokens=[1, 1, 1], output_tokens=[1, 1]),
    ],
)
def test_trace_rejects_inconsistent_columns(bad):
    with pytest.raises(TraceFormatError):
        Trace(**bad)


def test_hash_ids_need_their_block_size():
    with pytest.raises(TraceFormatError, match="hash_block_size"):
        Trace([0.0], [4], [1], hash_ids=[[1]])


def test_indexing_iteration_and_selection_agree():
    trace = random_trace(2)
    requests = list(trace)
    assert len(requests) == len(trace) == 50
    assert requests[7] == trace[7]
    assert requests[7].arrival_s == trace.arrival_s[7]
    assert list(requests[7].hash_ids) == trace.hash_ids[7]
    assert requests[-1] == trace[49]
    with pytest.raises(IndexError):
        trace.request(50)
    mask = trace.tenant == "bb"
    picked = trace[mask]
    assert len(picked) == mask.sum()
    assert np.all(picked.tenant == "bb")
    assert picked.hash_ids == [trace.hash_ids[i] for i in np.flatnonzero(mask)]
    assert trace[10:20] == trace.select(np.arange(10, 20))


def test_from_requests_rebuilds_the_same_trace():
    trace = random_trace(3)
    rebuilt = Trace.from_requests(list(trace)[::-1], name=trace.name, provenance=trace.provenance)
    assert rebuilt == trace


def test_equality_sees_every_column():
    trace = random_trace(4, with_hashes=False)
    assert trace == trace.replace()
    assert trace != trace.replace(priority=trace.priority + 1)
    assert trace != trace.replace(name="other")
    assert trace.replace("step").provenance == trace.provenance + ("step",)


def test_duration_and_empty_trace():
    assert random_trace(5).duration_s == pytest.approx(np.ptp(random_trace(5).arrival_s))
    empty = Trace([], [], [])
    assert len(empty) == 0 and empty.duration_s == 0.0
    assert list(empty) == []


def test_flat_hash_ids_match_the_lists():
    trace = random_trace(6)
    flat, offsets = trace.flat_hash_ids()
    for i in (0, 17, 49):
        assert flat[offsets[i] : offsets[i + 1]].tolist() == trace.hash_ids[i]
    with pytest.raises(TraceFormatError):
        random_trace(6, with_hashes=False).flat_hash_ids()
