"""`taco import` end to end, checked with tools that share no code with taco.

numpy writes .npz files (float32, float16, Fortran order), this file writes a safetensors file
by hand (8-byte header length, JSON, raw bytes; BF16 and F8_E4M3 via ml_dtypes), `taco import`
turns them into a trace, and h5py reads the trace as traces/README.md says: the values must be
bit-identical and the metadata exact. Bad inputs must exit 2 with one line on stderr and leave
no file behind.
"""
import json
import os
import struct
import subprocess
import zipfile

import h5py
import ml_dtypes
import numpy as np
import pytest


def run(taco, *args):
    return subprocess.run([taco, *map(str, args)], capture_output=True, text=True, timeout=120)


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: (safetensors dtype, numpy array)}; data in insertion order."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the format pads the header to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def trace_tensors(path):
    """{name: (attrs, float32 array)} read per traces/README.md with h5py alone."""
    out = {}
    with h5py.File(path, "r") as f:
        assert f.attrs["taco_format"] == "taco-trace"
        assert int(f.attrs["taco_format_version"]) == 1
        assert f.attrs["created_by"].startswith("taco ")
        for key, ds in f["tensors"].items():
            attrs = dict(ds.attrs)
            raw = ds[()]
            if attrs["dtype"] == "bf16":
                assert raw.dtype == np.uint16
                x = (raw.astype(np.uint32) << 16).view(np.float32)
            elif attrs["dtype"] == "f16":
                assert raw.dtype == np.uint16
                x = raw.view(np.float16).astype(np.float32)
            else:
                assert attrs["dtype"] == "f32" and raw.dtype == np.float32
                x = raw
            # Chunked by whole rows, shuffled and gzip-compressed.
            if ds.ndim > 0:
                assert ds.chunks is not None and ds.chunks[-1] == ds.shape[-1]
                assert ds.compression == "gzip" and ds.shuffle
            assert key.startswith("t") and len(key) == 7
            out[attrs["name"]] = (attrs, x)
    return out


