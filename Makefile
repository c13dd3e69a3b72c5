# Thin wrapper over CMake. `make demo` and `make test` do all the set-up on a fresh machine.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
PYTHON     ?= python3
VENV       ?= $(BUILD)/venv
DTENSOR_VENV ?= $(BUILD)/venv-dtensor
FUZZ_SECONDS ?= 20
# WERROR=ON (CI) makes every warning of the C++ and the CUDA host code an error.
WERROR     ?= OFF

.PHONY: all setup build demo test test-cpu test-package test-dtensor test-python test-asan fuzz report format clean

all: build

setup:
	@bash scripts/setup.sh

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DTACO_WERROR=$(WERROR) $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

# The demo needs the taco binary only (plus analysis/'s Python packages, from setup).
demo: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS) --target taco
	@bash scripts/demo.sh $(BUILD)

test: build
	$(MAKE) --no-print-directory test-cpu test-package test-dtensor test-python test-asan fuzz

# Includes go down the pipeline only (scripts/check_layers.py has the stage order), and so do the
# Python package's imports (scripts/check_py_layers.py); every .py file that git does not ignore
# (python/, tests/, analysis/, scripts/, examples/, bench/) passes ruff (pyproject.toml [tool.ruff],
# the version of scripts/requirements-lint.txt, from setup); sources are as clang-format 14 writes
# them (scripts/check_format.sh).
test-cpu:
	$(PYTHON) scripts/check_layers.py
	$(PYTHON) scripts/check_py_layers.py
	$(PYTHON) -m ruff check --no-cache
	bash scripts/check_format.sh
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The Python package: pip install . into $(VENV) (made from Debian's python3 with python3-torch),
# then its tests (codecs against the CLI, collectives against the study's simulation and real
# gloo groups, TP gradients, the trainer).
test-package:
	SKBUILD_CMAKE_DEFINE="TACO_WERROR=$(WERROR)" bash scripts/install_python.sh $(VENV)
	cd tests/package && TACO_BIN=$(abspath $(BUILD))/bin/taco $(abspath $(VENV))/bin/python -m pytest -q .

# taco's DTensor styles on an unmodified Hugging Face Llama (two gloo processes under torchrun),
# in a venv of its own with the pinned torch and transformers of tests/dtensor/requirements.txt.
test-dtensor:
	SKBUILD_CMAKE_DEFINE="TACO_WERROR=$(WERROR)" bash scripts/install_python.sh $(DTENSOR_VENV) tests/dtensor/requirements.txt
	cd tests/dtensor && $(abspath $(DTENSOR_VENV))/bin/python -m pytest -q .

test-python:
	TACO_BIN=$(abspath $(BUILD))/bin/taco TACO_TORCH_PYTHON=$(abspath $(VENV))/bin/python \
	  $(PYTHON) -m pytest -q tests/python

# Second build of the CPU library and tests under AddressSanitizer + UndefinedBehaviorSanitizer
# (clang), which also builds the libFuzzer targets. -O1 with line tables only: the usual
# sanitizer setting, and half the compile time of -O2 -g; assertions stay on.
test-asan: setup
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DTACO_CUDA=OFF -DTACO_SANITIZE=ON -DTACO_FUZZ=ON -DTACO_WERROR=$(WERROR)
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target taco_tests fuzzers
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  LSAN_OPTIONS=suppressions=$(abspath scripts/lsan.supp) \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) -LE gpu

# Each reader's fuzzer runs for FUZZ_SECONDS on its seed corpus.
fuzz: test-asan
	@LSAN_OPTIONS=suppressions=$(abspath scripts/lsan.supp) bash scripts/run_fuzzers.sh $(ASAN_BUILD) $(FUZZ_SECONDS)

report:
	$(BUILD)/bin/taco report $(or $(RESULTS),demo-out/study)

format:
	bash scripts/check_format.sh --fix

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
