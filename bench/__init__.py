"""presence_app benchmarks (issue 6). Run ``python -m bench`` from the repository root."""
