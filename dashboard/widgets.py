"""Streamlit inputs built from the pydantic fields that define each setting.

A setting is defined once (type, bound, default, help) on the scenario's models and the engine's
configs; a widget here reads its bounds with `engine.core.config.bounds`, its help from the field's
description and its choices from a `Literal` annotation, so the dashboard can never drift from what
`Scenario` accepts. `field` picks the widget from the annotation (Literal: select box, bool: toggle,
number: number input), so a page can list a model's settings by name and get every one of them.
Values start from a scenario (the page's default) and live in session state under the widget's key,
which lets tests and other pages preset them before the first run; they persist for the session
(`persist_state="session"`), so switching pages and coming back keeps what the user set.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import streamlit as st
from pydantic import BaseModel

from engine.core.config import bounds

PERSIST = "session"  # widget values survive page switches


def field_help(model: type[BaseModel], name: str, extra: str = "") -> str | None:
    """The field's own description (plus `extra`), for a widget's `help`."""
    description = model.model_fields[name].description or ""
    text = " ".join(part for part in (description, extra) if part)
    return text or None


def _annotation(model: type[BaseModel], name: str) -> tuple[Any, bool]:
    """(the field's type without None, whether None is allowed)."""
    annotation = model.model_fields[name].annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return (args[0] if len(args) == 1 else annotation), True
    return annotation, False


def _exclusive_low(model: type[BaseModel], name: str) -> bool:
    return any(getattr(item, "gt", None) is not None for item in model.model_fields[name].metadata)


def choices(model: type[BaseModel], name: str) -> list[Any]:
    """The values a `Literal` field allows, in declaration order."""
    annotation, _ = _annotation(model, name)
    options = list(typing.get_args(annotation))
    if typing.get_origin(annotation) is not typing.Literal or not options:
        raise TypeError(f"{model.__name__}.{name} is not a Literal field")
    return options


NONE_CHOICE = "(default)"  # a select box's stand-in for the option None


def start(key: str, value: Any) -> None:
    """Give the widget `key` its first value, unless the session (a test, another page) already has one."""
    if key not in st.session_state:
        st.session_state[key] = value


def number(
    model: type[BaseModel],
    name: str,
    value: Any,
    key: str,
    label: str,
    *,
    where=st,
    step: float | None = None,
    fmt: str | None = None,
    placeholder: str | None = None,
    help_extra: str = "",
    min_value: float | None = None,
    disabled: bool = False,
) -> Any:
    """A number input bounded as the field is (`min_value` may only tighten the lower bound)."""
    annotation, optional = _annotation(model, name)
    integer = annotation is int
    low, high = bounds(model, name)
    if low is not None and _exclusive_low(model, name):
        low = low + 1 if integer else None  # float > 0: left to validation, which names the field
    if min_value is not None:
        low = min_value if low is None else max(low, min_value)
    cast = int if integer else float
    low = None if low is None else cast(low)
    high = None if high is None else cast(high)
    if value is None and not optional:
        raise ValueError(f"{model.__name__}.{name} cannot be empty")
    start(key, None if value is None else cast(value))
    return where.number_input(
        label,
        min_value=low,
        max_value=high,
        step=cast(step) if step else None,
        format=fmt,
        key=key,
        placeholder=placeholder,
        disabled=disabled,
        help=field_help(model, name, help_extra),
        persist_state=PERSIST,
    )


def select(
    model: type[BaseModel],
    name: str,
    value: Any,
    key: str,
    label: str,
    *,
    where=st,
    options: list[Any] | None = None,
    format_func=str,
    help_extra: str = "",
) -> Any:
    """A select box over the field's `Literal` values (or `options`, e.g. the hardware catalog). A `None`
    option ("the default") is held as `NONE_CHOICE`: Streamlit shows a `None` selection as an empty box."""
    options = [
        NONE_CHOICE if o is None else o
        for o in (options if options is not None else choices(model, name))
    ]
    value = NONE_CHOICE if value is None else value
    if (
        st.session_state.get(key, options[0]) not in options
    ):  # a choice another input has taken away
        del st.session_state[key]
    start(key, value if value in options else options[0])
    chosen = where.selectbox(
        label,
        options,
        key=key,
        format_func=lambda o: format_func(None if o == NONE_CHOICE else o),
        help=field_help(model, name, help_extra),
        persist_state=PERSIST,
    )
    return None if chosen == NONE_CHOICE else chosen


def toggle(
    model: type[BaseModel],
    name: str,
    value: bool,
    key: str,
    label: str,
    *,
    where=st,
    help_extra: str = "",
) -> bool:
    start(key, bool(value))
    return where.toggle(
        label, key=key, help=field_help(model, name, help_extra), persist_state=PERSIST
    )


def field(
    model: type[BaseModel], name: str, value: Any, key: str, label: str, *, where=st, **options
) -> Any:
    """The widget the field's type calls for: a select box for a `Literal`, a toggle for a bool, a number
    input for a number (`options` go to that widget)."""
    annotation, _ = _annotation(model, name)
    if typing.get_origin(annotation) is typing.Literal:
        return select(model, name, value, key, label, where=where, **options)
    if annotation is bool:
        return toggle(model, name, value, key, label, where=where, **options)
    if annotation in (int, float):
        return number(model, name, value, key, label, where=where, **options)
    raise TypeError(
        f"{model.__name__}.{name}: no widget for {annotation!r}; expected a Literal, bool, int or float"
    )
