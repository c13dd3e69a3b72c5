"""`taco study` end to end, checked with tools that share no code with taco.

Inputs are made with NumPy (.npy/.npz) and h5py (a trace written as traces/README.md says).
The expected numbers come from NumPy/ml_dtypes (bf16 rounding), the NumPy TACO oracle
(taco_pyref.py, written from methods.md), hashlib (provenance) and the column lists in
docs/results-schema.md. Also: byte-identical output for any thread count, --select and
--config, simulated collectives that must be exact for a lossless case, and bad inputs (exit 2,
one line on stderr, nothing half-written).
"""
import csv
import hashlib
import json
import math
import os
import re
import subprocess

import h5py
import ml_dtypes
import numpy as np
import pytest

import taco_pyref

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(taco, *args):
    return subprocess.run([taco, *map(str, args)], capture_output=True, text=True, timeout=600)


def schema_columns(section):
    """The backticked column list that follows `section` in docs/results-schema.md."""
    text = open(os.path.join(REPO, "docs", "results-schema.md"), encoding="utf-8").read()
    start = text.index(section)
    block = re.search(r"`([^`]*)`", text[start:], re.S).group(1)
    return [c.strip() for c in block.replace("\n", " ").split(",")]


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    return header, [dict(zip(header, r)) for r in rows[1:]]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    rng = np.random.default_rng(12)
    a = (rng.standard_normal((96, 256)) * 0.02).astype(np.float32)
    a[5, 7] = 3.0  # an outlier
    b1 = (rng.laplace(size=(64, 128)) * 1e-3).astype(np.float32)
    b2 = rng.standard_normal((32, 384)).astype(np.float32)
    np.save(d / "a.npy", a)
    np.savez(d / "b.npz", first=b1, second=b2)
    return {"a": d / "a.npy", "b": d / "b.npz", "arrays": {"a": a, "first": b1, "second": b2}}


