"""The one YAML/JSON settings-file loader and its three callers (scenario, plan, tenant keys): every error
names the file, the line and column where parsing stopped, and what the file should hold, and never
quotes the file's content (a key in it must not reach a log)."""

import pytest

from engine.openai.server_config import TenantKeys
from engine.settings_file import read_mapping
from simulator.planner.spec import PlanError, load_plan
from simulator.scenario import Scenario

EXPECTED = "a test mapping"


def _write(tmp_path, name, content) -> str:
    path = tmp_path / name
    path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    return str(path)


@pytest.mark.parametrize(
    "name, content, words",
    [
        (
            "a.yaml",
            "keys:\n  s3cret: [team-a\n",
            ["a.yaml: not valid YAML at line 3, column 1", "expected ',' or ']'"],
        ),
        (
            "a.yaml",
            "a: 1\n b: 2\n",
            ["not valid YAML at line 2, column 3", "mapping values are not allowed"],
        ),
        (
            "a.json",
            '{"s3cret": 1,\n  "b": }',
            ["a.json: not valid JSON at line 2, column 8", "Expecting value"],
        ),
        ("a.yaml", "- s3cret\n- b\n", ["a.yaml: top level is list"]),
        ("a.json", "3", ["a.json: top level is int"]),
        ("a.yaml", b"a: \xff\xfe s3cret\n", ["a.yaml: is not UTF-8 text (at byte 3)"]),
        ("missing.yaml", None, ["missing.yaml: cannot be read (No such file or directory)"]),
    ],
)
def test_errors_name_the_file_the_place_and_what_was_expected(tmp_path, name, content, words):
    path = _write(tmp_path, name, content) if content is not None else str(tmp_path / name)
    with pytest.raises(ValueError) as error:
        read_mapping(path, EXPECTED)
    message = str(error.value)
    for word in words + [f"; expected {EXPECTED}"]:
        assert word in message, message
    assert "s3cret" not in message and "\n" not in message


def test_yaml_json_and_empty_files(tmp_path):
    assert read_mapping(_write(tmp_path, "a.yaml", "a: 1\nb: [x, y]\n"), EXPECTED) == {
        "a": 1,
        "b": ["x", "y"],
    }
    assert read_mapping(_write(tmp_path, "a.json", '{"a": 1}'), EXPECTED) == {"a": 1}
    assert read_mapping(_write(tmp_path, "a.conf", '{"a": 1}'), EXPECTED) == {
        "a": 1
    }  # YAML reads JSON
    empty = _write(tmp_path, "empty.yaml", "# nothing\n")
    assert read_mapping(empty, EXPECTED) == {}
    with pytest.raises(ValueError, match=f"empty.yaml: is empty; expected {EXPECTED}"):
        read_mapping(empty, EXPECTED, allow_empty=False)


def test_the_three_callers_share_it(tmp_path):
    broken = _write(tmp_path, "broken.yaml", "cluster:\n  replicas: [1\n")
    with pytest.raises(
        ValueError, match=r"broken.yaml: not valid YAML at line 3.*expected a scenario"
    ):
        Scenario.load(broken)
    with pytest.raises(
        PlanError, match=r"broken.yaml: not valid YAML at line 3.*optional plan: section"
    ):
        load_plan(broken)
    with pytest.raises(
        ValueError, match=r"^--tenant-keys .*broken.yaml: not valid YAML at line 3.*'keys' and"
    ):
        TenantKeys.load(broken)
    listed = _write(tmp_path, "list.yaml", "- 1\n")
    for load in (Scenario.load, load_plan, TenantKeys.load):
        with pytest.raises(ValueError, match="list.yaml: top level is list; expected"):
            load(listed)
    empty = _write(tmp_path, "empty.yaml", "")
    assert Scenario.load(empty) == Scenario() and load_plan(empty)[0] == Scenario()
    with pytest.raises(ValueError, match="empty.yaml: is empty"):  # an empty key file is a mistake
        TenantKeys.load(empty)


def test_a_relative_trace_is_found_beside_the_file(tmp_path):
    (tmp_path / "t.csv").write_text("x\n")
    path = _write(tmp_path, "s.yaml", "traffic:\n  trace: t.csv\n")
    assert Scenario.load(path).traffic.trace == str((tmp_path / "t.csv").resolve())
    assert load_plan(path)[0].traffic.trace == str((tmp_path / "t.csv").resolve())
