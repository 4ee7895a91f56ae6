"""The planner's band at a plan's tensor-parallel degree: each profile stores its published errors per
degree beside the pooled ones, and a plan reads the rows of its own degree on its GPU when there are
enough of them, else those of its class (one GPU, or a tensor-parallel group), on its GPU when there
are some, else on every GPU."""

import math
import random

import pytest

from simulator.calibration.engine_profile import load_profile, profile_names
from simulator.calibration.profile_errors import DEGREE_MIN_ROWS, ProfileError, tp_class
from simulator.scenario import Scenario
from simulator.simulation import build_cluster
from simulator.validation.profile_fit import _with_errors
from simulator.validation.published_report import Row, stats
from traces import Trace


def _error(rng, gpu, tp=None, split="held_out", rows=None):
    return ProfileError(
        source=f"set-{rng.randrange(10**6)}",
        gpu=gpu,
        split=split,
        num_rows=rows if rows is not None else rng.randint(3, 60),
        median_abs_error=rng.uniform(0.005, 0.3),
        bias=rng.uniform(0.7, 1.3),
        within_10pct=rng.random(),
        tensor_parallel=tp,
    )


def _weighted(errors):
    return sum(e.median_abs_error * e.num_rows for e in errors) / sum(e.num_rows for e in errors)


