#!/usr/bin/env bash
# The demo: the main job end to end on an embedded default. Extended as the toolkit grows:
# each stage is one `stage` block that writes into $out and adds its files to the summary.
#   usage: scripts/demo.sh [BUILD_DIR]        (make demo runs it on ./build)
set -euo pipefail
build=${1:-build}
taco="$build/bin/taco"
out=demo-out
[ -x "$taco" ] || { echo "demo: $taco not found; build first (make build)" >&2; exit 2; }
mkdir -p "$out"
outputs=()                           # "path: what it is", printed at the end
stage() { echo; echo "== $*"; }      # a section header
produced() { outputs+=("$1: $2"); }  # record an output file

echo "== taco demo: outputs in $out/"
"$taco" --version

# ---- 1. a synthetic TP trace: one step of a 2-layer model at TP 2, forward and backward ------
# (realistic mix: forward partial sums with outlier channels, backward gradients near 1e-7)
stage "taco synth: synthesize a TP trace"
"$taco" synth --out "$out/trace.h5" --hidden 1024 --tokens 512 --layers 2 --tp 2 --steps 0 \
  --directions fwd,bwd --dist realistic --seed 1
produced "$out/trace.h5" "synthetic TP trace (HDF5, traces/README.md)"

# ---- 2. what is in it: metadata and FP8-relevant statistics ---------------------------------
stage "taco info: tensors and statistics"
"$taco" info "$out/trace.h5" | tee "$out/info.txt"
"$taco" info --json "$out/trace.h5" > "$out/info.json"
produced "$out/info.txt" "the table above"
produced "$out/info.json" "the same per tensor, as JSON (docs/synth.md)"

# ---- next stages (study, report) append here --------------------------------------------------

stage "done: outputs in $out/"
for o in "${outputs[@]}"; do echo "  $o"; done
