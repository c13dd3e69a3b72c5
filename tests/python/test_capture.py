"""Tests of taco.capture (python/taco/capture): TP capture (torch.distributed, simulated TP ranks
and single-process emulation), the trace writer, the .pt converter and the subset tool.

Torch-dependent parts run in a subprocess under an interpreter that has torch and h5py
(TACO_TORCH_PYTHON, this interpreter, or Debian's /usr/bin/python3 with python3-torch, which
scripts/setup.sh installs); where there is none they are SKIPPED, never passed.
"""
import json
import os
import struct
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import h5py
import ml_dtypes
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "python"
sys.path.insert(0, str(PKG))

from taco.errors import CaptureInputError  # noqa: E402
from taco.capture.trace_writer import TraceWriter, read_trace  # noqa: E402

TP = 2
LAYERS = 2
SITES_ROW = ("attn_out", "mlp_out")
SITES_COL = ("attn_qkv", "mlp_fc1")
# (site kind, direction, sequence parallel) -> collective, Megatron's TP communication points.
EXPECTED_COLLECTIVE = {
    ("row", "fwd", False): "all_reduce", ("col", "bwd", False): "all_reduce",
    ("row", "fwd", True): "reduce_scatter", ("col", "bwd", True): "reduce_scatter",
    ("col", "fwd", True): "all_gather", ("row", "bwd", True): "all_gather",
}


@lru_cache(maxsize=1)
def torch_python():
    """An interpreter that can import torch and h5py, or None."""
    cands = [os.environ.get("TACO_TORCH_PYTHON"), sys.executable, "/usr/bin/python3"]
    for py in cands:
        if not py or not os.path.exists(py):
            continue
        r = subprocess.run([py, "-c", "import torch, h5py, numpy, torch.distributed as d; "
                            "assert d.is_available() and d.is_gloo_available()"],
                           capture_output=True, timeout=120)
        if r.returncode == 0:
            return py
    return None


def need_torch():
    py = torch_python()
    if py is None:
        pytest.skip("no Python with torch (gloo) and h5py: install Debian's python3-torch and python3-h5py "
                    "(scripts/setup.sh does) or set TACO_TORCH_PYTHON")
    return py


@lru_cache(maxsize=4)
def package_installed(py):
    """Whether `py` imports the installed package with its extension (make test installs it)."""
    return subprocess.run([py, "-c", "import taco._C"], capture_output=True, cwd="/", timeout=120).returncode == 0


