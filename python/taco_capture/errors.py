"""One error type for bad input, and the CLI convention around it.

Every command in this package turns a CaptureInputError into one line on stderr,
``taco_capture: error: <message>``, and exit status 2, the same convention as the C++ CLI.
"""
import sys


class CaptureInputError(Exception):
    """Bad input: a missing or malformed file, a bad flag value. The message is one line."""


def run_cli(main, argv=None):
    """Calls main(argv) and maps errors to exit codes: 0 ok, 2 bad input, 1 anything else."""
    try:
        rc = main(argv)
    except CaptureInputError as ex:
        print(f"taco_capture: error: {ex}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("taco_capture: interrupted", file=sys.stderr)
        return 130
    return 0 if rc is None else int(rc)
