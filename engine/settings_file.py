"""Reading a settings file a user writes (YAML or JSON) into its top-level mapping: one loader for the
scenario and plan files of the simulator and the server's tenant-keys file, so that all of them fail
the same way.

Every error names the file, the line and column where parsing stopped (where the parser knows it),
and what the file was expected to hold. A `.json` file is read as JSON; any other as YAML, which also
reads JSON. The parsers' own quoted snippet of the offending line is left out of the message, so a
secret in the file (an API key) never reaches an error or a log. It lives in `engine/` top, the lowest
layer whose modules read settings files, so the server and the simulator both import it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_mapping(path: str | Path, expected: str, allow_empty: bool = True) -> dict[str, Any]:
    """The mapping at the top of the file at `path`; an empty file (or `null`) is `{}` when `allow_empty`.

    `expected` says what the file should hold ("a scenario YAML or JSON file"); it ends every error,
    a ValueError `PATH: what is wrong; expected EXPECTED`, raised when the file cannot be read, is not
    UTF-8, does not parse, or holds something other than a mapping."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ValueError(
            f"{path}: cannot be read ({error.strerror or error}); expected {expected}"
        ) from None
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{path}: is not UTF-8 text (at byte {error.start}); expected {expected}"
        ) from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(
                f"{path}: not valid JSON at line {error.lineno}, column {error.colno}: {error.msg}; "
                f"expected {expected}"
            ) from None
    else:
        data = _load_yaml(path, text, expected)
    if data is None:
        if allow_empty:
            return {}
        raise ValueError(f"{path}: is empty; expected {expected}")
    if not isinstance(data, dict):
        raise ValueError(f"{path}: top level is {type(data).__name__}; expected {expected}")
    return data


def _load_yaml(path: Path, text: str, expected: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise ValueError(
            f"{path}: reading YAML needs PyYAML installed; expected {expected}, or the same "
            "settings written as a .json file"
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        if isinstance(error, yaml.MarkedYAMLError):  # its str() would quote the offending line
            problem = (
                ", ".join(part for part in (error.context, error.problem) if part)
                or type(error).__name__
            )
        else:
            problem = " ".join(str(error).split())
        raise ValueError(f"{path}: not valid YAML{where}: {problem}; expected {expected}") from None
