# The README's two commands. Both set up everything first (scripts/bootstrap.sh).
.PHONY: run test soak check bench

run:  ## serve the demo on http://127.0.0.1:8000
	scripts/run.sh

test:  ## run the whole test suite
	scripts/test.sh $(ARGS)

soak:  ## the suite RUNS times (10) in a row with SOAK_HOG CPU hogs (1) (scripts/soak_tests.sh); ARGS go to pytest
	scripts/soak_tests.sh $(ARGS)

check:  ## the support matrix, lint, docs and packages (noxfile.py), several sessions at once; ARGS="-s lint" runs one
	scripts/bootstrap.sh && .venv/bin/python scripts/check.py $(ARGS)

bench:  ## run the benchmarks (docs/benchmarks.md); ARGS="--quick" for a short run
	scripts/bootstrap.sh && .venv/bin/pip install -q -r bench/requirements.txt && .venv/bin/python -m bench $(ARGS)
