"""The dashboard's pages, one module each with a `render()` that draws it, and the table that makes
them Streamlit pages (`page`), used by the navigation in `dashboard.app` and by links between pages.

Not named `pages/`: see `dashboard.app` for why.
"""

from __future__ import annotations

import importlib

import streamlit as st

# module -> (title, icon, url path); the first is the app's default page, served at the root and
# at its own url path too (a hidden alias: `navigation_pages`), so `/whatif` works as the
# sidebar's name suggests
PAGES = {
    "whatif": ("What-if spike", ":material/bolt:", "whatif"),
    "paged": ("Traditional vs paged", ":material/compare_arrows:", "paged"),
    "traffic": ("Traces", ":material/timeline:", "traces"),
    "calibrations": ("Calibrations", ":material/speed:", "calibrations"),
    "plan": ("Plan", ":material/calculate:", "plan"),
    "split": ("Split prefill/decode", ":material/call_split:", "split"),
    "validate": ("Validate", ":material/fact_check:", "validate"),
}


def page(module: str) -> st.Page:
    """The Streamlit page of `dashboard.views.<module>`: for `st.navigation`, `st.page_link`, `st.switch_page`."""
    if module not in PAGES:
        raise KeyError(f"no dashboard page {module!r}; expected one of {', '.join(PAGES)}")
    title, icon, url_path = PAGES[module]
    render = importlib.import_module(f"dashboard.views.{module}").render
    default = module == next(iter(PAGES))
    return st.Page(
        render, title=title, icon=icon, url_path="" if default else url_path, default=default
    )


def navigation_pages() -> list[st.Page]:
    """Every page for `st.navigation`, and a hidden alias of the default page at its own url path
    (Streamlit serves a default page at the root only)."""
    first = next(iter(PAGES))
    title, icon, url_path = PAGES[first]
    render = importlib.import_module(f"dashboard.views.{first}").render
    alias = st.Page(render, title=title, icon=icon, url_path=url_path, visibility="hidden")
    return [page(module) for module in PAGES] + [alias]


def link(module: str, label: str, *, where=st, icon: str | None = None) -> None:
    """A link to another page that keeps the session (its inputs and results)."""
    where.page_link(page(module), label=label, icon=icon or PAGES[module][1])
