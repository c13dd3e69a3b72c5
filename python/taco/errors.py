"""One error type for bad input, and the command-line convention around it.

Library calls raise TacoInputError (a ValueError) with a one-line message; every ``python -m taco.*``
command turns it into one line on stderr, ``taco: error: <message>``, and exit status 2, the same
convention as the C++ command line.
"""
import sys


class TacoInputError(ValueError):
    """Bad input: a missing or malformed file, a bad flag or argument value. The message is one line."""


CaptureInputError = TacoInputError  # the name the capture modules grew up with


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
