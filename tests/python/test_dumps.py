"""Dumps as people have them: h5py files of any layout, directories of per-rank files, names from
Megatron-LM and Hugging Face, --name-map, --datasets, the source column and --filter file=, and
the semantics of stateful codecs on them (issue 30, items 2 and 3)."""
import csv
import json
import subprocess
from pathlib import Path

import h5py
import numpy as np

SAMPLES = Path(__file__).resolve().parents[2] / "traces" / "samples"


def run(taco, *args, **kw):
    return subprocess.run([str(taco), *map(str, args)], capture_output=True, text=True, timeout=600, **kw)


def rows_of(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def megatron_h5(path, steps=(100, 200), ranks=(0, 1), layers=(0, 1)):
    """Activations and gradients as a hook-based dumper writes them with h5py: one group per step
    and rank, Megatron module names, gzip chunks, plus datasets that are not tensors to study."""
    rng = np.random.default_rng(5)
    with h5py.File(path, "w") as f:
        for s in steps:
            for r in ranks:
                g = f.create_group(f"iter_{s:07d}/tp_rank_{r}")
                for l in layers:
                    for mod, what in (("self_attention.linear_proj", "output"), ("mlp.linear_fc2", "output"),
                                      ("self_attention.linear_qkv", "input_grad"), ("mlp.linear_fc1", "input_grad")):
                        g.create_dataset(f"decoder.layers.{l}.{mod}.{what}", compression="gzip", chunks=(16, 64),
                                         data=rng.standard_normal((32, 64)).astype(np.float32))
        f.create_dataset("tokens", data=np.arange(32))
        f.attrs["note"] = "not a taco trace"


def test_an_h5py_megatron_dump_studies_by_site_without_any_flags(taco, tmp_path):
    dump = tmp_path / "dump.h5"
    megatron_h5(dump)
    r = run(taco, "info", dump)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].endswith(": hdf5 (32 tensors)")
    out = tmp_path / "st"
    r = run(taco, "study", dump, "--variants", "fp8-g128", "--out", out, "-q")
    assert r.returncode == 0, r.stderr
    rows = rows_of(out / "results.csv")
    assert len(rows) == 32
    by_name = {row["tensor"]: row for row in rows}
    row = by_name["iter_0000200/tp_rank_1/decoder.layers.1.mlp.linear_fc2.output"]
    assert (row["layer"], row["site"], row["direction"], row["tp_rank"], row["step"]) == ("1", "mlp_out", "fwd", "1",
                                                                                        "200")
    row = by_name["iter_0000100/tp_rank_0/decoder.layers.0.self_attention.linear_qkv.input_grad"]
    assert (row["site"], row["direction"], row["step"]) == ("attn_qkv", "bwd", "100")
    assert {r["site"] for r in rows} == {"attn_out", "mlp_out", "attn_qkv", "mlp_fc1"}
    assert {r["source"] for r in rows} == {str(dump)}
    # The TP ranks group into collectives without any metadata in the file.
    r = run(taco, "study", dump, "--variants", "fp8-g128", "--collectives", "one_shot", "--out", out, "-q")
    assert r.returncode == 0, r.stderr
    coll = rows_of(out / "collectives.csv")
    assert len(coll) == 2 * 2 * 4 and {c["trace_ranks"] for c in coll} == {"2"}


