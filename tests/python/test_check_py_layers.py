"""scripts/check_py_layers.py fails on an import that goes up the Python package's stages (absolute,
relative, lazy inside a function) and on a module in no stage, and passes a tree without either."""
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "check_py_layers.py"

# A tiny package in the real layout: one module or folder per stage.
CLEAN = {
    "__init__.py": "__version__ = '0'\n",
    "errors.py": "class TacoInputError(ValueError):\n    pass\n",
    "codec.py": "from .errors import TacoInputError\nfrom . import _C\n",
    "dist.py": "from . import codec as tc\n",
    "tp.py": "from . import dist as td\n\ndef __getattr__(name):\n    from . import dtensor\n    return dtensor\n",
    "dtensor.py": "from . import tp as ttp\n",
    "capture/__init__.py": "",
    "capture/recorder.py": "from .. import __version__\nfrom ..tp import shard_rows\n",
    "capture/selfcheck.py": "def main():\n    from ..train.model import Transformer\n",
    "train/__init__.py": "",
    "train/model.py": "import taco.tp as T\nfrom taco.capture.recorder import Recorder\n",
    "bench/layer.py": "from taco.train.model import Block\nimport taco.dist\n",
}


def write_tree(root, files):
    for rel, text in files.items():
        f = root / "python" / "taco" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)


def check(root):
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root)], capture_output=True, text=True)


def test_clean_tree_passes(tmp_path):
    write_tree(tmp_path, CLEAN)
    r = check(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith(f"check_py_layers: {len(CLEAN)} modules, no import goes up")


def test_upward_imports_fail(tmp_path):
    write_tree(tmp_path, {
        **CLEAN,
        # a lazy relative import of a higher stage, and an absolute one
        "dist.py": "from . import codec as tc\n\ndef f():\n    from . import tp\n    import taco.train.model\n",
        # from capture (below train) into train
        "capture/recorder.py": "from ..train import model\n",
        # train into capture/selfcheck.py, a stage above train although it lives in capture/
        "train/model.py": "from taco.capture.selfcheck import main\n",
        "stray.py": "",
    })
    r = check(tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[:-1] == [
        "python/taco/capture/recorder.py:1: stage capture imports taco.train.model of the higher stage train",
        "python/taco/dist.py:4: stage dist imports taco.tp of the higher stage tp",
        "python/taco/dist.py:5: stage dist imports taco.train.model of the higher stage train",
        "python/taco/stray.py: a module in no stage of scripts/check_py_layers.py",
        "python/taco/train/model.py:1: stage train imports taco.capture.selfcheck of the higher stage selfcheck",
    ]
    assert lines[-1].startswith("check_py_layers: 5 violation(s); the order is package < errors < codec")


def test_this_checkout_passes():
    r = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
