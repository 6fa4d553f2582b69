# Two entry points for a new user (see README.md):
#   make run   -- set up .venv and tune the default workload (a ResNet-18 conv2d) with the default tuner (release+)
#   make test  -- set up .venv and run the test suite (all but @pytest.mark.slow; make test-slow runs those)
#   make docker -- build the images release:cpu and release:cuda (docker/build.py; needs a Docker engine, not .venv)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup run test test-slow test-models test-tutorials bench-quick bench-regal docker clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/release tune --workload resnet18.conv2d.2 --target llvm --n-trial 96 --plan-size 32 --log runs/default.jsonl

# pytest's exit status 5 ("no tests collected") is not a failure: a selection may be empty
test: $(STAMP)
	$(PY) -m pytest -q || [ $$? -eq 5 ]

# the slow tests but the tutorials' full runs (about 17 minutes more: make test-tutorials) and the full-size
# zoo models (make test-models), so CI's make test + make test-slow keeps within its 90 minutes
test-slow: $(STAMP)
	$(PY) -m pytest -q -m "slow and not tutorial and not full_model" || [ $$? -eq 5 ]

test-models: $(STAMP)
	$(PY) -m pytest -q -m full_model || [ $$? -eq 5 ]

test-tutorials: $(STAMP)
	$(PY) -m pytest -q -m tutorial || [ $$? -eq 5 ]

bench-quick: $(STAMP)
	$(VENV)/bin/release bench --tier quick

bench-regal: $(STAMP)
	$(PY) benchmarks/regal/run_part1.py

docker:
	$(PYTHON) docker/build.py all

clean:
	rm -rf $(VENV) runs
