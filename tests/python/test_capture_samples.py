"""The shipped sample traces (traces/samples): readable with h5py per traces/README.md, complete
(both TP ranks, fwd and bwd, >= 3 layers, >= 2 steps), real (finite, non-zero, the two ranks'
partials differ), small enough, and readable by the C++ CLI (`taco info`, `taco import`) when
TACO_BIN points to a build that has those commands.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "traces" / "samples"
sys.path.insert(0, str(REPO / "python"))

from taco.capture.safetensors_io import read_safetensors, write_safetensors  # noqa: E402

FILES = sorted(SAMPLES.glob("*.h5"))
INT_ATTRS = ("layer", "tp_rank", "tp_size", "step")
STR_ATTRS = ("name", "dtype", "site", "direction", "collective", "model")


def floats(ds):
    """The README's recipe, verbatim."""
    raw = ds[()]
    if ds.attrs["dtype"] == "bf16":
        return (raw.astype(np.uint32) << 16).view(np.float32)
    if ds.attrs["dtype"] == "f16":
        return raw.view(np.float16).astype(np.float32)
    return raw


def all_tensors():
    out = []
    for path in FILES:
        with h5py.File(path, "r") as f:
            for key, ds in f["tensors"].items():
                out.append((path.name, key, {k: ds.attrs[k] for k in ds.attrs.keys()}, floats(ds)))
    return out


def test_samples_exist_with_provenance_and_fit_the_budget():
    assert len(FILES) >= 2
    total = sum(p.stat().st_size for p in SAMPLES.iterdir())
    assert total <= 20 * 2**20, f"samples take {total / 2**20:.1f} MiB (budget 20 MiB)"
    prov = (SAMPLES / "PROVENANCE.md").read_text()
    for f in FILES:
        assert f.name in prov, f"{f.name} is not described in PROVENANCE.md"
    for needle in ("H200", "torch 2.11", "gloo", "Loss curve", "scripts/capture_run.sh"):
        assert needle in prov


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_sample_follows_the_trace_format(path):
    with h5py.File(path, "r") as f:
        assert f.attrs["taco_format"] == "taco-trace" and int(f.attrs["taco_format_version"]) == 1
        assert f.attrs["created_by"].startswith("taco ")
        keys = sorted(f["tensors"].keys())
        assert keys == [f"t{i:06d}" for i in range(len(keys))]
        names = set()
        for k in keys:
            ds = f["tensors"][k]
            for a in INT_ATTRS:
                assert ds.attrs[a].dtype == np.int64, a
            for a in STR_ATTRS:
                assert isinstance(ds.attrs[a], str), a
            assert ds.attrs["dtype"] == "bf16" and ds.dtype == np.uint16
            assert ds.ndim == 2 and ds.shape[1] == 512 and ds.shape[0] in (256, 512)
            assert ds.chunks[1] == ds.shape[1] and ds.compression == "gzip" and ds.shuffle
            assert int(ds.attrs["tp_size"]) == 2 and int(ds.attrs["tp_rank"]) in (0, 1)
            names.add(ds.attrs["name"])
        assert len(names) == len(keys)


