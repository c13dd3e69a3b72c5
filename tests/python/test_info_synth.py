"""`taco synth` and `taco info` end to end, checked with tools that share no code with taco.

`taco synth` writes small traces, h5py reads them as traces/README.md says (bf16 as uint16
bits), and NumPy/SciPy recompute the statistics that `taco info --json` reports: they must
agree to ~1e-6 relative (exactly for counts). Also: metadata and provenance, reproducibility
from the recorded command and across thread counts, and bad inputs (exit 2, one line on
stderr, no output file left behind).
"""
import json
import os
import shlex
import subprocess

import h5py
import numpy as np
import pytest
import scipy.stats

ROW_PARALLEL = ("attn_out", "mlp_out")


def run(taco, *args, env=None):
    return subprocess.run([taco, *map(str, args)], capture_output=True, text=True, timeout=300, env=env)


def read_trace(path):
    """(file attrs, [(attrs, float64 array)]) in dataset order, per traces/README.md."""
    out = []
    with h5py.File(path, "r") as f:
        assert f.attrs["taco_format"] == "taco-trace"
        file_attrs = dict(f.attrs)
        for key in sorted(f["tensors"].keys()):
            ds = f["tensors"][key]
            attrs = dict(ds.attrs)
            raw = ds[()]
            if attrs["dtype"] == "bf16":
                assert raw.dtype == np.uint16
                x = (raw.astype(np.uint32) << 16).view(np.float32)
            elif attrs["dtype"] == "f16":
                x = raw.view(np.float16).astype(np.float32)
            else:
                assert raw.dtype == np.float32
                x = raw
            out.append((attrs, x.astype(np.float64)))
    return file_attrs, out


def oracle(x, block=128):
    """The statistics of docs/synth.md, computed with NumPy/SciPy over finite values."""
    x2 = x.reshape(-1, x.shape[-1])
    fin = x2[np.isfinite(x2)]
    a = np.abs(fin)
    nz = a[a > 0]
    absmax = a.max()
    best = 0.0
    for row in np.abs(np.where(np.isfinite(x2), x2, 0)):
        for b0 in range(0, row.size, block):
            blk = row[b0:b0 + block]
            blk = blk[blk > 0]
            if blk.size:
                best = max(best, float(np.log2(blk.max() / blk.min())))
    col = np.abs(np.where(np.isfinite(x2), x2, 0)).max(axis=0)
    row = np.abs(np.where(np.isfinite(x2), x2, 0)).max(axis=1)
    return {
        "numel": x.size,
        "finite_count": fin.size,
        "zero_count": int((fin == 0).sum()),
        "zero_frac": float((fin == 0).mean()),
        "mean": float(fin.mean()),
        "std": float(fin.std()),
        "rms": float(np.sqrt(np.mean(fin * fin))),
        "absmax": float(absmax),
        "min_nonzero_abs": float(nz.min()),
        "kurtosis": float(scipy.stats.kurtosis(fin, fisher=False, bias=True)),
        "crest_factor": float(absmax / np.sqrt(np.mean(fin * fin))),
        "dynamic_range_log2": float(np.log2(absmax / nz.min())),
        "max_blockwise_dynamic_range": best,
        # counts are exact: |x| * 448 / absmax < 2^-6
        "e4m3_underflow_frac": float((nz * 448 / absmax < 2.0**-6).sum() / nz.size),
        "e4m3_flush_frac": float((nz * 448 / absmax < 2.0**-9).sum() / nz.size),
        "e5m2_underflow_frac": float((nz * 57344 / absmax < 2.0**-14).sum() / nz.size),
        "row_absmax_spread": float(row.max() / np.median(row)),
        "col_absmax_spread": float(col.max() / np.median(col)),
        "top_channels": list(np.argsort(-col, kind="stable")[:8]),
        "top_tokens": list(np.argsort(-row, kind="stable")[:8]),
    }


@pytest.fixture(scope="module")
def sp_trace(taco, tmp_path_factory):
    path = tmp_path_factory.mktemp("synth") / "sp.h5"
    r = run(taco, "synth", "--out", path, "--hidden", 256, "--tokens", 96, "--layers", 2, "--tp", 2,
            "--steps", "0,1", "--sp", "--seed", 3)
    assert r.returncode == 0, r.stderr
    assert str(path) in r.stdout
    return path


