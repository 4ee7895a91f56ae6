"""The Streamlit app: `streamlit run dashboard/app.py`, or `surgeplan dashboard`.

Only navigation lives here (`st.navigation`); each page is a module of `dashboard.views` with one
`render()`, listed in `dashboard.views.PAGES`.

Why `views/` and not the `pages/` folder the issue names: Streamlit still special-cases a `pages/`
folder beside the entry script, `st.navigation` or not. Its documentation says the folder is ignored
"as soon as any session of your app executes the st.navigation command" — so not before. In the
installed Streamlit (1.67), `PagesManager.uses_pages_directory` is set when the server starts if
`pages/` exists, and until some session has run `st.navigation`, every script run goes through
`_mpa_v1`, which builds the page list from `pages/*.py` and executes the requested file as a script.
The first visitor after a restart who opens `/plan` directly would run `pages/plan.py` as a script
(it only defines `render()`): a blank page. A folder of another name has no such first-run path.
"""

import sys
from pathlib import Path

import streamlit as st

if __package__ in (None, ""):  # `streamlit run` executes this file as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dashboard import views


def main() -> None:
    st.set_page_config(page_title="surgeplan", page_icon=":material/bolt:", layout="wide")
    navigation = st.navigation(views.navigation_pages())
    st.sidebar.caption("surgeplan: how many GPUs keep latency inside the SLO when traffic spikes?")
    navigation.run()


main()