@pytest.fixture(scope="module")
def study(taco, inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("study") / "out"
    r = run(taco, "study", inputs["a"], inputs["b"], "--variants", "bf16,fp8-g128,taco", "--out", out,
            "--threads", "1", "-q")
    assert r.returncode == 0, r.stderr
    return out, r


def rel_l2(x, y):
    x = x.astype(np.float64)
    y = y.astype(np.float64)
    return float(np.sqrt(np.sum((x - y) ** 2) / np.sum(x ** 2)))


def test_results_csv_follows_the_schema(study):
    out, _ = study
    header, rows = read_csv(out / "results.csv")
    expected = schema_columns("One row per (tensor, variant):")
    assert header[: len(expected)] == expected
    assert "calc_diff" in header[len(expected):]
    assert len(rows) == 3 * 3  # 3 tensors x 3 variants
    h_header, _ = read_csv(out / "histograms.csv")
    assert h_header == ["site", "direction", "scope", "bin_lo_log2", "bin_hi_log2", "count"]


def test_groups_outside_a_codecs_range_are_counted_and_named(taco, tmp_path):
    # Rows of 1024: 8 groups of 128 each. taco clips groups of absmax 1e15 and flushes 1e-18
    # to almost zero (docs/variants.md, "Range"); fp8-g128 holds both; low rank has no range.
    x = np.random.default_rng(0).standard_normal((16, 1024)).astype(np.float32)
    x[:2] *= np.float32(1e15)
    x[2:5] *= np.float32(1e-18)
    np.save(tmp_path / "x.npy", x)
    r = run(taco, "study", tmp_path / "x.npy", "--variants", "taco,fp8-g128,lowrank:rank=2", "--out",
            tmp_path / "o", "-q")
    assert r.returncode == 0, r.stderr
    _, rows = read_csv(tmp_path / "o" / "results.csv")
    got = {row["variant"]: row for row in rows}
    assert got["taco"]["out_of_range_groups"] == "40" and float(got["taco"]["rel_l2"]) > 0.99
    assert got["fp8-g128"]["out_of_range_groups"] == "0" and float(got["fp8-g128"]["rel_l2"]) < 0.05
    assert got["lowrank:rank=2"]["out_of_range_groups"] == ""
    assert "note: taco: 40 group(s) in 1 tensor(s) lie outside the range" in r.stdout
    assert "fp8-g128:" not in r.stdout.split("site=")[0]
    rows_json = json.loads((tmp_path / "o" / "results.json").read_text())["rows"]
    assert {row["variant"]: row["out_of_range_groups"] for row in rows_json} == \
        {"taco": 40, "fp8-g128": 0, "lowrank:rank=2": None}


def test_bf16_rows_are_exact_bf16_rounding(study, inputs):
    out, _ = study
    _, rows = read_csv(out / "results.csv")
    for row in rows:
        if row["variant"] != "bf16":
            continue
        x = inputs["arrays"][row["tensor"]]
        xb = x.astype(ml_dtypes.bfloat16).astype(np.float32)  # round to nearest even
        assert float(row["rel_l2"]) == pytest.approx(rel_l2(x, xb), rel=2e-8)
        assert float(row["bytes_per_elem"]) == 2.0
        assert int(row["wire_bytes"]) == 2 * x.size
        assert float(row["compression_ratio"]) == 2.0  # fp32 input, 2-byte wire
        assert row["in_dtype"] == "f32"
        assert int(row["numel"]) == x.size
        assert row["shape"] == "[" + ", ".join(map(str, x.shape)) + "]"
        d = x.astype(np.float64) - xb
        assert float(row["max_abs_err"]) == pytest.approx(np.abs(d).max(), rel=2e-8)
        assert float(row["mse"]) == pytest.approx(np.mean(d ** 2), rel=2e-8)


def test_fp8_g128_and_taco_match_independent_numbers(study, inputs):
    out, _ = study
    _, rows = read_csv(out / "results.csv")
    seen = set()
    for row in rows:
        x = inputs["arrays"][row["tensor"]]
        if row["variant"] == "fp8-g128":
            assert float(row["bytes_per_elem"]) == 1 + 4 / 128
            assert int(row["wire_bytes"]) == x.size + 4 * (x.size // 128)
            seen.add(row["tensor"])
        elif row["variant"] == "taco":
            # The NumPy oracle of the TACO codec: same wire bytes, same reconstruction.
            wire = taco_pyref.encode(x)
            xhat = taco_pyref.decode(wire, x.size).reshape(x.shape)
            assert int(row["wire_bytes"]) == len(wire)
            assert float(row["bytes_per_elem"]) == 1 + 8 / 128
            assert float(row["rel_l2"]) == pytest.approx(rel_l2(x, xhat), rel=2e-8)
            xd, yd = x.astype(np.float64).ravel(), xhat.astype(np.float64).ravel()
            cos = xd @ yd / math.sqrt((xd @ xd) * (yd @ yd))
            assert float(row["cosine"]) == pytest.approx(cos, rel=2e-8)
            calc_diff = 1 - 2 * (xd @ yd) / (xd @ xd + yd @ yd)
            assert float(row["calc_diff"]) == pytest.approx(calc_diff, rel=1e-6)
            nz = xd != 0
            assert float(row["underflow_frac"]) == pytest.approx(np.mean(yd[nz] == 0), abs=1e-12)
    assert seen == {"a", "first", "second"}


def test_provenance_and_variants_in_results_json(study, inputs):
    out, _ = study
    j = json.load(open(out / "results.json"))
    prov = j["provenance"]
    by_path = {i["path"]: i for i in prov["inputs"]}
    for key in ("a", "b"):
        p = str(inputs[key])
        data = open(p, "rb").read()
        assert by_path[p]["sha256"] == hashlib.sha256(data).hexdigest()
        assert by_path[p]["bytes"] == len(data)
    assert prov["threads"] == 1
    assert prov["seed"] == 0
    assert "study" in prov["command"] and "--variants" in prov["command"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", prov["date"])
    assert set(j["variants"]) == {"bf16", "fp8-g128", "taco"}
    assert j["variants"]["taco"]["transform"] == "hadamard"
    assert len(j["rows"]) == 9
    header, rows = read_csv(out / "results.csv")
    for jr, cr in zip(j["rows"], rows):
        assert jr["tensor"] == cr["tensor"] and jr["variant"] == cr["variant"]
        assert jr["rel_l2"] == pytest.approx(float(cr["rel_l2"]), rel=2e-8)
        assert "calc_diff" in jr


def test_summary_ranks_variants(study):
    _, r = study
    lines = r.stdout.splitlines()
    ranked = [l.split()[1] for l in lines if re.match(r"\s+\d+\s+\S+\s+[\d.]+\s", l)]
    # bf16 loses least, then the FP8 codecs.
    assert ranked[0] == "bf16"
    assert set(ranked[:3]) == {"bf16", "fp8-g128", "taco"}


def test_output_does_not_depend_on_the_thread_count(taco, inputs, tmp_path):
    outs = []
    for threads in (1, 2):
        out = tmp_path / f"t{threads}"
        r = run(taco, "study", inputs["a"], inputs["b"], "--variants", "fp8-g128,taco,mxfp8",
                "--collectives", "one_shot,two_shot,ring", "--tp", "2,4", "--out", out,
                "--threads", threads, "-q")
        assert r.returncode == 0, r.stderr
        outs.append(out)
    for name in ("results.csv", "histograms.csv", "collectives.csv"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name


def write_trace(path, tensors):
    """A taco trace written with h5py alone (traces/README.md): f32 datasets with metadata."""
    with h5py.File(path, "w") as f:
        f.attrs["taco_format"] = "taco-trace"
        f.attrs["taco_format_version"] = np.int64(1)
        f.attrs["created_by"] = "test_study.py"
        g = f.create_group("tensors")
        for i, (meta, x) in enumerate(tensors):
            ds = g.create_dataset(f"t{i:06d}", data=x.astype("<f4"))
            ds.attrs["dtype"] = "f32"
            for k, v in meta.items():
                ds.attrs[k] = np.int64(v) if isinstance(v, int) else v


def test_collectives_are_exact_when_nothing_rounds(taco, tmp_path):
    # Even integers in [-60, 60]: every value and every partial sum of up to 4 ranks is exact in
    # bf16, so the bf16 "codec" is lossless and every algorithm must return the exact sum.
    rng = np.random.default_rng(3)
    tensors = []
    for site in ("attn_out", "mlp_out"):
        for rank in range(2):
            x = (rng.integers(-30, 31, size=(16, 256)) * 2).astype(np.float32)
            meta = dict(name=f"l0/{site}/r{rank}", layer=0, site=site, direction="fwd",
                        collective="all_reduce", tp_rank=rank, tp_size=2, step=0)
            tensors.append((meta, x))
    trace = tmp_path / "trace.h5"
    write_trace(trace, tensors)
    out = tmp_path / "coll"
    # all_gather does not take all_reduce tensors (partial sums, not shards): it says so.
    r = run(taco, "study", trace, "--variants", "bf16", "--collectives", "one_shot,all_gather", "--out", out, "-q")
    assert r.returncode == 2 and not out.exists()
    assert r.stderr.count("\n") == 1 and "--collectives all_gather: no input tensor" in r.stderr, r.stderr
    # reduce_scatter does: the same partial sums go into it under sequence parallelism.
    r = run(taco, "study", trace, "--variants", "bf16,fp8-g128", "--collectives",
            "one_shot,two_shot,ring,reduce_scatter", "--tp", "2,4", "--out", out, "-q")
    assert r.returncode == 0, r.stderr
    header, rows = read_csv(out / "collectives.csv")
    assert header[:14] == schema_columns("(layer, site, direction, step, variant, algorithm, tp_size):")[:14]
    # 2 sites x 2 variants x 4 algorithms x 2 degrees.
    assert len(rows) == 2 * 2 * 4 * 2
    quant = {"one_shot": lambda n: 1, "two_shot": lambda n: 2, "ring": lambda n: n, "reduce_scatter": lambda n: 1}
    for row in rows:
        n = int(row["tp_size"])
        assert int(row["quantizations"]) == quant[row["algorithm"]](n)
        assert int(row["trace_ranks"]) == 2
        assert int(row["numel"]) == 16 * 256
        if row["variant"] == "bf16":
            assert float(row["rel_l2"]) == 0.0, row
        else:
            assert float(row["rel_l2"]) > 0.0
    # The per-tensor rows carry the trace metadata.
    _, res = read_csv(out / "results.csv")
    assert {r["site"] for r in res} == {"attn_out", "mlp_out"}
    assert {r["tp_rank"] for r in res} == {"0", "1"}
    assert {r["collective"] for r in res} == {"all_reduce"}


def test_select_then_config(taco, inputs, tmp_path):
    out = tmp_path / "sel"
    r = run(taco, "study", inputs["a"], inputs["b"], "--select", "--budget", "1.07",
            "--candidates", "taco,taco-noh,fp8-g128,fp8-g32", "--out", out, "-q")
    assert r.returncode == 0, r.stderr
    sel = json.load(open(out / "selection.json"))
    assert sel["budget_bytes_per_elem"] == 1.07
    assert sel["candidates"] == ["taco", "taco-noh", "fp8-g128", "fp8-g32"]
    assert len(sel["choices"]) == 1  # npy/npz carry no site: one (site, direction)
    choice = sel["choices"][0]
    # fp8-g32 (1.125 B/elem) is over budget; among the rest, the lowest median wins, medians
    # within 0.1% of it tie and then the fewest bytes win (docs/study.md).
    _, rows = read_csv(out / "results.csv")
    med, bpe = {}, {}
    for v in ("taco", "taco-noh", "fp8-g128"):
        med[v] = float(np.median([float(r["rel_l2"]) for r in rows if r["variant"] == v]))
        bpe[v] = float(np.mean([float(r["bytes_per_elem"]) for r in rows if r["variant"] == v]))
    lowest = min(med.values())
    tied = [v for v in ("taco", "taco-noh", "fp8-g128") if med[v] <= lowest * (1 + 1e-3)]
    assert choice["variant"] == min(tied, key=lambda v: bpe[v])
    assert sel["tie_tolerance"] == 1e-3
    assert choice["rel_l2"] == pytest.approx(med[choice["variant"]], rel=2e-8)
    if choice["variant"] in ("taco", "taco-noh"):
        he = choice["hadamard_effect"]
        assert (he["with"], he["without"]) == ("taco", "taco-noh")
        assert he["ratio"] == pytest.approx(med["taco"] / med["taco-noh"], rel=2e-8)
    assert "Hadamard: taco vs taco-noh" in r.stdout

    applied = tmp_path / "applied"
    r = run(taco, "study", inputs["a"], "--config", out / "selection.json", "--out", applied, "-q")
    assert r.returncode == 0, r.stderr
    _, rows = read_csv(applied / "results.csv")
    assert [row["variant"] for row in rows] == [choice["variant"]]


@pytest.mark.parametrize("args, needle", [
    (["missing.npy", "--variants", "fp8-g128"], "missing.npy"),
    (["{a}", "--variants", "fp8-g128,no-such-codec"], "no-such-codec"),
    (["{a}", "--variants", "fp8-g128", "--collectives", "tree"], "--collectives"),
    (["{a}", "--variants", "fp8-g128", "--collectives", "ring", "--tp", "1"], "--tp"),
    (["{a}", "--variants", "fp8-g128", "--filter", "colour=red"], "--filter"),
    (["{a}", "--config", "{a}"], "--config"),
    (["{a}", "--select", "--budget", "-1"], "--budget"),
])
def test_bad_input_exits_2_and_writes_nothing(taco, inputs, tmp_path, args, needle):
    out = tmp_path / "out"
    args = [str(a).format(a=inputs["a"]) for a in args]
    r = run(taco, "study", *args, "--out", out, "-q")
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("taco: error:") and len(r.stderr.strip().splitlines()) == 1
    assert needle in r.stderr
    assert not out.exists() or not any(out.iterdir())


def test_truncated_input_exits_2_and_writes_nothing(taco, inputs, tmp_path):
    bad = tmp_path / "bad.npy"
    bad.write_bytes(open(inputs["a"], "rb").read()[:200])
    out = tmp_path / "out"
    r = run(taco, "study", bad, "--variants", "fp8-g128", "--out", out, "-q")
    assert r.returncode == 2, r.stderr
    assert not out.exists() or not any(out.iterdir())


def test_gpu_flag_needs_a_cuda_build(taco, inputs, tmp_path):
    r = run(taco, "study", inputs["a"], "--variants", "fp8-g128", "--gpu", "--out", tmp_path / "g", "-q")
    if r.returncode != 0:  # a CPU-only build, or a CUDA build on a machine without a GPU
        assert r.returncode == 2
        assert "--gpu" in r.stderr
        assert not (tmp_path / "g" / "results.csv").exists()
