#!/usr/bin/env bash
# Installs what taco needs on a Debian/Ubuntu machine: C++ libraries from the
# distribution, Python packages from PyPI. Idempotent: does nothing when all is present.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

debs=(cmake make g++ pkg-config libeigen3-dev libhdf5-dev libcli11-dev libfmt-dev
      catch2 nlohmann-json3-dev zlib1g-dev clang clang-format libclang-rt-dev libomp-dev
      libopenmpi-dev)  # MPI launch of `taco comm` (mpirun -np N), compiled only with the GPU backend
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# PyTorch for the capture tests (tests/python/test_capture.py runs them under /usr/bin/python3):
# Debian's CPU build with gloo, about 150 MB to download and 630 MB installed, under a minute.
# (PyPI's default torch wheel pulls gigabytes of CUDA libraries.) Best effort: without it those
# tests report SKIPPED. TACO_SKIP_TORCH=1 skips the install.
torch_debs_ok() {
  for p in python3-torch python3-h5py; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || return 1
  done
}
if [ "${TACO_SKIP_TORCH:-0}" != 1 ] && command -v apt-get >/dev/null && ! torch_debs_ok; then
  echo "setup: installing Debian's python3-torch and python3-h5py (capture tests)" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends python3-torch python3-h5py \
      >/dev/null; } || echo "setup: warning: could not install python3-torch; capture tests will be skipped" >&2
fi

py=${PYTHON:-python3}
if ! "$py" -c "import numpy, matplotlib, h5py, ml_dtypes, scipy, pytest" 2>/dev/null; then
  echo "setup: installing Python packages from analysis/requirements.txt" >&2
  "$py" -m pip install -q --disable-pip-version-check -r "$here/analysis/requirements.txt"
fi

# ruff, the Python linter of `make test` (Makefile test-cpu runs `$PYTHON -m ruff check`), at the
# pinned version of scripts/requirements-lint.txt: reinstalled when another version is present.
ruff_pin=$(sed -n 's/^ruff==//p' "$here/scripts/requirements-lint.txt")
if [ "$("$py" -m ruff --version 2>/dev/null)" != "ruff $ruff_pin" ]; then
  echo "setup: installing ruff $ruff_pin from scripts/requirements-lint.txt" >&2
  "$py" -m pip install -q --disable-pip-version-check -r "$here/scripts/requirements-lint.txt"
fi
