"""Each dashboard page through Streamlit's AppTest: it renders without an exception, shows what it
promises (metrics, charts, the calibration and its label), and its outputs move the right way when an
input moves — a bigger spike needs at least as many GPUs and has a worse P99, a higher GPU price costs
more per request, static batching needs at least as many GPUs as continuous batching. Bad input gives
an `st.error`, never a traceback. Inputs are preset small through session state to keep runs short."""
from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from simulator.scenario import Scenario

TIMEOUT = 240     # seconds per script run: generous, the machine is shared


def _page(name: str) -> AppTest:
    def script(page_name: str) -> None:
        import importlib

        importlib.import_module(f"dashboard.views.{page_name}").render()
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
    assert "llama-2-7b@A100-80GB-tp1" in facts and "(fitted" in facts          # the calibration and its label
    gpus, p99, cost = _number(at, "GPUs at peak"), _number(at, "P99 time"), _number(at, "Cost / 1k")

    at.number_input(key="whatif_multiplier").set_value(20.0)
    _clean(at.run())
    assert _number(at, "GPUs at peak") >= gpus
    assert _number(at, "P99 time") >= p99

    at.number_input(key="whatif_multiplier").set_value(10.0)
    at.number_input(key="whatif_price").set_value(3.58)                         # twice the catalog's A100 price
    _clean(at.run())
    assert _number(at, "Cost / 1k") > cost

    at.number_input(key="whatif_max_replicas").set_value(1)                    # below the 2 replicas at start
    _clean(at.run())
    assert at.error and "max_replicas" in at.error[0].value
    assert not at.metric


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
    fleet = at.dataframe[0].value.set_index("policy")
    continuous, static = fleet.loc["continuous + paged KV"], fleet.loc["static (traditional)"]
    assert static["GPUs (saturation)"] >= continuous["GPUs (saturation)"]
    assert static["req/s per replica at saturation"] <= continuous["req/s per replica at saturation"]
    kv = re.findall(r"(\d+)%", next(m for m in at.metric if m.label.startswith("KV cache")).value)
    assert int(kv[0]) > int(kv[1])                                              # paged holds more tokens per slot
    claims = " ".join(m.value for m in at.markdown)
    assert "100 → 40–50 A100s" in claims and "llama-2-7b@A100-80GB-tp1, fitted" in claims
    assert any("llama-2-7b@A100-80GB-tp1" in c.value and "fitted" in c.value for c in at.caption)


AZURE_CSV = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
    f"2023-11-16 18:{i // 60:02d}:{i % 60:02d}.0000000,{100 + 7 * i},{20 + i % 9}\n" for i in range(120))


def test_traces_public_upload_synthetic_and_bad_file():
    at = _clean(_page("traffic").run())
    assert not at.error and _charts(at) == 2
    assert _number(at, "Requests") > 1000                                       # a public Azure trace

    at.sidebar.radio(key="traces_source").set_value("your file")
    _clean(at.run())
    at.sidebar.file_uploader(key="traces_upload").upload("mine.csv", AZURE_CSV.encode(), "text/csv")
    _clean(at.run())
    assert _number(at, "Requests") == 120 and "`azure`" in at.caption[0].value

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


def _measured_calibration() -> bytes:
    from engine.core.step_shape import StepShape
    from simulator.calibration.cost_model import fit_calibration
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
            points.append(ProfilePoint(kind="decode", shape=ShapeRecord.of(StepShape((), (context,) * batch)), samples=[
                StepSample(shape=ShapeRecord.of(StepShape((), (context,) * batch)), total_s=seconds * f, schedule_s=0,
                           prepare_s=0, forward_s=seconds * f, sample_s=0) for f in (0.98, 1.0, 1.03)]))
    for tokens in (32, 64, 128, 256, 512):
        seconds = 0.003 + 2e-5 * tokens
        shape = ShapeRecord.of(StepShape(((tokens, 0),), ()))
        points.append(ProfilePoint(kind="prefill", shape=shape, samples=[
            StepSample(shape=shape, total_s=seconds, schedule_s=0, prepare_s=0, forward_s=seconds, sample_s=0)]))
    calibration = Calibration(name="tiny@test-cpu", label="measured", device=DeviceInfo(name="test cpu", kind="cpu",
                              memory_bytes=1e9), model=ModelSpec.from_preset("tiny"), dtype="float32", points=points,
                              provenance=Provenance(source="test", method="synthetic points"))
    return fit_calibration(calibration, folds=3).model_dump_json().encode()


