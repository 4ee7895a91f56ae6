"""Each dashboard page through Streamlit's AppTest: it renders without an exception, shows what it
promises (metrics, charts, the calibration and its label), and its outputs move the right way when an
input moves — a bigger spike needs at least as many GPUs and has a worse P99, a higher GPU price costs
more per request, static batching needs at least as many GPUs as continuous batching. Bad input (an
unreadable trace, an SLO no fleet in range can meet) gives an `st.error`, never a traceback. What one
page hands another (a trace, a calibration) arrives. Inputs are preset small through session state to
keep runs short."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.widgets import NONE_CHOICE
from simulator.scenario import Scenario

TIMEOUT = 240  # seconds per script run: generous, the machine is shared


def _page(name: str) -> AppTest:
    """One page; `session_state["test_page"]` switches the same session to another, as navigation does."""

    def script(page_name: str) -> None:
        import importlib

        import streamlit as st

        importlib.import_module(
            f"dashboard.views.{st.session_state.get('test_page', page_name)}"
        ).render()

    return AppTest.from_function(script, args=(name,), default_timeout=TIMEOUT)


def _clean(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def _number(at: AppTest, label: str) -> float:
    """The first number in the value of the metric whose label starts with `label`."""
    metric = next(m for m in at.metric if m.label.startswith(label))
    return float(re.search(r"-?[\d,]*\.?\d+", metric.value).group().replace(",", ""))


def _charts(at: AppTest) -> int:
    return len(at.get("plotly_chart"))


def test_app_opens_on_the_whatif_page():
    at = _clean(AppTest.from_file("../dashboard/app.py", default_timeout=TIMEOUT).run())
    assert at.title[0].value.startswith("What if traffic spikes")
    assert _charts(at) == 1


def test_whatif_spike_price_and_bad_input():
    at = _clean(_page("whatif").run())
    assert not at.error
    assert _charts(at) == 1
    facts = " ".join(c.value for c in at.caption)
    assert (
        "llama-2-7b@A100-80GB-tp1" in facts and "(fitted" in facts
    )  # the calibration and its label
    gpus, p99, cost = _number(at, "GPUs at peak"), _number(at, "P99 TTFT"), _number(at, "Cost / 1k")
    assert _number(at, "P99 TPOT") > 0
    controller = at.selectbox(key="whatif_batch_controller")  # a scheduler setting, from its field
    assert controller.options == ["fixed", "slo"] and controller.value == "fixed"
    assert at.number_input(key="whatif_batch_target_tpot_s").disabled

    at.number_input(key="whatif_multiplier").set_value(20.0)
    _clean(at.run())
    assert _number(at, "GPUs at peak") >= gpus
    assert _number(at, "P99 TTFT") >= p99

    at.number_input(key="whatif_multiplier").set_value(10.0)
    at.number_input(key="whatif_price").set_value(3.58)  # twice the catalog's A100 price
    _clean(at.run())
    assert _number(at, "Cost / 1k") > cost

    at.selectbox(key="whatif_batch_controller").set_value("slo")
    _clean(at.run())
    assert not at.number_input(key="whatif_batch_target_tpot_s").disabled
    assert "slo batch size (target TPOT 0.1 s)" in at.caption[0].value

    at.number_input(key="whatif_max_replicas").set_value(1)  # below the 2 replicas at start
    _clean(at.run())
    assert at.error and "max_replicas" in at.error[0].value
    assert not at.metric


def test_whatif_engine_profile_shows_its_default_and_takes_a_pick():
    at = _page("whatif")
    at.session_state["whatif_duration"] = 120.0  # a short spike: a quick simulation
    _clean(at.run())
    stack = at.selectbox(key="whatif_engine_profile")
    assert stack.value == NONE_CHOICE  # shown as the default's label, not as an empty box
    assert stack.options[0] == "default for the calibration (vllm-v1 on GPUs)"  # labels, not values
    assert any(label.startswith("vllm-v0:") for label in stack.options)
    assert any("the **vllm-v1** serving stack" in c.value for c in at.caption)
    stack.set_value("vllm-v0")
    _clean(at.run())
    assert any("the **vllm-v0** serving stack" in c.value for c in at.caption)


def test_whatif_batch_wait_is_a_pair_of_widgets_from_the_scheduler_settings():
    at = _page("whatif")
    at.session_state["whatif_duration"] = 120.0
    _clean(at.run())
    steps = at.number_input(key="whatif_batch_wait_steps")
    assert steps.value == 0 and at.number_input(key="whatif_batch_wait_max_tokens_ratio").disabled
    assert "TensorRT-LLM" in steps.help  # the help is the field's own description
    steps.set_value(20)
    _clean(at.run())  # a hold without its release is refused, naming both settings
    ratio = at.number_input(key="whatif_batch_wait_max_tokens_ratio")
    assert not ratio.disabled
    assert at.error and "batch_wait_max_tokens_ratio" in at.error[0].value
    ratio.set_value(0.9)
    _clean(at.run())
    assert not at.error
    assert "new prompts held up to 20 steps" in at.caption[0].value


def test_whatif_fused_all_reduce_is_refused_by_name_where_no_table_times_it():
    at = _page("whatif")
    at.session_state["whatif_duration"] = 120.0
    at.session_state["whatif_fused_all_reduce"] = 8.0  # Llama-2-7B on 2 A100s: a roofline's term
    at.session_state["whatif_tp"] = 2
    _clean(at.run())
    assert at.error and "fused_all_reduce_mb" in at.error[0].value


def test_whatif_model_that_does_not_fit_is_an_error():
    at = _page("whatif")
    at.session_state["whatif_model"] = "llama-2-70b"
    at.session_state["whatif_gpu"] = "A10G"
    _clean(at.run())
    assert at.error and "does not fit" in at.error[0].value


def test_traditional_vs_paged_static_needs_at_least_as_many_gpus():
    at = _page("paged")
    at.session_state["paged_highest"] = 4.0
    at.session_state["paged_duration"] = 30.0
    _clean(at.run())
    assert not at.error
    fleet = at.dataframe[0].value
    fleet = fleet[fleet["sized by"] == "throughput at saturation"].set_index("policy")
    continuous, static = fleet.loc["continuous + paged KV"], fleet.loc["static (traditional)"]
    assert static["GPUs"] >= continuous["GPUs"]
    assert static["req/s per replica"] <= continuous["req/s per replica"]
    kv = re.findall(r"(\d+)%", next(m for m in at.metric if m.label.startswith("KV cache")).value)
    assert int(kv[0]) > int(kv[1])  # paged holds more tokens per slot
    assert static["$ / hour"] >= continuous["$ / hour"]
    claims = " ".join(m.value for m in at.markdown)
    assert "100 → 40–50 A100s" in claims and "llama-2-7b@A100-80GB-tp1-aic-vllm, fitted" in claims
    for row in ("P99 latency", "TTFT variability", "cost of the fleet"):
        assert row in claims
    assert any("llama-2-7b@A100-80GB-tp1" in c.value and "fitted" in c.value for c in at.caption)


AZURE_CSV = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
    f"2023-11-16 18:{i // 60:02d}:{i % 60:02d}.0000000,{100 + 7 * i},{20 + i % 9}\n"
    for i in range(120)
)


# the public Azure traces these pages open by default (CI has ../shared beside the checkout)
needs_shared_traces = pytest.mark.skipif(
    not (Path(__file__).resolve().parents[2] / "shared" / "traces").is_dir(),
    reason="../shared/traces is not beside the checkout",
)


@needs_shared_traces
def test_traces_public_upload_synthetic_and_bad_file():
    at = _clean(_page("traffic").run())
    assert not at.error and _charts(at) == 2
    assert _number(at, "Requests") > 1000  # a public Azure trace

    at.sidebar.radio(key="traces_source").set_value("your file")
    _clean(at.run())
    at.sidebar.file_uploader(key="traces_upload").upload("mine.csv", AZURE_CSV.encode(), "text/csv")
    _clean(at.run())
    assert _number(at, "Requests") == 120 and "`azure`" in at.caption[0].value
    at.button(key="traces_use").click()  # "use in the other pages"
    _clean(at.run())
    assert at.success and "mine" in at.success[0].value

    at.session_state["test_page"] = "whatif"  # the What-if page takes it
    _clean(at.run())
    assert not at.error and at.title[0].value == "What does mine.csv do to the fleet?"
    assert at.radio(key="whatif_source").value == "trace file" and _number(at, "GPUs at peak") >= 2
    assert any("120 requests simulated" in c.value for c in at.caption)
    at.session_state["test_page"] = "traffic"
    _clean(at.run())
    assert at.radio(key="traces_source").value == "your file"  # kept across the page switch

    at.sidebar.file_uploader(key="traces_upload").upload("bad.csv", b"foo,bar\n1,2\n", "text/csv")
    _clean(at.run())
    assert at.error and "bad.csv" in at.error[0].value

    at.sidebar.radio(key="traces_source").set_value("synthetic spike")
    at.session_state["traces_duration"] = 600.0
    _clean(at.run())
    small = _number(at, "Peak / mean")
    at.sidebar.number_input(key="traces_multiplier").set_value(30.0)
    _clean(at.run())
    assert _number(at, "Peak / mean") > small


def _measured_calibration(model: str = "tiny", gpu: str | None = None) -> bytes:
    from engine.core.step_shape import StepShape
    from simulator.calibration.cost_fit import fit_calibration
    from simulator.calibration.schema import (
        Calibration,
        DeviceInfo,
        ProfilePoint,
        Provenance,
        ShapeRecord,
        StepSample,
    )
    from simulator.model_spec import ModelSpec

    points = []
    for batch in (1, 2, 4, 8, 16, 32):
        for context in (64, 256):
            seconds = 0.002 + 0.0004 * batch + 1e-6 * batch * context
            points.append(
                ProfilePoint(
                    kind="decode",
                    shape=ShapeRecord.of(StepShape((), (context,) * batch)),
                    samples=[
                        StepSample(
                            shape=ShapeRecord.of(StepShape((), (context,) * batch)),
                            total_s=seconds * f,
                            schedule_s=0,
                            prepare_s=0,
                            forward_s=seconds * f,
                            sample_s=0,
                        )
                        for f in (0.98, 1.0, 1.03)
                    ],
                )
            )
    for tokens in (32, 64, 128, 256, 512):
        seconds = 0.003 + 2e-5 * tokens
        shape = ShapeRecord.of(StepShape(((tokens, 0),), ()))
        points.append(
            ProfilePoint(
                kind="prefill",
                shape=shape,
                samples=[
                    StepSample(
                        shape=shape,
                        total_s=seconds,
                        schedule_s=0,
                        prepare_s=0,
                        forward_s=seconds,
                        sample_s=0,
                    )
                ],
            )
        )
    calibration = Calibration(
        name=f"{model}@test",
        label="measured",
        device=DeviceInfo(
            name=gpu or "test cpu", kind="gpu" if gpu else "cpu", memory_bytes=1e9, hardware=gpu
        ),
        model=ModelSpec.from_preset(model),
        dtype="float32",
        points=points,
        provenance=Provenance(source="test", method="synthetic points"),
    )
    return fit_calibration(calibration, folds=3).model_dump_json().encode()


def test_calibrations_table_curves_and_a_measured_file():
    at = _clean(_page("calibrations").run())
    assert not at.error and _charts(at) == 1
    table = at.dataframe[0].value
    assert len(table) >= 20 and set(table["label"]) <= {"measured", "fitted", "derived"}

    at.expander[0].file_uploader[0].upload("mine.json", _measured_calibration(), "application/json")
    _clean(at.run())
    assert _charts(at) == 2  # predicted vs measured, curves
    assert any("tiny@test (measured)" in c.value for c in at.caption)

    at.expander[0].file_uploader[0].upload("bad.json", b'{"name": 1}', "application/json")
    _clean(at.run())
    assert at.error and "bad.json" in at.error[0].value


def test_an_uploaded_calibration_is_used_at_once_and_a_wrong_one_explained():
    at = _page("calibrations")
    at.session_state["whatif_duration"] = 120.0  # a short spike: a quick simulation
    _clean(at.run())
    at.expander[0].file_uploader[0].upload(
        "h100.json", _measured_calibration("llama-2-7b", "H100-80GB"), "application/json"
    )
    _clean(at.run())
    at.button(key="calibrations_use").click()
    _clean(at.run())
    assert at.success and "llama-2-7b@test** (measured)" in at.success[0].value
    at.session_state["test_page"] = "whatif"
    _clean(at.run())
    assert not at.error and at.selectbox(key="whatif_gpu").value == "H100-80GB"
    assert any("calibration **llama-2-7b@test** (measured" in c.value for c in at.caption)

    at.selectbox(key="whatif_model").set_value("llama-3-8b")  # not the calibration's model
    _clean(at.run())
    assert at.error and "made for model 'llama-2-7b'" in at.error[0].value and not at.metric


def _plan_page(rate_per_s: float, duration_s: float, **settings) -> AppTest:
    """The Plan page on a small Poisson scenario of one replica, its settings in session state
    (defaults: one batch setting, no comparisons), before "Plan" is pressed."""
    small = Scenario.model_validate(
        {
            "name": "small",
            "traffic": {
                "arrivals": {"kind": "poisson", "rate_per_s": rate_per_s},
                "duration_s": duration_s,
                "too_long": "clip",
            },
            "cluster": {"replicas": 1},
        }
    )
    at = _page("plan")
    state = {
        "whatif_scenario": small.model_dump_json(),
        "plan_seqs": [256],
        "plan_tokens": [4096],
        "plan_static_baseline": False,
        "plan_autoscaled": False,
        "plan_dynamic_batch": False,
        "plan_uncertainty": False,
    }
    for key, value in (state | {f"plan_{name}": value for name, value in settings.items()}).items():
        at.session_state[key] = value
    return at


def test_plan_small_fleet_and_static_baseline():
    at = _plan_page(2.0, 60, max_replicas=4, static_baseline=True)
    _clean(at.run())
    assert at.info and not at.success  # nothing runs before "Plan"
    at.button(key="plan_run").click()
    _clean(at.run())
    assert not at.error, at.error[0].value
    assert at.success and "A100-80GB" in at.success[0].value
    gpus = _number(at, "Fleet")
    static = at.dataframe[-1].value.set_index("fleet").loc["traditional server (static batching)"]
    assert static["GPUs"] >= gpus
    assert any("llama-2-7b@A100-80GB-tp1" in c.value and "fitted" in c.value for c in at.caption)
    per_gpu = at.dataframe[0].value
    assert list(per_gpu[""]) == ["★"] and per_gpu["$ / 1M output tokens"][0] > 0
    assert "ledger" in at.get("download_button")[0].proto.label


def test_plan_with_an_slo_no_fleet_can_meet_is_explained():
    at = _plan_page(1.0, 30, max_replicas=2, ttft=0.001)
    _clean(at.run())
    at.button(key="plan_run").click()
    _clean(at.run())
    assert at.error and "no fleet of any size can meet the SLO" in at.error[0].value
    assert not at.success and not _charts(at)


VALIDATION = {
    "levels": [
        {
            "load": load,
            "rate_rps": 2.0 * load,
            "used_calibration": "workload",
            "measured": {
                "throughput_rps": 1.0,
                "output_tokens_per_s": 50.0,
                "ttft_mean_s": 0.2,
                "e2e_mean_s": 2.0,
                "kv_utilization": 0.9,
            },
            "simulated": {
                "throughput_rps": 1.02,
                "output_tokens_per_s": 52.0,
                "ttft_mean_s": 0.25,
                "e2e_mean_s": 2.1,
                "kv_utilization": 0.92,
            },
            "relative_error": {
                "throughput_rps": 0.02,
                "ttft_mean_s": 0.25,
                "e2e_mean_s": 0.05,
                "kv_utilization": 0.022,
            },
            "noise_floor": {
                "throughput_rps": 0.03,
                "ttft_mean_s": 0.1,
                "e2e_mean_s": 0.02,
                "kv_utilization": 0.01,
            },
            "verdict": {
                "throughput_rps": "below noise",
                "ttft_mean_s": "+25.0%",
                "e2e_mean_s": "+5.0%",
                "kv_utilization": "+2.2%",
            },
            "at_run_speed": {"speed_factors": [1.1, 1.0], "relative_error": {"ttft_mean_s": 0.03}},
        }
        for load in (0.5, 0.9)
    ],
    "calibration": {
        "workload": {
            "name": "cpu-small@steps",
            "label": "measured",
            "method": "steps",
            "fit_error": 0.04,
        }
    },
    "trace": {"name": "AzureLLMInferenceTrace_conv", "requests": 32},
    "engine": {"model": "cpu-small", "device": "cpu"},
    "machine": {"processor": "x86_64", "date": "2026-12-02"},
}


def test_validate_shows_the_pooled_published_summary_or_why_not(tmp_path, monkeypatch):
    from dashboard.data import catalogs, saved_files

    at = _clean(_page("validate").run())
    pooled = next(frame.value for frame in at.dataframe if "degree" in frame.value)
    assert {"all", "TP1", "TP>1"} == set(pooled["degree"])
    assert set(pooled["targets"]) == {"met", "missed"}
    mine = pooled[(pooled["profile"] == "trtllm") & (pooled["GPU"] == "H100-80GB")]
    assert list(mine["degree"]) == ["all", "TP1", "TP>1"]
    # the planner's band per profile, GPU and degree, as a plan reads it
    bands = next(frame.value for frame in at.dataframe if "rows read" in frame.value)
    h200 = bands[(bands["profile"] == "trtllm") & (bands["GPU"] == "H200-141GB")]
    assert list(h200["TP"]) == [1, 2, 4, 8]
    assert list(h200["rows read"]) == ["single-GPU runs on H200-141GB"] + [
        f"TP{tp} runs on H200-141GB" for tp in (2, 4, 8)
    ]
    assert all(band.startswith("±") and band.endswith("%") for band in bands["band"])

    monkeypatch.setattr(saved_files, "PUBLISHED_JSON", tmp_path / "published_validation.json")
    catalogs.published_summary.clear()
    at = _clean(_page("validate").run())
    catalogs.published_summary.clear()
    assert any("not saved yet" in c.value for c in at.caption)
    assert not [frame for frame in at.dataframe if "degree" in frame.value]


def test_validate_shows_a_published_set_as_saved_and_replays_it_only_when_asked(
    tmp_path, monkeypatch
):
    import json

    from dashboard.data import catalogs, saved_files
    from simulator.validation import published_report

    replay = published_report.validate_published
    asked = []

    def counted(name: str) -> dict:
        asked.append(name)
        return replay(name)

    monkeypatch.setattr(published_report, "validate_published", counted)
    saved = {r["source"]["name"]: r for r in json.loads(saved_files.PUBLISHED_JSON.read_text())}
    for cache in (catalogs.published_saved, catalogs.published_validation):
        cache.clear()

    def every_row(at: AppTest):
        return next(frame.value for frame in at.dataframe if "simulated (s)" in frame.value)

    # the largest set, shown at once from the saved replay: nothing replayed
    at = _clean(_page("validate").run())
    at = _clean(at.selectbox(key="validate_published_set").select("argonne-trtllm").run())
    assert any("as the saved replay has it" in c.value for c in at.caption)
    assert len(every_row(at)) == len(saved["argonne-trtllm"]["rows"]) and asked == []

    # asked for, a set is replayed with this code and compared row by row with the saved one
    at = at.selectbox(key="validate_published_set").select("lambdalabs-vllm").run()
    at = _clean(at.checkbox(key="validate_published_replay_lambdalabs-vllm").check().run())
    rows = len(saved["lambdalabs-vllm"]["rows"])
    assert asked == ["lambdalabs-vllm"]
    assert any(f"replayed now; all {rows} rows as saved" in c.value for c in at.caption)
    assert len(every_row(at)) == rows
    # the box is the set's own: another set is shown as saved, not replayed
    at = _clean(at.selectbox(key="validate_published_set").select("argonne-vllm").run())
    assert asked == ["lambdalabs-vllm"]

    # a saved replay older than the code: the moved rows are counted; a set it lacks is said so
    stale, rng = dict(saved), random.Random()
    moved = list(saved["lambdalabs-vllm"]["rows"])
    at_row = rng.randrange(len(moved))  # any one row, moved by 0.1-10%
    moved[at_row] = {
        **moved[at_row],
        "simulated": moved[at_row]["simulated"] * rng.uniform(1.001, 1.1),
    }
    stale["lambdalabs-vllm"] = {**saved["lambdalabs-vllm"], "rows": moved}
    del stale["argonne-vllm"]
    (tmp_path / "published_validation.json").write_text(json.dumps(list(stale.values())))
    monkeypatch.setattr(saved_files, "PUBLISHED_JSON", tmp_path / "published_validation.json")
    for cache in (catalogs.published_saved, catalogs.published_summary):
        cache.clear()
    at = _clean(at.run())
    assert any("argonne-vllm is not in the saved replay" in c.value for c in at.caption)
    assert not [frame for frame in at.dataframe if "simulated (s)" in frame.value]
    at = at.selectbox(key="validate_published_set").select("lambdalabs-vllm").run()
    assert any("as the saved replay has it" in c.value for c in at.caption)  # its box was reset
    at = _clean(at.checkbox(key="validate_published_replay_lambdalabs-vllm").check().run())
    assert any(f"1 of {rows} rows differ from the saved replay" in c.value for c in at.caption)
    for cache in (catalogs.published_saved, catalogs.published_summary):
        cache.clear()


def test_validate_absent_file_saved_results_and_live_button(tmp_path, monkeypatch):
    import json

    from dashboard.data import saved_files

    monkeypatch.setattr(saved_files, "VALIDATE_JSON", tmp_path / "validate.json")
    monkeypatch.setattr(saved_files, "ROOT", tmp_path)
    at = _clean(_page("validate").run())
    assert at.info and "absent" in at.info[0].value and not at.metric

    (tmp_path / "validate.json").write_text(json.dumps(VALIDATION))
    at = _clean(_page("validate").run())
    # errors, a distribution per level, the chosen published set's simulated-vs-measured scatter
    assert not at.error and _charts(at) == 3 + 1 and len(at.metric) == 2
    held = next(frame.value for frame in at.dataframe if "published set" in frame.value)
    assert {"vllm-v0", "trtllm"} <= set(held["profile"])  # held-out error per profile and GPU
    splits = {
        row for frame in at.dataframe[1:] if "split" in frame.value for row in frame.value["split"]
    }
    assert {"fit", "held_out"} <= splits
    assert any("cpu-small@steps (measured" in c.value for c in at.caption)
    table = at.dataframe[0].value.set_index("metric")
    assert (
        table.loc["ttft_mean_s", "measured"] == "200.0 ms"
        and table.loc["output_tokens_per_s", "measured"] == "50"
    )
    assert (
        table.loc["ttft_mean_s", "error at run speed"] == "+3.0%"
        and table.loc["e2e_mean_s", "error at run speed"] == "n/a"
    )

    # other saved runs beside it (the H200 lease's) are offered; the CPU's validate.json comes first
    gpu_run = {**VALIDATION, "engine": {"model": "llama-3-8b", "device": "cuda"}}
    (tmp_path / "validate-h200-conv.json").write_text(json.dumps(gpu_run))
    (tmp_path / "validate-conv-calibration.json").write_text("{}")  # a calibration, not a run
    at = _clean(_page("validate").run())
    runs = at.selectbox(key="validate_saved_run")
    assert runs.options == ["validate.json", "validate-h200-conv.json"]
    assert any("cpu-small on cpu" in c.value for c in at.caption)
    at = _clean(runs.select("validate-h200-conv.json").run())
    assert not at.error and any("llama-3-8b on cuda" in c.value for c in at.caption)

    (tmp_path / "validate.json").write_text("{not json")
    at = _clean(_page("validate").run())
    assert at.error and "cannot be read" in at.error[0].value


def _live_job(at: AppTest):
    return at.session_state["validate_job"]


def _live_done(trace, requests, levels, progress):  # stands in for minutes of the live engine
    from dashboard.data import live

    for step in range(live.live_validation_steps(levels)):
        progress(f"step {step + 1}")
    return VALIDATION, None


def _live_endless(trace, requests, levels, progress):  # runs until cancelled, reporting as it goes
    import time

    while True:
        progress("live run")
        time.sleep(0.02)


@needs_shared_traces
def test_live_validation_shows_progress_and_its_result(monkeypatch):
    from dashboard.data import live

    monkeypatch.setattr(live, "live_validation", _live_done)
    at = _clean(_page("validate").run())
    at.button(key="validate_run").click()
    _clean(at.run())
    assert _live_job(at).wait(60)
    _clean(at.run())
    assert at.success and "done" in at.success[0].value
    assert any("live run from this page" in c.value for c in at.caption)


@needs_shared_traces
def test_live_validation_can_be_cancelled(monkeypatch):
    import time

    from dashboard.data import live

    monkeypatch.setattr(live, "live_validation", _live_endless)
    at = _clean(_page("validate").run())
    at.button(key="validate_run").click()
    _clean(at.run())
    deadline = time.monotonic() + 60
    while not _live_job(at).messages and time.monotonic() < deadline:
        time.sleep(0.05)
    _clean(at.run())
    assert any(
        "live run" in p.proto.text for p in at.get("progress")
    )  # progress shown while it runs
    at.button(key="validate_cancel").click()
    _clean(at.run())
    assert _live_job(at).wait(10)
    _clean(at.run())
    assert any("cancelled" in info.value for info in at.info) and not at.success


def test_validate_page_shows_every_saved_run_of_the_repository():
    """Each `benchmarks/results/validate*.json` the project ships (CPU, HTTP, the H200 lease) renders
    on the Validate page: its table of errors, no error box."""
    from dashboard.data import saved_files

    runs = [str(p.relative_to(saved_files.ROOT)) for p in saved_files.saved_validations()]
    assert "benchmarks/results/validate-h200-conv.json" in runs
    at = _clean(_page("validate").run())
    for name in runs:
        at = _clean(at.selectbox(key="validate_saved_run").select(name).run())
        assert not at.error, (name, [e.value for e in at.error])
        assert any(name in c.value for c in at.caption), name
