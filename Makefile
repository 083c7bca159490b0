# The README's two commands. Both set up everything first (scripts/bootstrap.sh).
.PHONY: run test

run:  ## serve the demo on http://127.0.0.1:8000
	scripts/run.sh

test:  ## run the whole test suite
	scripts/test.sh $(ARGS)
