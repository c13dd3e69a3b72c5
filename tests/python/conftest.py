"""Shared fixtures of the Python tests."""
import os

import pytest


@pytest.fixture(scope="session")
def taco():
    """Path of the taco binary under test (TACO_BIN, set by `make test-python`); tests that
    need it are skipped when it is not set."""
    b = os.environ.get("TACO_BIN")
    if not b or not os.path.exists(b):
        pytest.skip("TACO_BIN is not set to a built taco binary")
    return b
