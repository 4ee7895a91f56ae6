"""The Streamlit app: `streamlit run dashboard/app.py`, or `surgeplan dashboard`.

Only navigation lives here; each page is a module of `dashboard.views` with one `render()`.
"""
import sys
from pathlib import Path

import streamlit as st

if __package__ in (None, ""):                        # `streamlit run` executes this file as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dashboard.views import calibrations, paged, plan, traffic, validate, whatif

PAGES = [
    st.Page(whatif.render, title="What-if spike", icon=":material/bolt:", url_path="whatif", default=True),
    st.Page(paged.render, title="Traditional vs paged", icon=":material/compare_arrows:", url_path="paged"),
    st.Page(traffic.render, title="Traces", icon=":material/timeline:", url_path="traces"),
    st.Page(calibrations.render, title="Calibrations", icon=":material/speed:", url_path="calibrations"),
    st.Page(plan.render, title="Plan", icon=":material/calculate:", url_path="plan"),
    st.Page(validate.render, title="Validate", icon=":material/fact_check:", url_path="validate"),
]


def main() -> None:
    st.set_page_config(page_title="surgeplan", page_icon=":material/bolt:", layout="wide")
    navigation = st.navigation(PAGES)
    st.sidebar.caption("surgeplan: how many GPUs keep latency inside the SLO when traffic spikes?")
    navigation.run()


main()
