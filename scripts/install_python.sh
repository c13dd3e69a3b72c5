#!/usr/bin/env bash
# Installs the Python package `taco` (pip install . of this repository) into a virtual environment,
# creating it on first use. Usage: scripts/install_python.sh VENV_DIR [REQUIREMENTS]
# Without REQUIREMENTS the venv sees the system's site packages, and its base interpreter is
# $TACO_PYTHON_BASE, else Debian's /usr/bin/python3 when it has PyTorch (python3-torch, which
# scripts/setup.sh installs), else python3. With REQUIREMENTS (a pip requirements file of pinned
# versions, e.g. tests/dtensor/requirements.txt) the venv is isolated from the system's packages
# and gets exactly those from PyPI.
set -euo pipefail
venv=${1:?usage: scripts/install_python.sh VENV_DIR [REQUIREMENTS]}
reqs=${2:-}
here="$(cd "$(dirname "$0")/.." && pwd)"
if [ ! -x "$venv/bin/python" ]; then
  base=${TACO_PYTHON_BASE:-}
  if [ -z "$base" ]; then
    if /usr/bin/python3 -c "import torch" 2>/dev/null; then base=/usr/bin/python3; else base=python3; fi
  fi
  echo "install_python: creating $venv from $base" >&2
  if [ -n "$reqs" ]; then "$base" -m venv "$venv"; else "$base" -m venv --system-site-packages "$venv"; fi
fi
py="$venv/bin/python"
if [ -n "$reqs" ]; then
  # pip skips what is already installed at the pinned version, so a second run costs seconds.
  "$py" -m pip install -q --disable-pip-version-check -r "$reqs"
fi
"$py" -c "import pytest" 2>/dev/null || "$py" -m pip install -q --disable-pip-version-check pytest
# The build runs the project's CMake (scikit-build-core, build dir build/python/<tag>, reused).
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
  "$py" -m pip install -q --disable-pip-version-check "$here"
"$py" -c "import taco.codec, taco; print('install_python: taco', taco.__version__, 'in', '$venv')"
