"""`taco codec` as a command: every preset round-trips through encode/decode files, the bf16
passthrough is ml_dtypes' bf16 rounding, and bad input fails with exit code 2, one line on stderr
and no output file.
"""
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
        assert 0 < err < (0.8 if name.startswith("int2") else 0.3), name  # int2 is ternary
        if name == "bf16":
            assert np.array_equal(y, x.astype(ml_dtypes.bfloat16).astype(F32))
            assert (tmp_path / "x.bin").read_bytes() == x.astype(ml_dtypes.bfloat16).tobytes()


def test_list_shows_the_structured_presets_and_they_round_trip(taco, tmp_path):
    out = run(taco, "codec", "list").stdout
    section = out.split("Structured codecs and error feedback")[1]
    names = [m for m in re.findall(r"^  ([a-z0-9-]+)\s+\S+:\S*\s", section, flags=re.M) if m != "families"]
    assert {"ef-int4-g32", "topk10", "randk10", "lowrank-b1", "subspace-f16"} <= set(names)
    for family in ("subspace:", "lowrank:", "tt:order=", "topk:", "randk:", "ef:<variant>", "aqsgd:<variant>"):
        assert family in section
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((128, 256)) * 0.05).astype(F32)
    np.save(tmp_path / "x.npy", x)
    n = x.size
    k10 = int(np.floor(0.1 * n + 0.5))
    # Wire sizes from docs/structured.md's formulas (bf16 values: 2 bytes).
    want = {"topk10": 6 * k10, "randk10": 8 + 2 * k10, "subspace-f16": 8 + 128 * 40 * 2,
            "ef-int4-g32": n // 2 + 4 * (n // 32)}
    for name in names:
        r = run(taco, "codec", "encode", "--variant", name, tmp_path / "x.npy", tmp_path / "x.bin")
        assert r.returncode == 0, (name, r.stderr)
        size = (tmp_path / "x.bin").stat().st_size
        if name in want:
            assert size == want[name], name
        r = run(taco, "codec", "decode", "--variant", name, "--shape", "128,256", tmp_path / "x.bin", tmp_path / "y.npy")
        assert r.returncode == 0, (name, r.stderr)
        y = np.load(tmp_path / "y.npy")
        assert y.shape == x.shape and np.isfinite(y).all(), name


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