def test_calibrations_table_curves_and_a_measured_file():
    at = _clean(_page("calibrations").run())
    assert not at.error and _charts(at) == 1
    table = at.dataframe[0].value
    assert len(table) >= 20 and set(table["label"]) <= {"measured", "fitted", "derived"}

    at.expander[0].file_uploader[0].upload("mine.json", _measured_calibration(), "application/json")
    _clean(at.run())
    assert _charts(at) == 2                                                     # predicted vs measured, curves
    assert any("tiny@test-cpu (measured)" in c.value for c in at.caption)

    at.expander[0].file_uploader[0].upload("bad.json", b'{"name": 1}', "application/json")
    _clean(at.run())
    assert at.error and "bad.json" in at.error[0].value


def test_plan_small_fleet_and_static_baseline():
    pytest.importorskip("simulator.planner.recommend")
    small = Scenario.model_validate({"name": "small", "traffic": {"arrivals": {"kind": "poisson", "rate_per_s": 2.0},
                                     "duration_s": 60, "too_long": "clip"}, "cluster": {"replicas": 1}})
    at = _page("plan")
    for key, value in {"whatif_scenario": small.model_dump_json(), "plan_seqs": [256], "plan_tokens": [4096],
                       "plan_max_replicas": 4, "plan_static_baseline": True, "plan_autoscaled": False,
                       "plan_dynamic_batch": False, "plan_uncertainty": False}.items():
        at.session_state[key] = value
    _clean(at.run())
    assert at.info and not at.success                                           # nothing runs before "Plan"
    at.button(key="plan_run").click()
    _clean(at.run())
    assert not at.error, at.error[0].value
    assert at.success and "A100-80GB" in at.success[0].value
    gpus = _number(at, "Fleet")
    static = at.dataframe[-1].value.set_index("fleet").loc["traditional server (static batching)"]
    assert static["GPUs"] >= gpus
    assert any("llama-2-7b@A100-80GB-tp1" in c.value and "fitted" in c.value for c in at.caption)


VALIDATION = {
    "levels": [{"load": load, "rate_rps": 2.0 * load, "used_calibration": "workload",
                "measured": {"throughput_rps": 1.0, "output_tokens_per_s": 50.0, "ttft_mean_s": 0.2, "e2e_mean_s": 2.0,
                             "kv_utilization": 0.9},
                "simulated": {"throughput_rps": 1.02, "output_tokens_per_s": 52.0, "ttft_mean_s": 0.25,
                              "e2e_mean_s": 2.1, "kv_utilization": 0.92},
                "relative_error": {"throughput_rps": 0.02, "ttft_mean_s": 0.25, "e2e_mean_s": 0.05,
                                   "kv_utilization": 0.022},
                "noise_floor": {"throughput_rps": 0.03, "ttft_mean_s": 0.1, "e2e_mean_s": 0.02, "kv_utilization": 0.01},
                "verdict": {"throughput_rps": "below noise", "ttft_mean_s": "+25.0%", "e2e_mean_s": "+5.0%",
                            "kv_utilization": "+2.2%"}} for load in (0.5, 0.9)],
    "calibration": {"workload": {"name": "cpu-small@steps", "label": "measured", "method": "steps", "fit_error": 0.04}},
    "trace": {"name": "AzureLLMInferenceTrace_conv", "requests": 32}, "engine": {"model": "cpu-small", "device": "cpu"},
    "machine": {"processor": "x86_64", "date": "2026-12-02"}}


def test_validate_absent_file_saved_results_and_live_button(tmp_path, monkeypatch):
    import json

    from dashboard import data

    monkeypatch.setattr(data, "VALIDATE_JSON", tmp_path / "validate.json")
    monkeypatch.setattr(data, "ROOT", tmp_path)
    at = _clean(_page("validate").run())
    assert at.info and "absent" in at.info[0].value and not at.metric

    (tmp_path / "validate.json").write_text(json.dumps(VALIDATION))
    at = _clean(_page("validate").run())
    assert not at.error and _charts(at) == 1 and len(at.metric) == 2
    assert any("cpu-small@steps (measured" in c.value for c in at.caption)
    table = at.dataframe[0].value.set_index("metric")
    assert table.loc["ttft_mean_s", "measured"] == "200.0 ms" and table.loc["output_tokens_per_s", "measured"] == "50"

    (tmp_path / "validate.json").write_text("{not json")
    at = _clean(_page("validate").run())
    assert at.error and "cannot be read" in at.error[0].value

    if not data.live_validation_available():
        assert any("surgeplan validate" in c.value for c in at.caption)
        return
    monkeypatch.setattr(data, "live_validation", lambda *args, **kwargs: (VALIDATION, None))
    at.button(key="validate_run").click()
    _clean(at.run())
    assert _charts(at) == 1 and any("live run from this page" in c.value for c in at.caption)
