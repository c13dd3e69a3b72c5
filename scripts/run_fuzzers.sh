#!/usr/bin/env bash
# Runs every libFuzzer target in BUILD/bin for SECONDS each, starting from fuzz/corpus/<name>.
set -euo pipefail
build=${1:-build-asan}; seconds=${2:-20}
here="$(cd "$(dirname "$0")/.." && pwd)"
shopt -s nullglob
found=0
for f in "$build"/bin/fuzz_*; do
  name=$(basename "$f"); found=1
  work="$here/fuzz/corpus-work/$name"; mkdir -p "$work"
  seeds="$here/fuzz/corpus/$name"; [ -d "$seeds" ] || seeds=""
  echo "fuzz: $name for ${seconds}s"
  "$f" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -print_final_stats=0 \
       "$work" $seeds 2>"$work.log" || { echo "fuzz: $name FAILED, see $work.log"; tail -40 "$work.log"; exit 1; }
done
[ $found = 1 ] || { echo "fuzz: no fuzz targets were built"; exit 1; }
echo "fuzz: all targets ran clean"
