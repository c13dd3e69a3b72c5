"""Structured codecs, error feedback, pareto.csv and `taco study --weights`, end to end.

Expected numbers come from NumPy alone: SVD tails (Eckart-Young), a NumPy TopK with the
documented tie rule and bf16 rounding (ml_dtypes), energies from numpy.linalg, the Pareto
front recomputed from results.csv, and TT unfolding ranks of the TT-matrix layout built with
reshape/transpose (no taco code). Wire sizes are checked against docs/structured.md.
"""
import csv
import json
import math
import os
import re
import struct
import subprocess

import h5py
import ml_dtypes
import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(taco, *args):
    return subprocess.run([taco, *map(str, args)], capture_output=True, text=True, timeout=600)


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]


def schema_columns(section):
    text = open(os.path.join(REPO, "docs", "results-schema.md"), encoding="utf-8").read()
    start = text.index(section) + len(section)
    block = re.search(r"`([^`]*)`", text[start:], re.S).group(1)
    return [c.strip() for c in block.replace("\n", " ").split(",")]


def low_rank(m, n, s, seed):
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.standard_normal((m, len(s))))
    v, _ = np.linalg.qr(rng.standard_normal((n, len(s))))
    return ((u * np.asarray(s)) @ v.T).astype(np.float32)


def bf16(x):
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


@pytest.fixture(scope="module")
def study(taco, tmp_path_factory):
    d = tmp_path_factory.mktemp("structured")
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((64, 128)) * 0.5).astype(np.float32)
    b = low_rank(48, 96, [4.0, 2.0, 1.0, 0.5], 9) + (rng.standard_normal((48, 96)) * 1e-3).astype(np.float32)
    np.save(d / "a.npy", a)
    np.save(d / "b.npy", b)
    variants = ["fp8-g128", "lowrank:rank=3:factors=f32", "lowrank:bpe=0.25", "topk:frac=0.1",
                "topk:frac=0.1:index=bitmap", "subspace:k=32:coef=f32", "subspace:k=32",
                "tt:order=3:rank=8", "randk:frac=0.25", "int4-g32"]
    out = d / "out"
    r = run(taco, "study", d / "a.npy", d / "b.npy", "--variants", ",".join(variants), "--out", out, "-q")
    assert r.returncode == 0, r.stderr
    _, rows = read_csv(out / "results.csv")
    return {"dir": d, "out": out, "x": {"a.npy": a, "b.npy": b}, "rows": rows}


def rows_of(study, variant):
    got = {}
    for r in study["rows"]:
        if r["variant"] == variant:
            got[os.path.basename(r["file"])] = r
    return got


def test_lowrank_error_is_the_svd_tail(study):
    for name, r in rows_of(study, "lowrank:rank=3:factors=f32").items():
        x = study["x"][name].astype(np.float64)
        s = np.linalg.svd(x, compute_uv=False)
        want = math.sqrt((s[3:] ** 2).sum() / (s ** 2).sum())
        assert float(r["rel_l2"]) == pytest.approx(want, rel=1e-4)
        m, n = x.shape
        assert int(r["wire_bytes"]) == 8 + (m + n) * 3 * 4
        assert r["family"] == "lowrank"


def test_lowrank_budget_rank(study):
    for name, r in rows_of(study, "lowrank:bpe=0.25").items():
        m, n = study["x"][name].shape
        r_max = max(k for k in range(1, min(m, n) + 1) if 8 + (m + n) * k * 2 <= 0.25 * m * n)
        assert int(r["wire_bytes"]) == 8 + (m + n) * r_max * 2
        assert float(r["bytes_per_elem"]) <= 0.25


def topk_oracle(x, frac):
    flat = x.ravel()
    n = flat.size
    k = min(max(int(math.floor(frac * n + 0.5)), 1), n)
    order = sorted(range(n), key=lambda i: (-abs(float(flat[i])), i))  # ties: lower index
    y = np.zeros(n, np.float32)
    keep = np.array(order[:k])
    y[keep] = bf16(flat[keep])
    return y.reshape(x.shape), k