def check_against_numpy(taco, path):
    r = run(taco, "info", "--json", path)
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)
    _, tensors = read_trace(path)
    assert len(listed) == len(tensors) > 0
    for entry, (attrs, x) in zip(listed, tensors):
        assert entry["file"] == str(path)
        assert entry["name"] == attrs["name"]
        assert entry["shape"] == list(x.shape)
        assert entry["dtype"] == attrs["dtype"]
        for key in ("layer", "tp_rank", "tp_size", "step"):
            assert entry[key] == int(attrs[key])
        for key in ("site", "direction", "collective", "model"):
            assert entry[key] == attrs[key]
        s, o = entry["stats"], oracle(x)
        for key in ("numel", "finite_count", "zero_count"):
            assert s[key] == o[key], (entry["name"], key)
        assert s["nan_count"] == s["inf_count"] == 0
        for key in ("zero_frac", "mean", "std", "rms", "absmax", "min_nonzero_abs", "kurtosis", "crest_factor",
                    "dynamic_range_log2", "max_blockwise_dynamic_range", "e4m3_underflow_frac",
                    "e4m3_flush_frac", "e5m2_underflow_frac", "row_absmax_spread", "col_absmax_spread"):
            assert s[key] == pytest.approx(o[key], rel=1e-6, abs=1e-12 * max(1.0, abs(o[key]))), (entry["name"], key)
        assert [c["index"] for c in s["top_channels"]] == o["top_channels"]
        assert [t["index"] for t in s["top_tokens"]] == o["top_tokens"]
    return listed, tensors


def test_info_json_matches_numpy_on_a_synthetic_trace(taco, sp_trace):
    listed, tensors = check_against_numpy(taco, sp_trace)
    # 2 steps x 2 layers x 4 sites x 2 directions x 2 ranks, all carried by a collective with --sp
    assert len(listed) == 64
    for e in listed:
        row = e["site"] in ROW_PARALLEL
        if row == (e["direction"] == "fwd"):
            assert e["collective"] == "reduce_scatter" and e["shape"] == [96, 256]
        else:
            assert e["collective"] == "all_gather" and e["shape"] == [48, 256]
            assert e["extra"]["token_offset"] == str(48 * e["tp_rank"])
        assert e["model"] == "synth:realistic"
        assert e["extra"]["dist"].startswith("realistic:act_sigma=0.5,")
        # realistic: forward activations with outlier channels, backward gradients near 1e-7
        if e["direction"] == "fwd":
            assert e["stats"]["col_absmax_spread"] > 30
        else:
            assert 1e-8 < e["stats"]["rms"] < 1e-6


def test_info_json_matches_numpy_with_zeros_and_f32(taco, tmp_path):
    path = tmp_path / "sparse.h5"
    r = run(taco, "synth", "--out", path, "--hidden", 200, "--tokens", 40, "--layers", 1, "--tp", 1,
            "--dist", "sparse:p=0.3,sigma=2", "--store", "f32", "--directions", "fwd", "--seed", 11)
    assert r.returncode == 0, r.stderr
    listed, tensors = check_against_numpy(taco, path)
    assert len(listed) == 2  # fwd attn_out and mlp_out; hidden 200 leaves a 72-element tail block
    for e in listed:
        assert e["dtype"] == "f32"
        assert abs(e["stats"]["zero_frac"] - 0.3) < 0.05


def test_info_counts_nan_and_inf_in_npy(taco, tmp_path):
    x = np.arange(-12, 12, dtype=np.float32).reshape(4, 6) / 4
    x[1, 2], x[3, 0], x[0, 5] = np.nan, np.inf, -np.inf
    np.save(tmp_path / "x.npy", x)
    r = run(taco, "info", "--json", tmp_path / "x.npy")
    assert r.returncode == 0, r.stderr
    (e,) = json.loads(r.stdout)
    s = e["stats"]
    assert (s["nan_count"], s["inf_count"], s["finite_count"], s["zero_count"]) == (1, 2, 21, 1)
    fin = x[np.isfinite(x)].astype(np.float64)
    assert s["rms"] == pytest.approx(np.sqrt(np.mean(fin**2)), rel=1e-12)
    assert s["kurtosis"] == pytest.approx(scipy.stats.kurtosis(fin, fisher=False), rel=1e-12)
    assert e["layer"] == -1 and e["site"] == ""
    # The table shows the nan/inf column only when needed, and '-' for unknown metadata.
    r = run(taco, "info", tmp_path / "x.npy")
    assert r.returncode == 0, r.stderr
    assert "nan/inf" in r.stdout and "1/2" in r.stdout


