"""Two frictions a new user met: the default dashboard page answers at its own path too, and a JSONL
trace of time and lengths only (no `hash_ids`) loads, with no prefix sharing, and says so."""

import json

from streamlit.testing.v1 import AppTest

from dashboard import views
from traces import load_trace
from traces.loaders import detect_format


def _navigation_pages_script():
    import streamlit as st

    from dashboard import views

    pages = views.navigation_pages()
    st.json([{"url_path": p.url_path, "title": p.title, "visibility": p.visibility} for p in pages])


def test_default_page_is_served_at_the_root_and_at_its_own_path():
    at = AppTest.from_function(_navigation_pages_script, default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    pages = json.loads(at.json[0].value)
    title, _, url_path = next(iter(views.PAGES.values()))
    assert pages[0] == {"url_path": "", "title": title, "visibility": "visible"}  # the root
    assert [page for page in pages if page["url_path"] == url_path] == [
        {"url_path": url_path, "title": title, "visibility": "hidden"}
    ]  # and its own path
    assert len({page["url_path"] for page in pages}) == len(pages)  # no two pages share a path
    assert [page["visibility"] for page in pages].count("visible") == len(views.PAGES)


def test_jsonl_trace_without_hash_ids_loads_without_prefix_sharing(tmp_path):
    records = [
        {"timestamp": 1000 * i, "input_length": 100 + i, "output_length": 10} for i in range(5)
    ]
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    assert detect_format(path) == "mooncake"
    trace = load_trace(path)
    assert len(trace) == 5 and trace.hash_ids is None and trace.hash_block_size is None
    assert trace.arrival_s.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert (
        "no hash_ids" in trace.load_report.summary()
        and "no prefix sharing" in trace.load_report.notes[0]
    )
    # one record with hash ids among those without: the trace keeps none, and says how many lacked
    # them
    records[0]["hash_ids"] = [1]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    mixed = load_trace(path)
    assert mixed.hash_ids is None and mixed.load_report.notes[0].startswith("4 of 5 records")
