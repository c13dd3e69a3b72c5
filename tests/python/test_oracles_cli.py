"""`taco codec` as a command: every preset round-trips through encode/decode files, the bf16
passthrough is ml_dtypes' bf16 rounding, and bad input fails with exit code 2, one line on stderr
and no output file.
"""
import os
import re
import subprocess

import ml_dtypes
import numpy as np
import pytest

F32 = np.float32


def run(taco, *args):
    return subprocess.run([taco, *map(str, args)], capture_output=True, text=True)


def presets(taco):
    r = run(taco, "codec", "list")
    assert r.returncode == 0
    names = re.findall(r"^  (\S+)\s+\S+\s", r.stdout.split("\n\nGrammar")[0], flags=re.M)
    assert "taco" in names and "bf16" in names and "tahquant" in names and len(names) >= 25
    return names


def test_every_preset_round_trips_through_files(taco, tmp_path):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((128, 256)) * 0.05).astype(F32)
    np.save(tmp_path / "x.npy", x)
    for name in presets(taco):
        r = run(taco, "codec", "encode", "--variant", name, tmp_path / "x.npy", tmp_path / "x.bin")
        assert r.returncode == 0, (name, r.stderr)
        m = re.search(r"-> (\d+) bytes \(([0-9.]+) B/elem\)", r.stdout)
        assert m and int(m.group(1)) == (tmp_path / "x.bin").stat().st_size
        r = run(taco, "codec", "decode", "--variant", name, "--shape", "128,256", tmp_path / "x.bin", tmp_path / "y.npy")
        assert r.returncode == 0, (name, r.stderr)
        y = np.load(tmp_path / "y.npy")
        err = np.linalg.norm(y - x) / np.linalg.norm(x)
        assert 0 < err < 0.3, name
        if name == "bf16":
            assert np.array_equal(y, x.astype(ml_dtypes.bfloat16).astype(F32))
            assert (tmp_path / "x.bin").read_bytes() == x.astype(ml_dtypes.bfloat16).tobytes()


@pytest.mark.parametrize("args,msg", [
    (["encode", "--variant", "nonsense", "{x}", "{out}"], "unknown token"),
    (["encode", "--variant", "fp8-tile128", "{x}", "{out}"], "tile"),
    (["encode", "--variant", "taco", "{missing}", "{out}"], "missing"),
    (["decode", "--variant", "taco", "--shape", "10,10", "{bin}", "{out}"], "bytes"),
    (["decode", "--variant", "taco", "--shape", "10,x", "{bin}", "{out}"], "--shape"),
    (["decode", "--variant", "taco", "--shape", "10", "{bin}", "{out}"], "--shape"),
    (["cast", "--format", "fp6", "{x}", "{out}"], "--format"),
    (["cast", "--format", "int8", "--nosat", "{x}", "{out}"], "always saturates"),
    (["bench", "--variant", "taco", "--numel", "1000", "--cols", "300"], "--numel"),
])
def test_bad_input_exits_2_with_one_line(taco, tmp_path, args, msg):
    x = np.ones((3, 100), F32)
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "w.bin").write_bytes(b"\0" * 17)
    subs = {"{x}": tmp_path / "x.npy", "{out}": tmp_path / "out.any", "{missing}": tmp_path / "missing.npy",
            "{bin}": tmp_path / "w.bin"}
    r = run(taco, "codec", *[subs.get(a, a) for a in args])
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().split("\n")
    assert len(lines) == 1 and lines[0].startswith("taco: error:") and msg in lines[0], r.stderr
    assert not (tmp_path / "out.any").exists()


def test_list_documents_the_grammar(taco):
    out = run(taco, "codec", "list").stdout
    for token in ("e4m3", "g<G>", "tile<T>", "se8m0", "sround=", "had", "rht", "dual", "T=", "nosat", "tahquant"):
        assert token in out


def test_bench_reports_throughput(taco):
    r = run(taco, "codec", "bench", "--variant", "fp8-g128", "--numel", 1 << 16, "--cols", 1024, "--reps", 1)
    assert r.returncode == 0, r.stderr
    assert re.search(r"encode\+decode [0-9.]+ M elem/s; 1.03125 B/elem", r.stdout)