def test_trace_metadata_provenance_and_reproducibility(taco, sp_trace, tmp_path):
    file_attrs, tensors = read_trace(sp_trace)
    assert file_attrs["generator"] == "taco-synth/1"
    assert file_attrs["seed"] == "3"
    assert file_attrs["dist"].startswith("realistic:")
    cmd = shlex.split(file_attrs["command"])
    assert cmd[:2] == ["taco", "synth"] and "--sp" in cmd
    # The recorded command reproduces the values bit for bit, on 1 thread as on 2.
    out = tmp_path / "again.h5"
    cmd[cmd.index("--out") + 1] = str(out)
    for threads in ("1", "2"):
        r = run(taco, *cmd[1:], env={**os.environ, "OMP_NUM_THREADS": threads})
        assert r.returncode == 0, r.stderr
        _, again = read_trace(out)
        assert len(again) == len(tensors)
        for (a1, x1), (a2, x2) in zip(tensors, again):
            assert a1["name"] == a2["name"]
            assert np.array_equal(x1, x2)
    # A different seed gives different values.
    cmd[cmd.index("--seed") + 1] = "4"
    assert run(taco, *cmd[1:]).returncode == 0
    _, other = read_trace(out)
    assert not np.array_equal(tensors[0][1], other[0][1])


def test_info_table_rows_and_long(taco, sp_trace):
    r = run(taco, "info", sp_trace, "--rows", 3)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].endswith("taco-hdf5 (64 tensors)")
    assert lines[1].split()[:3] == ["#", "name", "shape"]
    assert [ln.split()[0] for ln in lines[2:5]] == ["0", "1", "2"]
    assert lines[5] == "... 61 more tensors not listed (--rows 0 lists all)"
    r = run(taco, "info", sp_trace, "--rows", 1, "--long")
    assert r.returncode == 0, r.stderr
    assert "per-tensor FP8 scaling" in r.stdout and "channels (cols 256)" in r.stdout
    r = run(taco, "info", "--json", sp_trace, "--rows", 5)
    assert len(json.loads(r.stdout)) == 5


def error_line(r):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("taco: error: ")
    assert r.stdout == ""
    return lines[0]


def test_info_bad_inputs_exit_2_with_one_line(taco, tmp_path):
    missing = tmp_path / "missing.h5"
    assert str(missing) in error_line(run(taco, "info", missing))
    empty = tmp_path / "empty.h5"
    empty.write_bytes(b"")
    assert str(empty) in error_line(run(taco, "info", empty))
    text = tmp_path / "notes.txt"
    text.write_text("these are not tensors\n" * 20)
    assert str(text) in error_line(run(taco, "info", text))
    # A bad file after a good one still fails as a whole, before printing anything.
    good = tmp_path / "ok.npy"
    np.save(good, np.ones((2, 3), np.float32))
    error_line(run(taco, "info", good, text))
    error_line(run(taco, "info", good, "--rows", -1))
    error_line(run(taco, "info"))


@pytest.mark.parametrize("args, flag", [
    (["--tokens", 7, "--tp", 2, "--sp"], "--sp"),
    (["--tokens", 16, "--dist", "gaussian:sigma=-1"], "--dist"),
    (["--tokens", 16, "--dist", "cauchy"], "--dist"),
    (["--tokens", 16, "--sites", "attn_out,qkv"], "--sites"),
    (["--tokens", 16, "--sites", "attn_qkv", "--directions", "fwd"], "--sites/--directions"),
    (["--tokens", 16, "--store", "f8"], "--store"),
    (["--tokens", 16, "--steps", "0,0"], "--steps"),
    (["--tokens", 0], "--tokens"),
])
def test_synth_bad_options_exit_2_and_write_nothing(taco, tmp_path, args, flag):
    out = tmp_path / "t.h5"
    line = error_line(run(taco, "synth", "--out", out, "--hidden", 64, *args))
    assert flag in line
    assert list(tmp_path.iterdir()) == []


def test_synth_into_a_missing_directory_exits_2(taco, tmp_path):
    out = tmp_path / "no" / "such" / "dir" / "t.h5"
    error_line(run(taco, "synth", "--out", out, "--hidden", 64, "--tokens", 16))
    assert not (tmp_path / "no").exists()


def test_help_has_examples(taco):
    for cmd in ("info", "synth"):
        r = run(taco, cmd, "--help")
        assert r.returncode == 0
        assert "Examples:" in r.stdout
    assert "outlier_channels:sigma=1,count=8,min=100,max=1000" in run(taco, "synth", "--help").stdout
