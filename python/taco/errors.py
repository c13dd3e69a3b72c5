"""One error type for bad input, and the command-line convention around it.

Library calls raise TacoInputError (a ValueError) with a one-line message; every ``python -m taco.*``
command turns it into one line on stderr, ``taco: error: <message>``, and exit status 2, the same
convention as the C++ command line.
"""
import os
import sys


class TacoInputError(ValueError):
    """Bad input: a missing or malformed file, a bad flag or argument value. The message is one line."""


CaptureInputError = TacoInputError  # the name the capture modules grew up with


def check_not_an_input(out, inputs, flag="--out"):
    """Before anything is written: TacoInputError when the output file `out` is one of `inputs`
    (the same path, or a symbolic or hard link to the same file), which writing it would destroy.
    A path that does not exist yet replaces nothing. The C++ commands' check is
    core/atomic_file.hpp check_not_an_input."""
    try:
        o = os.stat(out)
    except OSError:
        return
    for p in inputs:
        try:
            s = os.stat(p)
        except OSError:
            continue
        if (s.st_dev, s.st_ino) == (o.st_dev, o.st_ino):
            same = "" if os.path.normpath(p) == os.path.normpath(out) else " (the same file)"
            raise TacoInputError(f"{flag} {out}: is the input {p}{same}; writing it would destroy the input: "
                                 "give another file name")


def run_cli(main, argv=None):
    """Calls main(argv) and maps errors to exit codes: 0 ok, 2 bad input, 1 anything else."""
    try:
        rc = main(argv)
    except TacoInputError as ex:
        print(f"taco: error: {ex}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("taco: interrupted", file=sys.stderr)
        return 130
    return 0 if rc is None else int(rc)
