# The two commands of the contract: `make run` and `make test`.
# Each creates or refreshes .venv only when pyproject.toml changed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-compiled setup clean compiled pure constraints

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]' -c constraints.txt
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/surgeplan dashboard --host 127.0.0.1 --port $(or $(PORT),8501)

test: $(STAMP)
	$(PY) -m pytest -q

# Optional: compile the shared scheduler / block manager and the simulator's per-step path (replica
# loop, cost model; the same source) with mypyc, in place; every import then gets the compiled modules
# (about 2x faster simulations, identical results). `make pure` goes back to the pure-Python modules.
# CI (.ci/run) runs `make test` on the pure-Python modules, then `make test-compiled`.
CORE_COMPILED := engine/core/block_manager.py engine/core/request.py engine/core/decode_stretch.py \
	engine/core/stretch_limits.py engine/core/admission.py \
	engine/core/scheduler_output.py \
	engine/core/scheduler.py engine/core/free_runs.py simulator/calibration/cost_model.py \
	simulator/calibration/profiled_cost_model.py simulator/cluster/replica.py

# mypyc also writes one shared helper module, `<hash>__mypyc`, at the repo root, which the editable
# install's finder does not map: a .pth puts the root on the path, so `surgeplan` and the planner's
# worker processes import the compiled modules too (without it they fail to import them).
ROOT_PTH = $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)/surgeplan_compiled.pth

# (`touch`: a module's stub .so is not rewritten when only its source changed, the code being in the
# shared *__mypyc*.so; dated after the build, engine/core's older-than-source warning tells only a stale one)
compiled: $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev,compiled]' -c constraints.txt
	$(VENV)/bin/mypyc $(CORE_COMPILED)
	touch $(patsubst %.py,%.*.so,$(CORE_COMPILED))
	echo '$(CURDIR)' > '$(ROOT_PTH)'

# CI's second pass: the suite on the mypyc build, less the tests that start servers or browsers or run
# interpreted Triton kernels (they reach the compiled modules only through paths the engine tests
# cover, and are the timing-bound ones); SURGEPLAN_EXPECT_BUILD makes pytest refuse to start unless
# every compiled module loaded. Back to the pure-Python modules afterwards, pass or fail.
COMPILED_PASS_SKIP := --ignore-glob='tests/test_server_*' --ignore-glob='tests/test_dashboard_browser*' \
	--ignore-glob='tests/test_kernels_*'

test-compiled: $(STAMP)
	$(MAKE) --no-print-directory compiled && \
	SURGEPLAN_EXPECT_BUILD=mypyc $(PY) -m pytest -q $(COMPILED_PASS_SKIP); \
	status=$$?; $(MAKE) --no-print-directory pure; exit $$status

pure:
	rm -f engine/core/*.so simulator/calibration/*.so simulator/cluster/*.so *__mypyc*.so
	rm -rf build/
	rm -f '$(ROOT_PTH)'

clean: pure
	rm -rf $(VENV)

# After a green `make test` on newer releases: record the versions it passed with (torch stays in pyproject).
constraints: $(STAMP)
	{ sed -n '1,/^# `make constraints`/p' constraints.txt; \
	  $(PY) -m pip freeze --disable-pip-version-check | grep -v -E '^-e|^#|^torch==|@'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
