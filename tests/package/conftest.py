"""Tests of the Python package `taco` (codecs, compressed collectives, TP building blocks, the
trainer). They run under the interpreter the package is installed in (make test: build/venv, from
Debian's python3 with python3-torch); the CLI comparisons use $TACO_BIN (the built `taco`)."""
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "traces" / "samples"


@pytest.fixture(scope="session")
def taco_bin():
    b = os.environ.get("TACO_BIN") or shutil.which("taco") or str(REPO / "build" / "bin" / "taco")
    if not os.path.exists(b):
        pytest.skip("the taco CLI is not built (set TACO_BIN)")
    return b


def cuda_available():
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


needs_cuda = pytest.mark.skipif(not cuda_available(), reason="no CUDA device (GPU tests run on the GPU machine)")
