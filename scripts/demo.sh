#!/usr/bin/env bash
# The demo: the main job end to end on an embedded default. Extended as the toolkit grows.
set -euo pipefail
build=${1:-build}
taco="$build/bin/taco"
out=demo-out
mkdir -p "$out"
echo "== taco demo: outputs in $out/"
"$taco" --version