def run_py(args, py=None, check=True, timeout=600):
    py = py or need_torch()
    # The installed package (pip install .) when there is one, else the source tree.
    path = "" if package_installed(py) else str(PKG)
    env = dict(os.environ, PYTHONPATH=path, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    r = subprocess.run([py] + list(args), capture_output=True, text=True, env=env, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{args} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def rel(a, b):
    nb = np.linalg.norm(b)
    assert nb > 0, "reference is all zeros: the comparison would be vacuous"
    return float(np.linalg.norm(a - b) / nb)


def load_dir(d, pattern):
    recs = {}
    files = sorted(Path(d).glob(pattern))
    assert files, f"no {pattern} in {d}"
    for f in files:
        for attrs, x in read_trace(f):
            assert attrs["name"] not in recs
            recs[attrs["name"]] = (attrs, x)
    return recs


def kind_of(site):
    return "row" if site in SITES_ROW else "col"


# ---------------------------------------------------------------------------------------------
# Capture on a tiny GPT: unsplit reference, emulation, and a 2-process gloo run.
@pytest.fixture(scope="module")
def selfcheck(tmp_path_factory):
    need_torch()
    out = tmp_path_factory.mktemp("selfcheck")
    r = run_py(["-m", "taco.capture.selfcheck", "--out", str(out), "--tp", str(TP), "--layers", str(LAYERS),
                "--hidden", "32", "--heads", "4", "--seq", "8", "--batch", "2"])
    assert "FAIL" not in r.stdout
    return out


@pytest.mark.parametrize("label,pattern,sp", [("emulate", "emulate.h5", False), ("emulate_sp", "emulate_sp.h5", True),
                                              ("sim", "sim.h5", False), ("sim_sp", "sim_sp.h5", True),
                                              ("dist", "dist.rank*.h5", False), ("dist_sp", "dist_sp.rank*.h5", True)])
def test_partials_sum_to_unsplit_layer(selfcheck, label, pattern, sp):
    ref = dict(np.load(selfcheck / "reference.npz"))
    recs = load_dir(selfcheck, pattern)
    groups = {}
    for attrs, x in recs.values():
        key = (int(attrs["layer"]), attrs["site"], attrs["direction"], attrs["collective"])
        groups.setdefault(key, {})[int(attrs["tp_rank"])] = x
    expected = set()
    for layer in range(LAYERS):
        for site in SITES_ROW + SITES_COL:
            for direction in ("fwd", "bwd"):
                coll = EXPECTED_COLLECTIVE.get((kind_of(site), direction, sp))
                if coll:
                    expected.add((layer, site, direction, coll))
    assert set(groups) == expected
    for (layer, site, direction, coll), by_rank in groups.items():
        assert sorted(by_rank) == list(range(TP))
        parts = [by_rank[r] for r in range(TP)]
        if coll == "all_gather":
            # Each rank's sequence shard; concatenated in rank order they are the unsplit tensor.
            want = ref[f"col.{layer}.{site}.in" if direction == "fwd" else f"row.{layer}.{site}.gout"]
            assert all(p.shape == (want.shape[0] // TP, want.shape[1]) for p in parts)
            assert rel(np.concatenate(parts, axis=0), want) < 1e-6
            continue
        # Partial sums: same shape as the unsplit tensor, each alone far from it, together equal to it.
        want = ref[f"row.{layer}.{site}.out" if direction == "fwd" else f"col.{layer}.{site}.gin"]
        assert all(p.shape == want.shape for p in parts)
        total = np.sum(np.stack(parts).astype(np.float64), axis=0)
        err = rel(total, want.astype(np.float64))
        assert err < 1e-5, f"{label} {layer}/{site}/{direction}: sum of partials off by {err:.2e}"
        assert np.abs(total - want).max() <= 1e-5 * np.abs(want).max() + 1e-12
        for p in parts:
            assert rel(p, want) > 0.1, "a partial equals the full tensor: the split did nothing"
        assert rel(parts[0], parts[1]) > 0.1, "the ranks captured the same tensor"


@pytest.mark.parametrize("dist_pattern,emu_pattern", [("dist.rank*.h5", "emulate.h5"),
                                                      ("dist_sp.rank*.h5", "emulate_sp.h5"),
                                                      ("dist.rank*.h5", "sim.h5"), ("dist_sp.rank*.h5", "sim_sp.h5")])
def test_emulation_and_simulated_ranks_match_distributed_run(selfcheck, dist_pattern, emu_pattern):
    d, e = load_dir(selfcheck, dist_pattern), load_dir(selfcheck, emu_pattern)
    assert sorted(d) == sorted(e)
    assert len(d) == LAYERS * (8 if "sp" in dist_pattern else 4) * TP
    for name in d:
        da, dx = d[name]
        ea, ex = e[name]
        for k in ("layer", "site", "direction", "collective", "tp_rank", "tp_size", "step", "dtype"):
            assert da[k] == ea[k], (name, k)
        assert dx.shape == ex.shape
        if emu_pattern.startswith("sim"):
            assert np.array_equal(dx, ex), name  # the same computation, rank by rank
        else:
            assert rel(dx, ex) < 1e-5, name
    # Each rank of the distributed run wrote only its own tensors.
    for r in range(TP):
        for attrs, _ in read_trace(selfcheck / dist_pattern.replace("*", str(r))):
            assert int(attrs["tp_rank"]) == r


def test_trace_format_and_metadata(selfcheck):
    path = selfcheck / "dist_sp.rank1.h5"
    with h5py.File(path, "r") as f:
        assert f.attrs["taco_format"] == "taco-trace"
        assert f.attrs["taco_format_version"] == 1 and f.attrs["taco_format_version"].dtype == np.int64
        assert f.attrs["created_by"].startswith("taco 0.1.0 (")
        assert f.attrs["generator"] == "taco.capture.selfcheck"
        keys = sorted(f["tensors"].keys())
        assert keys == [f"t{i:06d}" for i in range(len(keys))] and len(keys) == LAYERS * 8
        names = set()
        for k in keys:
            ds = f["tensors"][k]
            a = ds.attrs
            for field in ("layer", "tp_rank", "tp_size", "step"):
                assert a[field].dtype == np.int64, field
            for field in ("name", "dtype", "site", "direction", "collective", "model"):
                assert isinstance(a[field], str), field
            assert a["dtype"] == "f32" and ds.dtype == np.float32
            assert int(a["tp_rank"]) == 1 and int(a["tp_size"]) == TP and int(a["step"]) == 0
            assert 0 <= int(a["layer"]) < LAYERS
            assert a["model"] == "selfcheck" and a["extra.mode"] == "dist"
            assert a["extra.module"] == f"layers.{int(a['layer'])}.{a['site']}"
            assert a["collective"] == EXPECTED_COLLECTIVE[(kind_of(a["site"]), a["direction"], True)]
            assert ds.ndim == 2 and ds.shape[1] == 32
            assert ds.chunks is not None and ds.chunks[1] == ds.shape[1], "chunks must be whole rows"
            assert ds.compression == "gzip" and ds.shuffle
            names.add(a["name"])
        assert len(names) == len(keys)


# ---------------------------------------------------------------------------------------------
# The training CLI: real and simulated TP train the same model and capture the same tensors.
def test_train_dist_and_simulated_agree_and_loss_falls(tmp_path):
    need_torch()
    common = ["--device", "cpu", "--arch", "gpt2", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "32",
              "--batch", "4", "--steps", "40", "--warmup", "5", "--lr", "3e-3", "--log-every", "1", "--eval-every", "0",
              "--capture-steps", "0,20", "--capture-last", "--capture-batch", "2", "--threads", "1",
              "--data", str(PKG / "taco"), "--data-bytes", "200000", "--eval-batches", "2"]
    logs = {}
    for mode, flag in (("dist", "--tp"), ("sim", "--tp-sim")):
        out = tmp_path / mode
        run_py(["-m", "taco.train", flag, "2"] + common + ["--out", str(out)])
        logs[mode] = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    ld, ls = ([r["loss"] for r in logs[m] if r["type"] == "step"] for m in ("dist", "sim"))
    assert len(ld) == len(ls) == 40
    assert ld == ls  # bit for bit: the simulated ranks compute what the processes compute
    assert np.mean(ld[-5:]) < ld[0] - 1.0, f"loss did not fall: {ld[0]:.3f} -> {ld[-5:]}"
    d = load_dir(tmp_path / "dist", "*.h5")
    e = load_dir(tmp_path / "sim", "*.h5")
    assert sorted(d) == sorted(e)
    assert sorted({int(a["step"]) for a, _ in d.values()}) == [0, 20, 39]
    for name, (attrs, x) in d.items():
        assert x.shape == (64, 64)  # --capture-batch 2: 2 sequences of 32 tokens
        assert np.array_equal(x, e[name][1]), name
    files = sorted(p.name for p in (tmp_path / "dist").glob("*.h5"))
    assert files == [f"trace.rank{r}.step{s:06d}.h5" for r in (0, 1) for s in (0, 20, 39)]
    assert sorted(p.name for p in (tmp_path / "sim").glob("*.h5")) == [f"trace.step{s:06d}.h5" for s in (0, 20, 39)]


def test_train_rejects_bad_flags_with_one_line(tmp_path):
    # Argument checks run before torch is imported, so this needs no torch.
    for args, needle in ((["--tp", "3", "--heads", "8"], "heads 8 does not split over TP=3"),
                         (["--capture-steps", "1,x"], "--capture-steps"),
                         (["--capture-layers", "9", "--layers", "2"], "--capture-layers"),
                         (["--steps", "0"], "--steps must be >= 1"),
                         (["--pp-sim", "3", "--layers", "2"], "3 pipeline stages for 2 layers"),
                         (["--pp-sim", "2", "--micro-batches", "1"], "fewer than the 2 pipeline stages")):
        r = run_py(["-m", "taco.train", "--out", str(tmp_path)] + args, py=sys.executable, check=False)
        assert r.returncode == 2, r.stderr
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("taco: error:") and needle in r.stderr
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# Trace writer (numpy + h5py only).
def test_trace_writer_bf16_bits_roundtrip_and_chunking(tmp_path):
    rng = np.random.default_rng(7)
    vals = (rng.standard_normal((3000, 512)) * 10.0 ** rng.integers(-30, 30, (3000, 512))).astype(np.float32)
    vals[0, :6] = [np.nan, np.inf, -np.inf, -0.0, 1e-40, -3e-39]     # NaN, infinities, -0, subnormals
    bits = vals.astype(ml_dtypes.bfloat16).view(np.uint16)
    f16 = rng.standard_normal((5, 7)).astype(np.float16)
    path = tmp_path / "t.h5"
    meta = {"layer": 3, "site": "attn_out", "direction": "fwd", "collective": "all_reduce", "tp_rank": 1,
            "tp_size": 2, "step": 100, "model": "m"}
    with TraceWriter(path, provenance={"command": "pytest"}) as w:
        w.add("a/b.c", bits, "bf16", meta=meta, extra={"note": "x"})
        w.add("half", f16.view(np.uint16), "f16")
        w.add("vec", np.arange(10, dtype=np.float32), "f32")
        w.commit()
    with h5py.File(path, "r") as f:
        ds = f["tensors/t000000"]
        assert ds.dtype == np.uint16 and np.array_equal(ds[()], bits)
        assert ds.chunks == (1024, 512)                      # 1 MiB of whole 1 KiB rows
        assert ds.compression == "gzip" and ds.shuffle
        assert ds.attrs["name"] == "a/b.c" and ds.attrs["extra.note"] == "x" and ds.attrs["step"] == 100
        assert f.attrs["command"] == "pytest"
        h = f["tensors/t000001"]
        assert np.array_equal(h[()].view(np.float16), f16) and h.attrs["layer"] == -1 and h.attrs["site"] == ""
    recs = read_trace(path)
    x = recs[0][1]
    ok = ~np.isnan(vals)
    assert np.isnan(x[0, 0]) and np.array_equal(x[ok], vals.astype(ml_dtypes.bfloat16).astype(np.float32)[ok])
    assert np.array_equal(recs[2][1], np.arange(10, dtype=np.float32))


@pytest.mark.parametrize("bad", [
    dict(name="dup"), dict(meta={"tp_rank": 2, "tp_size": 2}), dict(meta={"layer": "3"}),
    dict(meta={"tp_size": 0}), dict(meta={"colour": "red"}), dict(dtype="f64"),
    dict(data=np.zeros((2, 2), np.float64), dtype="f32"), dict(data=np.zeros((0, 4), np.float32), dtype="f32")])
def test_trace_writer_rejects_bad_input_and_leaves_nothing(tmp_path, bad):
    path = tmp_path / "t.h5"
    with pytest.raises(CaptureInputError):
        with TraceWriter(path) as w:
            w.add("dup", np.ones((2, 4), np.float32), "f32")
            w.add(bad.get("name", "second"), bad.get("data", np.ones((2, 4), np.float32)), bad.get("dtype", "f32"),
                  meta=bad.get("meta"))
            w.commit()
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# .pt converter.
MAKE_DUMPS = r"""
import sys, torch, numpy as np
root = sys.argv[1]
import os
torch.manual_seed(0)
for r in (0, 1):
    d = os.path.join(root, f"rank_{r}", "iter_000010")
    os.makedirs(d)
    hp = torch.randn(8, 16).bfloat16()
    torch.save({"high_precision": hp, "meta": {"scale": "1.5", "n": 3, "ids": torch.arange(4)}},
               os.path.join(d, "decoder.3.fc1_activation.pt"))
    g = torch.randn(4, 16, dtype=torch.float16)
    torch.save(g, os.path.join(d, "decoder.5.proj_gradient.pt"))
    np.save(os.path.join(root, f"hp{r}.npy"), hp.view(torch.int16).numpy().view(np.uint16))
    np.save(os.path.join(root, f"g{r}.npy"), g.view(torch.int16).numpy().view(np.uint16))
torch.save([torch.ones(3, 5), (torch.zeros(2, 2, dtype=torch.float64) + 0.1,)], os.path.join(root, "list.pt"))
"""


def read_safetensors_independently(path):
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    out = {}
    end = 0
    for name, d in header.items():
        b, e = d["data_offsets"]
        end = max(end, e)
        np_dtype = {"BF16": "<u2", "F16": "<u2", "F32": "<f4", "F64": "<f8"}[d["dtype"]]
        out[name] = (d["dtype"], np.frombuffer(data[b:e], dtype=np_dtype).reshape(d["shape"]))
    assert end == len(data)
    return meta, out


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    root = tmp_path_factory.mktemp("dumps")
    run_py(["-c", MAKE_DUMPS, str(root)])
    return root


def test_convert_pt_to_safetensors_with_sidecar(dumps, tmp_path):
    out, side = tmp_path / "te.safetensors", tmp_path / "te.json"
    inputs = sorted(str(p) for p in dumps.glob("rank_*/iter_*/*.pt"))
    r = run_py(["-m", "taco.capture.convert_pt"] + inputs + ["--out", str(out), "--preset", "te", "--set",
                "tp_size=2", "--set", "model=tiny", "--sidecar", str(side)])
    assert "4 tensors" in r.stdout
    meta, tensors = read_safetensors_independently(out)
    assert meta["tp_size"] == "2" and meta["model"] == "tiny" and meta["step"] == "10"
    assert "layer" not in meta and "tp_rank" not in meta           # they differ per tensor
    assert sorted(tensors) == [f"rank_{r}/iter_000010/{n}" for r in (0, 1)
                               for n in ("decoder.3.fc1_activation.high_precision", "decoder.5.proj_gradient")]
    for r in (0, 1):
        dt, hp = tensors[f"rank_{r}/iter_000010/decoder.3.fc1_activation.high_precision"]
        assert dt == "BF16" and np.array_equal(hp, np.load(dumps / f"hp{r}.npy"))
        dt, g = tensors[f"rank_{r}/iter_000010/decoder.5.proj_gradient"]
        assert dt == "F16" and np.array_equal(g, np.load(dumps / f"g{r}.npy"))
    s = json.loads(side.read_text())
    assert sorted(s) == sorted(tensors)
    t = s["rank_1/iter_000010/decoder.5.proj_gradient"]
    assert t["layer"] == "5" and t["tp_rank"] == "1" and t["tensor"] == "gradient"
    assert t["source"] == "rank_1/iter_000010/decoder.5.proj_gradient.pt"
    assert "ids" not in json.dumps(s), "integer tensors must be skipped"


def test_convert_pt_to_trace(dumps, tmp_path):
    out = tmp_path / "x.h5"
    run_py(["-m", "taco.capture.convert_pt", str(dumps / "list.pt"), str(dumps / "rank_0/iter_000010/decoder.3"
            ".fc1_activation.pt"), "--out", str(out), "--root", str(dumps),
            "--name-pattern", r"decoder\.(?P<layer>\d+)\.(?P<site>fc1)", "--set", "direction=fwd"])
    recs = {a["name"]: (a, x) for a, x in read_trace(out)}
    assert sorted(recs) == ["list.0", "list.1.0", "rank_0/iter_000010/decoder.3.fc1_activation.high_precision"]
    a, x = recs["list.1.0"]
    assert a["dtype"] == "f32" and a["extra.dtype_orig"] == "f64" and np.allclose(x, 0.1) and a["layer"] == -1
    a, x = recs["rank_0/iter_000010/decoder.3.fc1_activation.high_precision"]
    assert a["dtype"] == "bf16" and a["layer"] == 3 and a["site"] == "fc1" and a["direction"] == "fwd"
    hp = np.load(dumps / "hp0.npy")
    assert np.array_equal(x, (hp.astype(np.uint32) << 16).view(np.float32))


def test_convert_pt_output_imports_with_taco(dumps, tmp_path):
    """convert_pt -> safetensors + sidecar -> `taco import` (helper io's C++ reader) -> trace."""
    import re
    taco = os.environ.get("TACO_BIN") or str(REPO / "build" / "bin" / "taco")
    if not os.path.exists(taco):
        pytest.skip(f"no taco binary at {taco} (set TACO_BIN)")
    h = subprocess.run([taco, "import", "--help"], capture_output=True, text=True, timeout=60)
    if h.returncode != 0 or not re.search(r"^Usage: \S*taco import\b", h.stdout, re.M):
        pytest.skip(f"{taco} has no 'import' command")
    st, side, out = tmp_path / "d.safetensors", tmp_path / "d.json", tmp_path / "d.h5"
    inputs = sorted(str(p) for p in dumps.glob("rank_*/iter_*/*.pt"))
    run_py(["-m", "taco.capture.convert_pt"] + inputs + ["--out", str(st), "--preset", "te", "--set", "tp_size=2",
                                                         "--sidecar", str(side)])
    r = subprocess.run([taco, "import", str(st), "--sidecar", str(side), "--out", str(out)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    recs = {a["name"]: (a, x) for a, x in read_trace(out)}
    assert len(recs) == 4
    for rank in (0, 1):
        a, x = recs[f"rank_{rank}/iter_000010/decoder.3.fc1_activation.high_precision"]
        assert a["dtype"] == "bf16" and a["layer"] == 3 and a["tp_rank"] == rank and a["tp_size"] == 2
        assert a["step"] == 10 and a["extra.tensor"] == "activation"
        assert np.array_equal(x, (np.load(dumps / f"hp{rank}.npy").astype(np.uint32) << 16).view(np.float32))
        a, x = recs[f"rank_{rank}/iter_000010/decoder.5.proj_gradient"]
        assert a["dtype"] == "f16" and a["layer"] == 5 and a["tp_rank"] == rank
        assert np.array_equal(x, np.load(dumps / f"g{rank}.npy").view(np.float16).astype(np.float32))


@pytest.mark.parametrize("case", ["garbage", "zip_garbage", "missing", "varying_without_sidecar", "bad_ext",
                                  "bad_pattern", "no_tensors"])
def test_convert_pt_bad_input(dumps, tmp_path, case):
    need_torch()
    out = tmp_path / "o.safetensors"
    args = []
    if case == "garbage":
        (tmp_path / "g.pt").write_bytes(b"hello world")
        args = [str(tmp_path / "g.pt")]
    elif case == "zip_garbage":
        (tmp_path / "g.pt").write_bytes(b"PK\x03\x04" + b"\0" * 40)
        args = [str(tmp_path / "g.pt")]
    elif case == "missing":
        args = [str(tmp_path / "nope.pt")]
    elif case == "varying_without_sidecar":
        args = sorted(str(p) for p in dumps.glob("rank_*/iter_*/*.pt")) + ["--preset", "te"]
    elif case == "bad_ext":
        args = [str(dumps / "list.pt")]
        out = tmp_path / "o.bin"
    elif case == "bad_pattern":
        args = [str(dumps / "list.pt"), "--name-pattern", "(?P<layer"]
    elif case == "no_tensors":
        run_py(["-c", f"import torch; torch.save({{'a': 1, 'b': [2.0]}}, {str(tmp_path / 'n.pt')!r})"])
        args = [str(tmp_path / "n.pt")]
    r = run_py(["-m", "taco.capture.convert_pt"] + args + ["--out", str(out)], check=False)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith("taco: error:") and r.stderr.count("\n") == 1, r.stderr
    assert not any(p.name.startswith("o.") for p in tmp_path.iterdir()), "partial output left behind"


def test_convert_pt_refuses_an_output_that_is_an_input(dumps, tmp_path):
    need_torch()
    pt = tmp_path / "list.pt"
    pt.write_bytes((dumps / "list.pt").read_bytes())
    (tmp_path / "o.safetensors").symlink_to(pt)
    os.link(pt, tmp_path / "o.h5")
    for extra, needle in ((["--out", str(tmp_path / "o.safetensors")], "--out"),
                          (["--out", str(tmp_path / "o.h5")], "--out"),
                          (["--out", str(tmp_path / "x.safetensors"), "--sidecar", str(pt)], "--sidecar"),
                          (["--out", str(tmp_path / "x.safetensors"), "--sidecar", str(tmp_path / "x.safetensors")],
                           "is --out too")):
        before = pt.read_bytes()
        r = run_py(["-m", "taco.capture.convert_pt", str(pt)] + extra, check=False)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and needle in r.stderr, r.stderr
        assert pt.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["list.pt", "o.h5", "o.safetensors"]


# ---------------------------------------------------------------------------------------------
# subset tool (numpy + h5py only).
def test_subset_keeps_bits_and_attrs(tmp_path):
    rng = np.random.default_rng(1)
    src = []
    for r in (0, 1):
        path = tmp_path / f"in{r}.h5"
        with TraceWriter(path, provenance={"command": "orig"}) as w:
            for layer in range(3):
                for direction in ("fwd", "bwd"):
                    bits = rng.standard_normal((40, 16)).astype(ml_dtypes.bfloat16).view(np.uint16)
                    w.add(f"l{layer}.{direction}.r{r}", bits, "bf16",
                          meta={"layer": layer, "direction": direction, "tp_rank": r, "tp_size": 2, "step": 5},
                          extra={"k": f"v{layer}"})
                    src.append((f"l{layer}.{direction}.r{r}", bits))
            w.commit()
    out = tmp_path / "sub.h5"
    r = run_py(["-m", "taco.capture.subset", str(tmp_path / "in0.h5"), str(tmp_path / "in1.h5"), "--layers", "0,2",
                "--directions", "bwd", "--rows", "10", "--out", str(out)], py=sys.executable)
    assert "4 tensors" in r.stdout
    src = dict(src)
    with h5py.File(out, "r") as f:
        assert f.attrs["origin.command"] == "orig" and "in0.h5" in f.attrs["source"]
        got = {ds.attrs["name"]: ds for ds in f["tensors"].values()}
        assert sorted(got) == ["l0.bwd.r0", "l0.bwd.r1", "l2.bwd.r0", "l2.bwd.r1"]
        for name, ds in got.items():
            assert np.array_equal(ds[()], src[name][:10])
            assert ds.attrs["dtype"] == "bf16" and ds.attrs["extra.k"] == f"v{name[1]}" and ds.attrs["step"] == 5
    r = run_py(["-m", "taco.capture.subset", str(tmp_path / "in0.h5"), "--layers", "7", "--out",
                str(tmp_path / "none.h5")], py=sys.executable, check=False)
    assert r.returncode == 2 and "no tensor matched" in r.stderr and not (tmp_path / "none.h5").exists()
    (tmp_path / "junk.h5").write_bytes(b"not hdf5")
    r = run_py(["-m", "taco.capture.subset", str(tmp_path / "junk.h5"), "--out", str(tmp_path / "j2.h5")],
               py=sys.executable, check=False)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and not (tmp_path / "j2.h5").exists()
    # The output must not be an input: by its path, a symbolic link or a hard link.
    (tmp_path / "soft.h5").symlink_to(tmp_path / "in0.h5")
    os.link(tmp_path / "in0.h5", tmp_path / "hard.h5")
    before = (tmp_path / "in0.h5").read_bytes()
    for out in ("in0.h5", "soft.h5", "hard.h5"):
        r = run_py(["-m", "taco.capture.subset", str(tmp_path / "in0.h5"), "--out", str(tmp_path / out)],
                   py=sys.executable, check=False)
        assert r.returncode == 2 and "is the input" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert (tmp_path / "in0.h5").read_bytes() == before