def _few(rng):
    """Rows too few for a degree to be read alone, however three such records fall on one degree."""
    return rng.randint(1, (DEGREE_MIN_ROWS - 1) // 3)


def test_the_band_reads_the_plans_class_on_its_gpu_then_on_every_gpu_then_pooled():
    rng = random.Random()  # fresh inputs each run
    single = [_error(rng, "H100-80GB", 1) for _ in range(rng.randint(1, 3))]
    group_h100 = [
        _error(rng, "H100-80GB", rng.choice((2, 4, 8)), rows=_few(rng))
        for _ in range(rng.randint(1, 3))
    ]
    group_a100 = [
        _error(rng, "A100-80GB", rng.choice((4, 8)), rows=_few(rng))
        for _ in range(rng.randint(1, 3))
    ]
    pooled = [_error(rng, "H100-80GB"), _error(rng, "A100-80GB"), _error(rng, "B200-180GB")]
    noise = [_error(rng, "H100-80GB", 4, split="fit"), _error(rng, "H100-80GB", split="fit")]
    profile = load_profile("trtllm").model_copy(
        update={"errors": single + group_h100 + group_a100 + pooled + noise}
    )
    band = profile.held_out_error
    assert band("H100-80GB", 1) == pytest.approx(_weighted(single))
    assert band("H100-80GB", rng.choice((2, 4, 8))) == pytest.approx(_weighted(group_h100))
    assert band("A100-80GB", 8) == pytest.approx(_weighted(group_a100))
    # a GPU without rows of the class: the class on every GPU
    assert band("B200-180GB", 4) == pytest.approx(_weighted(group_h100 + group_a100))
    assert band("A100-80GB", 1) == pytest.approx(_weighted(single))
    # no degree, or no rows of its class anywhere: the pooled records, as before
    assert band("B200-180GB") == pytest.approx(pooled[2].median_abs_error)
    assert band() == pytest.approx(_weighted(pooled))
    without_singles = profile.model_copy(update={"errors": group_h100 + pooled})
    assert without_singles.held_out_error("A100-80GB", 1) == pytest.approx(
        pooled[1].median_abs_error
    )
    # and it says which rows it read
    assert profile.held_out("H100-80GB", 1)[1] == "single-GPU runs on H100-80GB"
    assert profile.held_out("B200-180GB", 8)[1] == "tensor-parallel runs on every GPU"
    assert without_singles.held_out("A100-80GB", 1)[1] == "runs on A100-80GB"
    assert without_singles.held_out("L40S", 1)[1] == "runs on every GPU"
    assert profile.model_copy(update={"errors": noise}).held_out("H100-80GB", 4) == (
        None,
        "no published rows",
    )


def test_a_degree_with_enough_rows_on_the_gpu_is_read_alone():
    rng = random.Random()
    degree = rng.choice((2, 4, 8))
    other = rng.choice([tp for tp in (2, 4, 8) if tp != degree])
    own = [
        _error(rng, "H200-141GB", degree, rows=rng.randint(1, 20)) for _ in range(rng.randint(1, 3))
    ]
    beside = [_error(rng, "H200-141GB", other) for _ in range(rng.randint(1, 3))]
    elsewhere = [_error(rng, "B200-180GB", degree, rows=DEGREE_MIN_ROWS + rng.randint(0, 30))]
    profile = load_profile("vllm-v1").model_copy(update={"errors": own + beside + elsewhere})
    figure, rows = profile.held_out("H200-141GB", degree)
    if sum(e.num_rows for e in own) >= DEGREE_MIN_ROWS:
        assert figure == pytest.approx(_weighted(own))
        assert rows == f"TP{degree} runs on H200-141GB"
    else:  # too few: the whole class on the GPU, as before
        assert figure == pytest.approx(_weighted(own + beside))
        assert rows == "tensor-parallel runs on H200-141GB"
    # another GPU's rows at the degree never stand in for this GPU's
    assert profile.held_out("H100-80GB", degree)[1] == "tensor-parallel runs on every GPU"
    assert profile.held_out("B200-180GB", degree) == (
        pytest.approx(elsewhere[0].median_abs_error),
        f"TP{degree} runs on B200-180GB",
    )
    # one GPU is a class of one degree: read as before
    assert profile.held_out("H200-141GB", 1)[1] != "TP1 runs on H200-141GB"


def test_recorded_errors_are_pooled_and_per_degree():
    rng = random.Random()
    rows = [
        Row(
            "a-set",
            f"run-{i}",
            gpu,
            "held_out",
            "makespan_s",
            "trtllm",
            1.0,
            1.0 + rng.uniform(-0.3, 0.3),
            tp,
        )
        for i, (gpu, tp) in enumerate(
            (rng.choice(("H100-80GB", "A100-80GB")), rng.choice((1, 4, 8))) for _ in range(40)
        )
    ]
    profile = _with_errors(load_profile("trtllm"), "a-set", rows)
    stored = [e for e in profile.errors if e.source == "a-set"]
    for gpu in {row.gpu for row in rows}:
        on_gpu = [row for row in rows if row.gpu == gpu]
        (whole,) = [e for e in stored if e.gpu == gpu and e.tensor_parallel is None]
        assert whole.num_rows == len(on_gpu)
        assert whole.median_abs_error == pytest.approx(stats(on_gpu).median_abs_error)
        for tp in {row.tensor_parallel for row in on_gpu}:
            part = [row for row in on_gpu if row.tensor_parallel == tp]
            (record,) = [e for e in stored if e.gpu == gpu and e.tensor_parallel == tp]
            assert record.num_rows == len(part)
            assert record.median_abs_error == pytest.approx(stats(part).median_abs_error)
            assert record.bias == pytest.approx(stats(part).bias)


def test_every_shipped_profile_holds_its_errors_per_degree_too():
    """The per-degree records of each (set, GPU, split) add up to its pooled one: every shipped
    profile was recorded with them (a profile written before has the pooled ones alone)."""
    for name in profile_names():
        errors = load_profile(name).errors
        for whole in [e for e in errors if e.tensor_parallel is None]:
            parts = [
                e
                for e in errors
                if e.tensor_parallel is not None
                and (e.source, e.gpu, e.split) == (whole.source, whole.gpu, whole.split)
            ]
            assert parts and sum(e.num_rows for e in parts) == whole.num_rows, (name, whole)
            if len(parts) == 1:  # one degree: the same rows, the same figures
                assert math.isclose(parts[0].median_abs_error, whole.median_abs_error)


def test_a_plan_at_tp4_carries_the_tensor_parallel_rows_band():
    profile = load_profile("trtllm")
    pooled, single, grouped = (
        profile.held_out_error("H100-80GB"),
        profile.held_out_error("H100-80GB", 1),
        profile.held_out_error("H100-80GB", 4),
    )
    assert len({pooled, single, grouped}) == 3  # the shipped rows tell the classes apart
    for tp, expected in ((1, single), (4, grouped)):
        scenario = Scenario.model_validate(
            {
                "name": f"band-tp{tp}",
                "model": {"name": "llama-3-70b" if tp > 1 else "llama-3-8b"},
                "hardware": {"gpu": "H100-80GB", "tensor_parallel": tp},
                "engine_profile": "trtllm",
                "cluster": {"replicas": 1},
            }
        )
        trace = Trace([0.0], [16], [4], name="one")
        _, facts = build_cluster(scenario, trace)
        assert facts["calibration"]["held_out_error"] == pytest.approx(expected)
        # the H100's TensorRT-LLM groups are all TP4, more than DEGREE_MIN_ROWS of them: read alone
        runs = "TP4" if tp > 1 else "single-GPU"
        assert facts["calibration"]["held_out_rows"] == f"{runs} runs on H100-80GB"


def test_tensor_parallel_classes():
    degree = random.randint(2, 64)
    assert tp_class(1) == "TP1" and tp_class(degree) == "TP>1"
