#!/bin/sh
# expect_usage_error.sh MESSAGE PROGRAM [ARGS...]: passes when PROGRAM exits with 2 and the first
# line it writes to stderr contains MESSAGE.
msg=$1
shift
err=$("$@" 2>&1 >/dev/null)
rc=$?
first=$(printf '%s\n' "$err" | head -n 1)
if [ "$rc" -ne 2 ]; then
  echo "exit code $rc, expected 2 (stderr: $first)"
  exit 1
fi
case $first in
  *"$msg"*) exit 0 ;;
esac
echo "first stderr line '$first' does not contain '$msg'"
exit 1
