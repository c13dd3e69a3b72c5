#!/usr/bin/env bash
# Fails when a C++ or CUDA source differs from what clang-format (.clang-format) makes of it.
#   bash scripts/check_format.sh          # check (make test runs it)
#   bash scripts/check_format.sh --fix    # rewrite the files in place (make format)
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh')
if ! command -v clang-format >/dev/null; then
  echo "check_format: clang-format is not installed (scripts/setup.sh installs it)" >&2
  exit 2
fi
# Versions format differently: the tree is formatted with Debian 12's clang-format 14 (CI's).
major=$(clang-format --version | grep -o '[0-9][0-9]*\.[0-9]' | head -1 | cut -d. -f1)
if [ "$major" != 14 ]; then
  echo "check_format: clang-format $major is not the tree's 14; not checked here (CI checks)" >&2
  [ "${1:-}" = --fix ] && exit 2
  exit 0
fi
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "$f: not formatted (make format)"
    bad=$((bad + 1))
  fi
done
if [ "$bad" -gt 0 ]; then
  echo "check_format: $bad file(s) differ from clang-format $(clang-format --version | grep -o '[0-9][0-9.]*' | head -1)"
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
