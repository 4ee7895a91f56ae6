"""The server's step window for `validate --via http`: busy time runs from one step's start to the next
while the engine stays busy, idleness closes it, the window keeps the newest steps."""

import pytest

from engine.core.step_shape import StepShape
from engine.step_recorder import StepRecorder

DECODE = StepShape(decode_context_lens=(7, 9))
PREFILL = StepShape(prefill_chunks=((16, 0),))


def test_busy_time_spans_start_to_next_start_and_idleness_closes_it():
    recorder = StepRecorder(10)
    recorder.stepped(1.0, 0.2, PREFILL)
    recorder.stepped(1.25, 0.2, DECODE)  # 0.05 s of hand-offs after the first step
    recorder.idle()
    recorder.stepped(
        5.0, 0.1, DECODE
    )  # after idleness: the previous step's busy time stays unknown
    steps = recorder.since(0)["steps"]
    assert [step["busy_s"] for step in steps] == [pytest.approx(0.25), None, None]
    assert steps[0]["shape"] == {"prefill_chunks": ((16, 0),), "decode_context_lens": ()}
    assert steps[1]["shape"]["decode_context_lens"] == (7, 9) and steps[2]["step_s"] == 0.1


def test_window_keeps_the_newest_steps_and_since_counts_from_the_start():
    recorder = StepRecorder(3)
    for i in range(5):
        recorder.stepped(float(i), 0.5, DECODE)
    answer = recorder.since(0)
    assert answer["total"] == 5 and [step["index"] for step in answer["steps"]] == [2, 3, 4]
    assert [step["index"] for step in recorder.since(4)["steps"]] == [4] and recorder.since(9)[
        "steps"
    ] == []
    with pytest.raises(ValueError, match="record_steps 0"):
        StepRecorder(0)
