#!/usr/bin/env bash
# Installs what taco needs on a Debian/Ubuntu machine: C++ libraries from the
# distribution, Python packages from PyPI. Idempotent: does nothing when all is present.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

debs=(cmake make g++ pkg-config libeigen3-dev libhdf5-dev libcli11-dev libfmt-dev
      catch2 nlohmann-json3-dev zlib1g-dev clang libclang-rt-dev libomp-dev)
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

py=${PYTHON:-python3}
if ! "$py" -c "import numpy, matplotlib, h5py, ml_dtypes, scipy, pytest" 2>/dev/null; then
  echo "setup: installing Python packages from analysis/requirements.txt" >&2
  "$py" -m pip install -q --disable-pip-version-check -r "$here/analysis/requirements.txt"
fi