def same_bits(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_npz_and_safetensors_to_trace(taco, tmp_path):
    rng = np.random.default_rng(42)
    f32 = rng.standard_normal((16, 64)).astype(np.float32)
    f32[0, :3] = [np.inf, -np.inf, 0.0]  # non-finite values are data, not errors
    f16 = rng.standard_normal((2, 8, 32)).astype(np.float16)
    fortran = np.asfortranarray(rng.standard_normal((12, 40)).astype(np.float32))
    assert fortran.flags.f_contiguous and not fortran.flags.c_contiguous
    np.savez(tmp_path / "acts.npz", **{
        "layers.0.attn_out.fwd.rank0.step5": f32,
        "layers.1.mlp_out.bwd.rank1.step5": f16,
        "layers.2.mlp_out.fwd.rank0.step6": fortran,
    })
    np.savez_compressed(tmp_path / "small.npz", **{"layers.3.attn_qkv.fwd.rank1.step7": f32[:4]})

    bf16 = rng.standard_normal((8, 128)).astype(ml_dtypes.bfloat16)
    e4m3 = (rng.standard_normal((4, 32)) * 10).astype(ml_dtypes.float8_e4m3fn)
    f32b = rng.standard_normal((3, 5)).astype(np.float32)
    write_safetensors(tmp_path / "dump.safetensors", {
        "layers.4.mlp_fc1.fwd.rank0.step9": ("BF16", bf16),
        "layers.5.attn_out.bwd.rank1.step9": ("F8_E4M3", e4m3),
        "layers.6.mlp_out.fwd.rank0.step9": ("F32", f32b),
    }, metadata={"model": "tiny-gpt", "collective": "all_reduce", "capture": "hooks"})

    out = tmp_path / "trace.h5"
    r = run(taco, "import", tmp_path / "acts.npz", tmp_path / "small.npz", tmp_path / "dump.safetensors",
            "--out", out, "--name-pattern", "layers.{layer}.{site}.{direction}.rank{tp_rank}.step{step}",
            "--set", "tp_size=2", "--set", "extra.run=test-17")
    assert r.returncode == 0, r.stderr
    assert "imported 7 tensors" in r.stdout
    assert sorted(os.listdir(tmp_path)) == ["acts.npz", "dump.safetensors", "small.npz", "trace.h5"]

    got = trace_tensors(out)
    # --store auto keeps each source exactly: f32 -> f32, f16 -> f16, bf16 and fp8 -> bf16.
    expect = {
        "layers.0.attn_out.fwd.rank0.step5": (f32, "f32", 0, "attn_out", "fwd", 0, 5),
        "layers.1.mlp_out.bwd.rank1.step5": (f16.astype(np.float32), "f16", 1, "mlp_out", "bwd", 1, 5),
        "layers.2.mlp_out.fwd.rank0.step6": (np.ascontiguousarray(fortran), "f32", 2, "mlp_out", "fwd", 0, 6),
        "layers.3.attn_qkv.fwd.rank1.step7": (f32[:4], "f32", 3, "attn_qkv", "fwd", 1, 7),
        "layers.4.mlp_fc1.fwd.rank0.step9": (bf16.astype(np.float32), "bf16", 4, "mlp_fc1", "fwd", 0, 9),
        "layers.5.attn_out.bwd.rank1.step9": (e4m3.astype(np.float32), "bf16", 5, "attn_out", "bwd", 1, 9),
        "layers.6.mlp_out.fwd.rank0.step9": (f32b, "f32", 6, "mlp_out", "fwd", 0, 9),
    }
    assert set(got) == set(expect)
    for name, (values, dtype, layer, site, direction, rank, step) in expect.items():
        attrs, x = got[name]
        assert same_bits(x, values), name
        assert attrs["dtype"] == dtype
        assert (int(attrs["layer"]), attrs["site"], attrs["direction"]) == (layer, site, direction)
        assert (int(attrs["tp_rank"]), int(attrs["tp_size"]), int(attrs["step"])) == (rank, 2, step)
        assert attrs["extra.run"] == "test-17"
        from_st = name.endswith("step9")
        assert attrs["model"] == ("tiny-gpt" if from_st else "")
        assert attrs["collective"] == ("all_reduce" if from_st else "")
        assert ("extra.capture" in attrs) == from_st
    # The exact bf16 bits of the source survive, not just their values.
    assert np.array_equal(h5py.File(out)["tensors"]["t000004"][()], bf16.view(np.uint16))


def test_store_and_sidecar_and_reimport(taco, tmp_path):
    x = np.array([[1.0, 1.00390625, 1.01171875, -3.0]], dtype=np.float32)  # two round in bf16
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "meta.json").write_text(json.dumps({"x": {"layer": 3, "site": "mlp_out", "tp_rank": "0",
                                                          "tp_size": 4, "note": "hello"}}))
    out = tmp_path / "x.h5"
    r = run(taco, "import", tmp_path / "x.npy", "--out", out, "--store", "bf16", "--sidecar", tmp_path / "meta.json")
    assert r.returncode == 0, r.stderr
    assert "2 of 4 values changed" in r.stderr
    attrs, got = trace_tensors(out)["x"]
    expect = x.astype(ml_dtypes.bfloat16).astype(np.float32)  # round to nearest even
    assert same_bits(got, expect)
    assert (int(attrs["layer"]), attrs["site"], int(attrs["tp_rank"]), int(attrs["tp_size"])) == (3, "mlp_out", 0, 4)
    assert attrs["extra.note"] == "hello"

    # A trace is an input too: re-importing gives the same datasets and attributes.
    again = tmp_path / "again.h5"
    r = run(taco, "import", out, "--out", again)
    assert r.returncode == 0, r.stderr
    with h5py.File(out) as a, h5py.File(again) as b:
        assert np.array_equal(a["tensors/t000000"][()], b["tensors/t000000"][()])
        assert dict(a["tensors/t000000"].attrs) == dict(b["tensors/t000000"].attrs)


def test_zip64_npz_from_python_zipfile(taco, tmp_path):
    # numpy's own writer forces zip64 records; build one with zipfile directly as well.
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    path = tmp_path / "z64.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("a.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array(f, a)
    out = tmp_path / "z.h5"
    r = run(taco, "import", path, "--out", out)
    assert r.returncode == 0, r.stderr
    assert same_bits(trace_tensors(out)["a"][1], a)


def test_trace_written_by_h5py_is_read(taco, tmp_path):
    # A trace made with h5py per traces/README.md (as taco.capture does) imports as is.
    src = tmp_path / "py.h5"
    bits = np.array([[0x3F80, 0xC000], [0x0001, 0x7F80]], dtype=np.uint16)
    with h5py.File(src, "w") as f:
        f.attrs["taco_format"] = "taco-trace"
        f.attrs["taco_format_version"] = np.int64(1)
        f.attrs["created_by"] = "h5py by hand"
        ds = f.create_group("tensors").create_dataset("t000000", data=bits, chunks=(1, 2), compression="gzip",
                                                      shuffle=True)
        ds.attrs.update({"name": "h", "dtype": "bf16", "layer": np.int64(2), "site": "attn_out",
                         "direction": "fwd", "collective": "", "tp_rank": np.int64(0), "tp_size": np.int64(1),
                         "step": np.int64(-1), "model": "", "extra.k": "v"})
    out = tmp_path / "copy.h5"
    r = run(taco, "import", src, "--out", out)
    assert r.returncode == 0, r.stderr
    with h5py.File(out) as f:
        ds = f["tensors/t000000"]
        assert np.array_equal(ds[()], bits)
        assert ds.attrs["extra.k"] == "v" and int(ds.attrs["layer"]) == 2 and ds.attrs["site"] == "attn_out"


