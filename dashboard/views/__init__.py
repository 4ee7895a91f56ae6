"""The dashboard's pages, one module each with a `render()` that draws it (see `dashboard.app`).

Not named `pages/`: Streamlit treats a `pages/` folder beside the entry script as the old file-based
page list and runs its modules as scripts, so a page opened by its URL would come up blank.
"""