def test_samples_cover_ranks_directions_layers_steps_and_are_real():
    recs = all_tensors()
    ar = [(a, x) for _, _, a, x in recs if a["collective"] == "all_reduce"]
    assert {int(a["tp_rank"]) for a, _ in ar} == {0, 1}
    assert {a["direction"] for a, _ in ar} == {"fwd", "bwd"}
    assert len({int(a["layer"]) for a, _ in ar}) >= 3
    assert len({int(a["step"]) for a, _ in ar}) >= 2
    assert {a["site"] for a, _ in ar} == {"attn_out", "mlp_out", "attn_qkv", "mlp_fc1"}
    # Megatron's TP points: row-parallel outputs forward, column-parallel input gradients backward.
    for a, _ in ar:
        assert (a["site"], a["direction"]) in {("attn_out", "fwd"), ("mlp_out", "fwd"), ("attn_qkv", "bwd"),
                                               ("mlp_fc1", "bwd")}
    pairs = {}
    for a, x in ar:
        assert np.isfinite(x).all() and np.abs(x).max() > 0
        pairs.setdefault((int(a["step"]), int(a["layer"]), a["site"], a["direction"]), {})[int(a["tp_rank"])] = x
    for key, by_rank in pairs.items():
        assert sorted(by_rank) == [0, 1], key
        x0, x1 = by_rank[0], by_rank[1]
        assert x0.shape == x1.shape
        # Two different partial sums of the same tensor: correlated (same inputs) but not equal.
        assert np.linalg.norm(x0 - x1) > 0.1 * np.linalg.norm(x0), key
    ag = [a for _, _, a, _ in recs if a["collective"] == "all_gather"]
    assert {(a["site"], a["direction"]) for a in ag} == {("attn_qkv", "fwd"), ("mlp_fc1", "fwd"),
                                                         ("attn_out", "bwd"), ("mlp_out", "bwd")}


def taco_bin_with(command):
    b = os.environ.get("TACO_BIN") or str(REPO / "build" / "bin" / "taco")
    if not os.path.exists(b):
        pytest.skip(f"no taco binary at {b} (set TACO_BIN)")
    r = subprocess.run([b, command, "--help"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0 or not re.search(rf"^Usage: \S*taco {command}\b", r.stdout, re.M):
        pytest.skip(f"{b} has no '{command}' command")
    return b


def test_taco_info_reads_the_samples():
    taco = taco_bin_with("info")
    r = subprocess.run([taco, "info"] + [str(p) for p in FILES], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    n = sum(1 for _ in all_tensors())
    for f in FILES:
        assert f.name in r.stdout
    # every tensor name appears in the listing
    names = [a["name"] for _, _, a, _ in all_tensors()]
    assert len(names) == n and all(name in r.stdout for name in names)


def test_taco_import_turns_converter_output_into_the_same_trace(tmp_path):
    """safetensors + sidecar (what convert_pt writes) -> taco import -> trace with per-tensor
    metadata, bits unchanged. The safetensors file is written by the same module convert_pt
    uses, so this needs no torch."""
    taco = taco_bin_with("import")
    rng = np.random.default_rng(3)
    bits = {f"rank{r}/decoder.{layer}.fc1": rng.integers(0, 2**16, (6, 8), dtype=np.uint16)
            for r in (0, 1) for layer in (1, 4)}
    for v in bits.values():
        v[(v & 0x7F80) == 0x7F80] = 0  # no NaN/Inf patterns, so values compare exactly
    st = tmp_path / "x.safetensors"
    write_safetensors(st, [(k, v, "BF16") for k, v in bits.items()], metadata={"tp_size": "2", "model": "m"})
    side = tmp_path / "x.json"
    import json
    side.write_text(json.dumps({k: {"tp_rank": k[4], "layer": re.search(r"\.(\d)\.", k).group(1), "source": "s"}
                                for k in bits}))
    out = tmp_path / "x.h5"
    r = subprocess.run([taco, "import", str(st), "--sidecar", str(side), "--out", str(out)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    meta, _ = read_safetensors(st)
    assert meta["tp_size"] == "2"
    with h5py.File(out, "r") as f:
        got = {ds.attrs["name"]: ds for ds in f["tensors"].values()}
        assert sorted(got) == sorted(bits)
        for k, ds in got.items():
            assert ds.attrs["dtype"] == "bf16" and np.array_equal(ds[()], bits[k])
            assert int(ds.attrs["tp_rank"]) == int(k[4]) and int(ds.attrs["tp_size"]) == 2
            assert int(ds.attrs["layer"]) == int(re.search(r"\.(\d)\.", k).group(1))
            assert ds.attrs["model"] == "m" and ds.attrs["extra.source"] == "s"