@pytest.mark.parametrize("name,content,fragment", [
    ("trunc.safetensors", struct.pack("<Q", 100) + b'{"x": 1', "truncated safetensors header"),
    ("bad.npy", b"\x93NUMPY\x01\x00\x10\x00{'descr': 'x'}  \n", "npy header has no 'fortran_order'"),
    ("shape.npy", b"\x93NUMPY\x01\x00\x38\x00{'descr': '<f4', 'fortran_order': False, 'shape': (9,)}\n",
     "truncated npy data"),
    ("notzip.npz", b"PK\x03\x04garbage", "zip archive"),
    ("empty.npy", b"", "file is empty"),
    ("text.txt", b"hello\n", "unrecognized file format"),
])
def test_bad_input_exits_2_with_one_line(taco, tmp_path, name, content, fragment):
    bad = tmp_path / name
    bad.write_bytes(content)
    good = tmp_path / "good.npy"
    np.save(good, np.ones((2, 2), np.float32))
    out = tmp_path / "out.h5"
    # The good input first: the bad one must still leave nothing behind.
    r = run(taco, "import", good, bad, "--out", out)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("taco: error: ") and str(bad) in lines[0] and fragment in lines[0]
    assert sorted(os.listdir(tmp_path)) == sorted([name, "good.npy"])


def test_failure_after_writing_started_leaves_no_file(taco, tmp_path):
    # Two inputs with the same tensor name (one file per rank): the second fails after the
    # first was written into the temporary trace.
    np.savez(tmp_path / "r0.npz", h=np.ones((2, 4), np.float32))
    np.savez(tmp_path / "r1.npz", h=np.zeros((2, 4), np.float32))
    out = tmp_path / "out.h5"
    r = run(taco, "import", tmp_path / "r0.npz", tmp_path / "r1.npz", "--out", out)
    assert r.returncode == 2
    assert "already imported" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()
    assert sorted(os.listdir(tmp_path)) == ["r0.npz", "r1.npz"]
    # --prefix-file-names keeps both, and the pattern reads the rank from the file name.
    r = run(taco, "import", tmp_path / "r0.npz", tmp_path / "r1.npz", "--out", out, "--prefix-file-names",
            "--name-pattern", "r{tp_rank}/h", "--set", "tp_size=2")
    assert r.returncode == 0, r.stderr
    got = trace_tensors(out)
    assert int(got["r0/h"][0]["tp_rank"]) == 0 and int(got["r1/h"][0]["tp_rank"]) == 1
    assert same_bits(got["r1/h"][1], np.zeros((2, 4), np.float32))


def test_pattern_sidecar_and_set_errors(taco, tmp_path):
    np.savez(tmp_path / "a.npz", **{"layers.0.mlp_out": np.ones(4, np.float32), "embed": np.ones(4, np.float32)})
    out = tmp_path / "o.h5"
    pattern = "layers.{layer}.{site}"
    # A name that does not match is an error ...
    r = run(taco, "import", tmp_path / "a.npz", "--out", out, "--name-pattern", pattern)
    assert r.returncode == 2 and "'embed' does not match --name-pattern" in r.stderr
    # ... unless it is skipped on purpose.
    r = run(taco, "import", tmp_path / "a.npz", "--out", out, "--name-pattern", pattern, "--skip-unmatched")
    assert r.returncode == 0, r.stderr
    assert "imported 1 tensors" in r.stdout and "skipped 1" in r.stdout
    assert list(trace_tensors(out)) == ["layers.0.mlp_out"]
    os.remove(out)
    for args, fragment in [
        (["--name-pattern", "layers.{layr}"], "unknown placeholder {layr}"),
        (["--set", "layer=abc"], "layer must be an integer"),
        (["--set", "novalue"], "expected key=value"),
        (["--store", "f8"], "--store"),
        (["--sidecar", tmp_path / "missing.json"], "cannot open"),
    ]:
        r = run(taco, "import", tmp_path / "a.npz", "--out", out, *args)
        assert r.returncode == 2 and fragment in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    (tmp_path / "side.json").write_text(json.dumps({"embedd": {"layer": 1}}))
    r = run(taco, "import", tmp_path / "a.npz", "--out", out, "--sidecar", tmp_path / "side.json")
    assert r.returncode == 2 and "no imported tensor is named 'embedd'" in r.stderr
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["a.npz", "side.json"]
