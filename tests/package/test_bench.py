"""python -m taco.bench.layer on the CPU: its JSON is what `taco model --layer` reads (the strict
reader accepts it), the shapes follow --micro-batch, and bad arguments end with one line, exit 2."""
import json
import subprocess
import sys

import pytest

from conftest import REPO


def layer(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "taco.bench.layer", "--device", "cpu", "--models", "tiny", "--tp", "2",
                           "--reps", "1", "--warmup", "0", "--no-graphs", *args], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)


def test_layer_json_has_the_micro_batch_and_the_model_reads_it(tmp_path, taco_bin):
    out = tmp_path / "layer.json"
    r = layer(tmp_path, "--sp", "both", "--variants", "bf16,taco", "--micro-batch", "3", "--json", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(out.read_text())
    assert d["schema"] == "taco.layer/1" and len(d["rows"]) == 4  # sp off/on x bf16/taco
    for row in d["rows"]:
        assert row["micro_batch"] == 3 and row["tp"] == 2
        tokens = 3 * row["seq"] // (2 if row["sp"] else 1)
        for m in row["messages"]:
            assert m["bytes_plain"] == 2 * m["elements"]
            assert m["elements"] in (3 * row["seq"] * row["model"]["hidden"], tokens * row["model"]["hidden"])
            if row["variant"] == "bf16":
                assert m["codec_ms"] == 0 and m["bytes_wire"] == m["bytes_plain"]
            else:
                assert m["bytes_wire"] < m["bytes_plain"]
    # the model reads GPU measurements only (a GPU count and CUDA version); the rest is as written
    d["env"].update(gpus=1, cuda=d["env"]["cuda"] or "cpu run")
    out.write_text(json.dumps(d))
    v = subprocess.run([taco_bin, "model", "--validate", "--layer", str(out), "--bench",
                        str(REPO / "bench" / "records" / "2026-12-02-h200-v62-bench.json")], capture_output=True, text=True,
                       timeout=120)
    assert v.returncode == 0, v.stdout[-2000:] + v.stderr[-2000:]
    assert "layer-step" in v.stdout


@pytest.mark.parametrize("args, needle", [
    (["--micro-batch", "0"], "--micro-batch must be >= 1"),
    (["--models", "gpt-9"], "unknown model"),
    (["--variants", "bf16,nosuch"], "nosuch"),
])
def test_layer_bad_arguments_exit_2_with_one_line(tmp_path, args, needle):
    r = layer(tmp_path, *args)
    assert r.returncode == 2 and needle in r.stderr and r.stderr.strip().count("\n") == 0, r.stderr