def test_topk_matches_numpy_oracle_and_sizes(study):
    for variant, bitmap in (("topk:frac=0.1", False), ("topk:frac=0.1:index=bitmap", True)):
        for name, r in rows_of(study, variant).items():
            x = study["x"][name]
            y, k = topk_oracle(x, 0.1)
            want = np.linalg.norm((x - y).astype(np.float64)) / np.linalg.norm(x.astype(np.float64))
            assert float(r["rel_l2"]) == pytest.approx(want, rel=1e-6)
            n = x.size
            assert int(r["wire_bytes"]) == ((n + 7) // 8 + 2 * k if bitmap else 6 * k)


def test_subspace_structure_csv(study):
    _, srows = read_csv(study["out"] / "structure.csv")
    assert list(srows[0]) == schema_columns("### `DIR/structure.csv`")
    f32 = rows_of(study, "subspace:k=32:coef=f32")
    for name, x in study["x"].items():
        xd = x.astype(np.float64)
        s2 = np.linalg.svd(xd, compute_uv=False) ** 2
        row = next(r for r in srows if r["variant"] == "subspace:k=32:coef=f32" and r["rows"] == str(x.shape[0]))
        assert float(row["energy_topk"]) == pytest.approx(s2[:32].sum() / s2.sum(), rel=1e-6)
        sv = np.sqrt(s2)
        q = sv / sv.sum()
        erank = math.exp(-(q[q > 0] * np.log(q[q > 0])).sum())
        assert float(row["effective_rank"]) == pytest.approx(erank, rel=1e-6)
        # f32 coefficients: the error is the energy outside span(U).
        span = float(row["energy_span_u"])
        assert float(f32[name]["rel_l2"]) == pytest.approx(math.sqrt(1 - span), rel=1e-4)
        assert span < float(row["energy_topk"])
        # bf16 coefficients: 8 + rows k 2 bytes.
        assert int(rows_of(study, "subspace:k=32")[name]["wire_bytes"]) == 8 + x.shape[0] * 32 * 2
    # The low-rank tensor keeps nearly all its energy in its top 32; a random one does not.
    b_row = next(r for r in srows if r["rows"] == "48" and r["variant"] == "subspace:k=32")
    assert float(b_row["energy_topk"]) > 0.999


def test_pareto_front_recomputed(study):
    header, prow = read_csv(study["out"] / "pareto.csv")
    assert header[:7] == schema_columns("### `DIR/pareto.csv`")[:7]
    agg = {}
    for r in study["rows"]:
        agg.setdefault(r["variant"], []).append(r)
    pts = {}
    for v, rs in agg.items():
        pts[v] = (np.mean([float(r["bytes_per_elem"]) for r in rs]), float(np.median([float(r["rel_l2"]) for r in rs])))
    assert {r["variant"] for r in prow} == set(pts)
    for r in prow:
        b, e = pts[r["variant"]]
        assert float(r["bytes_per_elem"]) == pytest.approx(b, rel=1e-8)  # %.9g
        assert float(r["rel_l2"]) == pytest.approx(e, rel=1e-8)
        dominated = any(
            (b2 <= b and e2 <= e) and (b2 < b or e2 < e) for v2, (b2, e2) in pts.items() if v2 != r["variant"])
        assert r["on_front"] == ("0" if dominated else "1"), r["variant"]
    assert sum(r["on_front"] == "1" for r in prow) >= 2
    byts = [float(r["bytes_per_elem"]) for r in prow]
    assert byts == sorted(byts)


def write_trace(path, tensors):
    """A taco trace (traces/README.md) with h5py: tensors = [(name, array, {attrs})]."""
    with h5py.File(path, "w") as f:
        f.attrs["taco_format"] = "taco-trace"
        f.attrs["taco_format_version"] = np.int64(1)
        f.attrs["created_by"] = "test_structured_cli.py"
        g = f.create_group("tensors")
        for i, (name, x, meta) in enumerate(tensors):
            ds = g.create_dataset(f"t{i:06d}", data=x.astype(np.float32))
            ds.attrs["name"] = name
            ds.attrs["dtype"] = "f32"
            for k, v in meta.items():
                ds.attrs[k] = np.int64(v) if isinstance(v, int) else v


def meta(step, layer=0, rank=0, **extra):
    m = {"layer": layer, "site": "attn_out", "direction": "fwd", "collective": "all_reduce",
         "tp_rank": rank, "tp_size": 1, "step": step, "model": "test"}
    for k, v in extra.items():
        m[f"extra.{k}"] = v
    return m


def test_error_feedback_over_steps(taco, tmp_path):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    steps = 30
    # Steps written out of order: the study must process them in step order.
    tensors = [(f"step{s}/x", x, meta(s)) for s in reversed(range(steps))]
    write_trace(tmp_path / "t.h5", tensors)
    out = tmp_path / "out"
    r = run(taco, "study", tmp_path / "t.h5", "--variants", "int4-g32,ef:int4-g32,aqsgd:int4-g32", "--out", out, "-q")
    assert r.returncode == 0, r.stderr
    header, fb = read_csv(out / "feedback.csv")
    assert header == schema_columns("### `DIR/feedback.csv` (with `ef:` / `aqsgd:` variants)")
    ef = [row for row in fb if row["variant"] == "ef:int4-g32"]
    assert [int(row["visit"]) for row in ef] == list(range(1, steps + 1))
    assert [int(row["step"]) for row in ef] == list(range(steps))
    avg = [float(row["avg_err"]) for row in ef]
    # The time-averaged error of the decoded signal falls like 1/T (bounded residual).
    assert avg[-1] < avg[0] / 10
    res = [float(row["state_rel"]) for row in ef]
    assert max(res[steps // 2:]) <= 1.5 * max(res[: steps // 2])
    # The first EF step is the plain codec.
    _, rows = read_csv(out / "results.csv")
    plain = {row["step"]: row for row in rows if row["variant"] == "int4-g32"}
    efr = {row["step"]: row for row in rows if row["variant"] == "ef:int4-g32"}
    assert efr["0"]["rel_l2"] == plain["0"]["rel_l2"]
    assert efr["0"]["family"] == "ef"
    # No repeated samples in this trace: AQ-SGD is skipped with the reason.
    res_json = json.load(open(out / "results.json"))
    reasons = [s["reason"] for s in res_json["skipped"] if s["variant"] == "aqsgd:int4-g32"]
    assert len(reasons) == steps and all("no repeated samples" in s for s in reasons)
    # A later run into the same directory without ef:/subspace variants leaves no stale files.
    assert run(taco, "study", tmp_path / "t.h5", "--variants", "int4-g32", "--out", out, "-q").returncode == 0
    assert not (out / "feedback.csv").exists() and not (out / "structure.csv").exists()
    assert (out / "pareto.csv").exists()


def test_aqsgd_on_repeated_samples(taco, tmp_path):
    rng = np.random.default_rng(6)
    xs = [rng.standard_normal((16, 64)).astype(np.float32) for _ in range(2)]
    # One file per step, the same tensor names in each (rule 2), and a sample_id (rule 1).
    for s in range(4):
        write_trace(tmp_path / f"s{s}.h5", [("batch/a", xs[0], meta(s)),
                                            (f"s{s}/b", xs[1], meta(s, layer=1, sample_id="7"))])
    out = tmp_path / "out"
    files = [tmp_path / f"s{s}.h5" for s in range(4)]
    r = run(taco, "study", *files, "--variants", "aqsgd:int4-g32", "--out", out, "-q")
    assert r.returncode == 0, r.stderr
    _, fb = read_csv(out / "feedback.csv")
    for key_part, layer in (("name=batch/a", "0"), ("sample_id=7", "1")):
        seq = [row for row in fb if row["layer"] == layer]
        assert len(seq) == 4 and all(key_part in row["key"] for row in seq)
        errs = [float(row["rel_l2"]) for row in seq]
        assert all(b < a / 3 for a, b in zip(errs, errs[1:]))  # the cache converges to x


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        b = np.ascontiguousarray(arr, np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def balanced(n, p):
    primes, d = [], 2
    while d * d <= n:
        while n % d == 0:
            primes.append(d)
            n //= d
        d += 1
    if n > 1:
        primes.append(n)
    bins = [1] * p
    for f in sorted(primes, reverse=True):
        bins[bins.index(min(bins))] *= f
    return sorted(bins, reverse=True)


def mpo_unfolding_ranks(w, order, rtol):
    o, i = w.shape
    of, inf = balanced(o, order), balanced(i, order)
    t = w.reshape(of + inf)
    perm = [x for k in range(order) for x in (k, order + k)]
    t = t.transpose(perm).reshape([of[k] * inf[k] for k in range(order)])
    ranks = []
    for k in range(1, order):
        m = t.reshape(int(np.prod(t.shape[:k])), -1).astype(np.float64)
        s = np.linalg.svd(m, compute_uv=False)
        ranks.append(int((s > rtol * s[0]).sum()))
    return ranks


def test_weights_mode(taco, tmp_path):
    rng = np.random.default_rng(8)
    w1 = low_rank(96, 160, [5.0, 3.0, 1.0], 2)
    w2 = (rng.standard_normal((64, 48)) / 8).astype(np.float32)
    bias = rng.standard_normal(64).astype(np.float32)
    write_safetensors(tmp_path / "m.safetensors", {"w1": w1, "w2": w2, "bias": bias})
    out = tmp_path / "w"
    r = run(taco, "study", "--weights", tmp_path / "m.safetensors", "--out", out, "-q")
    assert r.returncode == 0, r.stderr
    _, spec = read_csv(out / "spectra.csv")
    header, wrows = read_csv(out / "weights.csv")
    assert header == schema_columns("- `weights.csv`: one row per (tensor, method, rank):")
    for name, w in (("w1", w1), ("w2", w2)):
        s = np.linalg.svd(w.astype(np.float64), compute_uv=False)
        got = np.array([float(x["sigma"]) for x in spec if x["tensor"] == name])
        assert got == pytest.approx(s, rel=1e-6, abs=1e-6 * s[0])
        rows = [x for x in wrows if x["tensor"] == name]
        q = s / s.sum()
        q = q[q > 0]
        assert float(rows[0]["effective_rank"]) == pytest.approx(math.exp(-(q * np.log(q)).sum()), rel=1e-5)
        assert rows[0]["tt_unfolding_ranks"] == ";".join(map(str, mpo_unfolding_ranks(w, 3, 1e-5)))
        for x in rows:
            if x["method"] == "lowrank":
                k = int(x["rank"])
                assert int(x["params"]) == k * sum(w.shape)
                assert float(x["rel_fro_err"]) == pytest.approx(
                    math.sqrt((s[k:] ** 2).sum() / (s ** 2).sum()), rel=1e-6, abs=1e-7)
            else:
                assert x["method"] == "tt"
                assert float(x["rel_fro_err"]) < 1.0
    assert not any(x["tensor"] == "bias" for x in spec)
    # The rank-3 matrix: every low-rank point at rank >= 3 is exact.
    assert all(float(x["rel_fro_err"]) < 1e-5 for x in wrows
               if x["tensor"] == "w1" and x["method"] == "lowrank" and int(x["rank"]) >= 3)


def test_bad_structured_variants_exit_2(taco, tmp_path):
    np.save(tmp_path / "x.npy", np.ones((4, 8), np.float32))
    for v, msg in (("lowrank:rank=0", "rank=0"), ("tt:order=3:rank=2:eps=0.1", "not both"),
                   ("subspace:k=4:bogus", "unknown token 'bogus'"), ("ef:ef:int4-g32", "do not nest")):
        r = run(taco, "study", tmp_path / "x.npy", "--variants", v, "--out", tmp_path / "o")
        assert r.returncode == 2, (v, r.stderr)
        assert msg in r.stderr and r.stderr.count("\n") == 1
        assert not (tmp_path / "o").exists()
    r = run(taco, "study", "--weights", tmp_path / "x.npy", "--variants", "taco", "--out", tmp_path / "o")
    assert r.returncode == 2 and "--weights" in r.stderr