def test_datasets_selects_hdf5_paths(taco, tmp_path):
    dump = tmp_path / "dump.h5"
    megatron_h5(dump)
    r = run(taco, "info", dump, "--datasets", "/iter_0000100/*linear_fc2*", "--rows", "0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].endswith("(4 tensors)")
    r = run(taco, "info", dump, "--datasets", "/nothing/*")
    assert r.returncode == 2 and "no float dataset matches --datasets '/nothing/*'" in r.stderr


def test_h5py_float_types_and_layouts(taco, tmp_path):
    p = tmp_path / "types.h5"
    x = np.random.default_rng(1).standard_normal((8, 16))
    with h5py.File(p, "w") as f:
        f.create_dataset("a/f16", data=x.astype(np.float16), compression="gzip", shuffle=True)
        f.create_dataset("a/f64", data=x)
        f.create_dataset("b/f32_be", data=x.astype(">f4"), chunks=(4, 16), fletcher32=True)
        bits = f.create_dataset("b/bf16_bits", data=(x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16))
        bits.attrs["dtype"] = "bf16"
        f.create_dataset("c/ints", data=np.arange(5, dtype=np.int32))
        f.create_dataset("c/plain_u16", data=np.arange(5, dtype=np.uint16))  # no dtype attribute: not a tensor
    out = tmp_path / "t.h5"
    r = run(taco, "import", p, "--out", out, "--store", "f32", "-q")
    assert r.returncode == 0, r.stderr
    with h5py.File(out) as f:
        got = {ds.attrs["name"]: ds[()] for ds in f["tensors"].values()}
    assert sorted(got) == ["a/f16", "a/f64", "b/bf16_bits", "b/f32_be"]
    np.testing.assert_array_equal(got["a/f16"], x.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(got["a/f64"], x.astype(np.float32))
    np.testing.assert_array_equal(got["b/f32_be"], x.astype(np.float32))
    bf = ((x.astype(np.float32).view(np.uint32) >> 16) << 16).view(np.float32)
    np.testing.assert_array_equal(got["b/bf16_bits"], bf)


def save_safetensors(tensors, path):
    """The safetensors layout, written here (the package is not a dependency)."""
    import struct
    header, data = {}, b""
    for name, x in tensors.items():
        raw = np.ascontiguousarray(x, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(x.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    Path(path).write_bytes(struct.pack("<Q", len(text)) + text + data)


def hf_rank_dirs(root, ranks=(0, 1), layers=(0, 1, 2)):
    """One safetensors file per rank in rank<N>/ directories, Hugging Face Llama names."""
    rng = np.random.default_rng(7)
    for r in ranks:
        d = root / f"rank{r}"
        d.mkdir(parents=True)
        tensors = {}
        for l in layers:
            tensors[f"model.layers.{l}.self_attn.o_proj.output"] = rng.standard_normal((16, 64)).astype(np.float32)
            tensors[f"model.layers.{l}.mlp.down_proj.output"] = rng.standard_normal((16, 64)).astype(np.float32)
        save_safetensors(tensors, d / "step_000571.safetensors")
    (root / "README.txt").write_text("not a tensor file")


def test_a_directory_of_hf_rank_files(taco, tmp_path):
    root = tmp_path / "dump"
    hf_rank_dirs(root)
    out = tmp_path / "st"
    r = run(taco, "study", root, "--variants", "fp8-g128", "--collectives", "one_shot,reduce_scatter", "--out", out,
            "-q")
    assert r.returncode == 0, r.stderr
    rows = rows_of(out / "results.csv")
    assert len(rows) == 2 * 3 * 2
    assert {r["tp_rank"] for r in rows} == {"0", "1"}  # from the directory names
    assert {r["step"] for r in rows} == {"571"}  # from the file names
    assert {r["site"] for r in rows} == {"attn_out", "mlp_out"}
    assert {r["source"] for r in rows} == {str(root)}
    assert {Path(r["file"]).parent.name for r in rows} == {"rank0", "rank1"}
    coll = rows_of(out / "collectives.csv")
    assert {c["algorithm"] for c in coll} == {"one_shot", "reduce_scatter"}
    assert len(coll) == 3 * 2 * 2
    # import takes the directory too.
    r = run(taco, "import", root, "--out", tmp_path / "t.h5", "--prefix-file-names")
    assert r.returncode == 0, r.stderr


def test_name_map_overrides_the_rules(taco, tmp_path):
    p = tmp_path / "odd.npz"
    rng = np.random.default_rng(2)
    np.savez(p, **{f"blk{l}_{s}_{d}_gpu{r}": rng.standard_normal((8, 32)).astype(np.float32)
                   for l in range(2) for s in ("attnproj", "ffnout") for d in ("F", "B") for r in range(2)})
    r = run(taco, "info", p, "--json")
    assert all(t["site"] == "" for t in json.loads(r.stdout))  # the rules cannot read these names
    nm = r"^blk(?P<layer>\d+)_(?P<site>\w+?)_(?P<direction>[FB])_gpu(?P<rank>\d+)$"
    r = run(taco, "info", p, "--json", "--name-map", nm)
    assert r.returncode == 0, r.stderr
    ts = {t["name"]: t for t in json.loads(r.stdout)}
    t = ts["blk1_ffnout_B_gpu1"]
    assert (t["layer"], t["site"], t["direction"], t["tp_rank"]) == (1, "ffnout", "B", 1)
    bad = run(taco, "info", p, "--name-map", "(?P<color>x)")
    assert bad.returncode == 2 and "unknown group name 'color'" in bad.stderr


def test_source_column_and_filter_file_keep_inputs_apart(taco, tmp_path):
    synth = tmp_path / "synth.h5"
    assert run(taco, "synth", "--out", synth, "--hidden", "128", "--tokens", "64", "--layers", "1", "-q").returncode == 0
    real = SAMPLES / "gpt6l512-tp2-step000030.h5"
    out = tmp_path / "st"
    r = run(taco, "study", synth, real, "--variants", "fp8-g128", "--out", out, "-q")
    assert r.returncode == 0, r.stderr
    assert "pool 2 inputs, synthetic and real data mixed" in r.stdout and "(synthetic)" in r.stdout
    rows = rows_of(out / "results.csv")
    assert {r["source"] for r in rows} == {str(synth), str(real)}
    r = run(taco, "study", synth, real, "--variants", "fp8-g128", "--filter", f"file={real.name}", "--out", out, "-q")
    assert r.returncode == 0, r.stderr
    assert "pool" not in r.stdout
    assert {r["source"] for r in rows_of(out / "results.csv")} == {str(real)}


def test_error_feedback_on_unrelated_tensors_is_the_plain_codec(taco, tmp_path):
    """Issue 30: ef:int4-g32 on 24 unrelated real tensors once reported a median rel_l2 of 46.6
    (they shared one residual). Without a stream identity each tensor is its own stream."""
    with h5py.File(SAMPLES / "gpt6l512-tp2-step000030.h5") as f:
        xs = {f"tensor{i}": (ds[()].astype(np.uint32) << 16).view(np.float32)
              for i, ds in enumerate(f["tensors"].values())}
    p = tmp_path / "anon.npz"
    np.savez(p, **xs)
    out = tmp_path / "st"
    r = run(taco, "study", p, "--variants", "int4-g32,ef:int4-g32", "--out", out, "-q")
    assert r.returncode == 0, r.stderr
    rows = rows_of(out / "results.csv")
    plain = {r["tensor"]: r["rel_l2"] for r in rows if r["variant"] == "int4-g32"}
    ef = {r["tensor"]: r["rel_l2"] for r in rows if r["variant"] == "ef:int4-g32"}
    assert len(ef) == 24 and ef == plain
    assert max(float(v) for v in ef.values()) < 0.2
    fb = rows_of(out / "feedback.csv")
    assert {r["key"] for r in fb} == {f"name=tensor{i}" for i in range(24)}


def test_aqsgd_runs_on_synth_with_samples(taco, tmp_path):
    trace = tmp_path / "epochs.h5"
    r = run(taco, "synth", "--out", trace, "--hidden", "128", "--tokens", "64", "--layers", "1", "--steps", "0,1,2,3",
            "--samples", "2", "--sites", "attn_out", "--directions", "fwd", "-q")
    assert r.returncode == 0, r.stderr
    with h5py.File(trace) as f:
        ids = sorted((int(ds.attrs["step"]), ds.attrs["extra.sample_id"]) for ds in f["tensors"].values())
    assert ids == [(0, "0"), (0, "0"), (1, "1"), (1, "1"), (2, "0"), (2, "0"), (3, "1"), (3, "1")]
    out = tmp_path / "st"
    r = run(taco, "study", trace, "--variants", "int4-g32,aqsgd:int4-g32", "--out", out, "-q")
    assert r.returncode == 0, r.stderr
    fb = rows_of(out / "feedback.csv")
    assert len(fb) == 8 and {r["family"] for r in fb} == {"aqsgd"}
    plain = {r["tensor"]: float(r["rel_l2"]) for r in rows_of(out / "results.csv") if r["variant"] == "int4-g32"}
    for row in fb:
        if row["visit"] == "2":  # the second visit of a sample sends a small delta
            assert float(row["rel_l2"]) < plain[row["tensor"]] / 2
    # Without --samples nothing repeats, and the study says why.
    r = run(taco, "synth", "--out", trace, "--hidden", "128", "--tokens", "64", "--layers", "1", "--steps", "0,1",
            "-q")
    r = run(taco, "study", trace, "--variants", "aqsgd:int4-g32", "--out", out, "-q")
    assert r.returncode == 2 and "no tensor was measured" in r.stderr
