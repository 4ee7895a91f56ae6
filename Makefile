# The two commands of the contract: `make run` and `make test`.
# Each creates or refreshes .venv only when pyproject.toml changed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/surgeplan dashboard --host 127.0.0.1 --port $(or $(PORT),8501)

test: $(STAMP)
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV)
