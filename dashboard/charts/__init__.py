"""Plotly figures for the dashboard: pure functions from results (or plain numbers) to figures.

No Streamlit and no simulation here: a builder takes what `dashboard.data` returned and draws it, so
each can be tested, exported or reused alone. One palette and one layout (`charts.style`) keep the
pages consistent; one module per kind of figure.
"""
