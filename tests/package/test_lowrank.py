"""The low-rank (PowerSGD-style) all-reduce, `powersgd:r<R>` (taco.lowrank through taco.dist):
against an independent float64 computation, exact on inputs of rank <= R, the error-feedback
identity, one warm start per stream, the wire bytes, simulated ranks against gloo processes bit for
bit, the trainer with it (and a quantizer on the backward), and bad spellings in one line."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import taco.dist as td
import taco.lowrank as lr
import taco.tp as T
from taco.errors import TacoInputError

from conftest import REPO


def inputs(n, shape, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(shape, generator=g) * (1 + r)).to(dtype) for r in range(n)]


def bits(t):
    return t.contiguous().view(torch.int32 if t.dtype == torch.float32 else torch.int16)


def orthonormal(a):
    return np.linalg.qr(a, mode="reduced")[0]


def reference(ms, q):
    """One PowerSGD round in float64, written from the paper: P = sum M_r Q, P^ = orth(P),
    Q' = sum M_r^T P^, out = P^ Q'^T. Returns (out, Q')."""
    p = sum(m @ q for m in ms)
    p_hat = orthonormal(p)
    q2 = sum(m.T @ p_hat for m in ms)
    return p_hat @ q2.T, q2


def rel(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b))


# ---- the spelling -----------------------------------------------------------------------------------

def test_spellings_parse_once_into_a_spec_and_print_canonically():
    assert lr.spec_of("powersgd:r8") == lr.LowRank(8, False, "bf16")
    assert lr.spec_of("ef:powersgd:r16") == lr.LowRank(16, True, "bf16")
    assert lr.spec_of("ef:powersgd:r4:fp32") == lr.LowRank(4, True, "fp32")
    assert lr.spec_of("powersgd:r4:fp32").name == "powersgd:r4:fp32"
    assert str(lr.spec_of("ef:powersgd:r32")) == "ef:powersgd:r32"
    assert lr.spec_of("ef:int4-g32") is None
    assert lr.spec_of("taco") is None and lr.spec_of(None) is None and lr.spec_of("none") is None
    spec = lr.LowRank(8)
    assert lr.spec_of(spec) is spec
    comp = T.Compression("powersgd:r8")  # parsed where the variant is read: the sites get the spec
    assert comp.variant_for("attn_out", "fwd") == spec
    assert comp.describe()["default"] == "powersgd:r8"


@pytest.mark.parametrize("text, needle", [
    ("powersgd", "the rank is missing"),
    ("powersgd:r0", "the rank must be at least 1, got 0"),
    ("powersgd:r", "r<R> with R a positive integer"),
    ("powersgd:r2.5", "r<R> with R a positive integer"),
    ("powersgd:8", "r<R> with R a positive integer"),
    ("powersgd:r-1", "r<R> with R a positive integer"),
    ("powersgd:r4:fast", "unknown option 'fast'"),
    ("powersgd:r4:fp32:fp32", "option 'fp32' given twice"),
    ("powersgd:r4:bf16:fp32", "give one factor dtype"),
    ("ef:powersgd:r4:noef", "unknown option 'noef'"),
    ("ef:powersgd", "the rank is missing"),
])
def test_bad_spellings_are_one_line(text, needle):
    with pytest.raises(TacoInputError) as ex:
        T.Compression(text)
    msg = str(ex.value)
    assert needle in msg and "\n" not in msg, msg


def test_only_all_reduce_takes_it():
    xs = inputs(2, (8, 16), 0)
    g, fb = td.SimGroup(2), td.Feedback()
    for call, kind in [(lambda: g.reduce_scatter(xs, "powersgd:r2", feedback=fb, key="k"), "reduce_scatter"),
                       (lambda: g.all_gather(xs, lr.LowRank(2), feedback=fb, key="k"), "all_gather"),
                       (lambda: td.wire_bytes_sent(xs[0], "powersgd:r2", "all_gather", 2), "all_gather"),
                       (lambda: td.LoopbackGroup(2).reduce_scatter(xs[:1], "powersgd:r2"), "reduce_scatter")]:
        with pytest.raises(TacoInputError, match=f"powersgd:r2 is a low-rank all-reduce: {kind}"):
            call()
    with pytest.raises(ValueError, match="pass a taco.dist.Feedback"):
        g.all_reduce(xs, "powersgd:r2")
    with pytest.raises(TacoInputError, match=r"rank 9 exceeds the message's smaller side \(a \[8, 16\] message\)"):
        g.all_reduce(xs, "powersgd:r9", feedback=fb, key="k")


# ---- the numbers --------------------------------------------------------------------------------------

@pytest.mark.parametrize("factors, tol", [("fp32", 2e-5), ("bf16", 2e-2)])
def test_one_call_equals_the_float64_reference(factors, tol):
    """Tolerance: fp32 arithmetic (GEMMs, QR) against float64: 2e-5 relative (Frobenius); bf16
    factors round P_r and Q_r to 8 bits of mantissa: 2e-2."""
    n, rows, cols, rank = 3, 48, 40, 4
    xs = inputs(n, (rows, cols), 11)
    q0 = orthonormal(np.random.default_rng(5).standard_normal((cols, rank)))
    fb = td.Feedback()
    fb.warm["s"] = torch.from_numpy(q0).float()  # the test's own warm start
    out = td.SimGroup(n).all_reduce(xs, f"powersgd:r{rank}:{factors}", feedback=fb, key="s")
    want, q2 = reference([x.double().numpy() for x in xs], q0)
    assert all(o is out[0] for o in out)
    assert rel(out[0].numpy(), want) < tol
    assert 0.05 < rel(np.zeros_like(want), want - sum(x.double().numpy() for x in xs))  # lossy: not the sum
    # the next warm start spans Q' (orthonormal columns)
    w = fb.warm["s"].double().numpy()
    assert np.allclose(w.T @ w, np.eye(rank), atol=1e-5)
    assert rel(w @ (w.T @ q2), q2) < tol


def test_inputs_of_rank_at_most_r_come_back_exactly():
    """Each rank's partial has rank 2, the sum rank 4 = R: span(P^) holds it from the first call,
    so the result is the sum to fp32 rounding (fp32 factors; 1e-5 relative) on every call."""
    n, rows, cols, rank = 2, 64, 48, 4
    g = torch.Generator().manual_seed(3)
    us = [torch.randn(rows, 2, generator=g) for _ in range(n)]
    fb = td.Feedback()
    for call in range(3):
        xs = [u @ torch.randn(2, cols, generator=g) for u in us]
        exact = (xs[0].double() + xs[1].double()).numpy()
        out = td.SimGroup(n).all_reduce(xs, f"powersgd:r{rank}:fp32", feedback=fb, key="k")[0]
        assert rel(out.numpy(), exact) < 1e-5, call
    # bf16 factors: the factors' rounding only (about 2^-9 relative)
    fb = td.Feedback()
    for call in range(3):
        xs = [u @ torch.randn(2, cols, generator=g) for u in us]
        exact = (xs[0].double() + xs[1].double()).numpy()
        out = td.SimGroup(n).all_reduce(xs, f"powersgd:r{rank}", feedback=fb, key="k")[0]
        assert rel(out.numpy(), exact) < 1e-2, call


def test_a_fixed_low_rank_signal_is_found_by_the_warm_start():
    """The same rank-4 matrix plus small noise on every call: subspace iteration from the warm
    start locks onto it, so the error falls to the noise's level within a few calls."""
    n, rows, cols, rank = 2, 96, 64, 4
    g = torch.Generator().manual_seed(8)
    sig = [torch.randn(rows, rank, generator=g) @ torch.randn(rank, cols, generator=g) for _ in range(n)]
    fb, errs = td.Feedback(), []
    for call in range(6):
        xs = [s + 1e-4 * torch.randn(rows, cols, generator=g) for s in sig]
        exact = (xs[0].double() + xs[1].double()).numpy()
        out = td.SimGroup(n).all_reduce(xs, "powersgd:r8:fp32", feedback=fb, key="k")[0]
        errs.append(rel(out.numpy(), exact))
    assert errs[-1] < 1e-4, errs


@pytest.mark.parametrize("variant", ["ef:powersgd:r4", "ef:powersgd:r4:fp32"])
def test_error_feedback_telescopes(variant):
    """sum of what was delivered + the ranks' residuals = sum of the inputs, after every call
    (the residual keeps what the factors, including their rounding, did not carry)."""
    n, rows, cols, calls = 3, 32, 24, 5
    fb, g = td.Feedback(), td.SimGroup(n)
    delivered = np.zeros((rows, cols))
    sent = np.zeros((rows, cols))
    for k in range(calls):
        xs = inputs(n, (rows, cols), 100 + k)
        delivered += g.all_reduce(xs, variant, feedback=fb, key="k")[0].double().numpy()
        sent += sum(x.double().numpy() for x in xs)
        residual = sum(fb.residuals[("k", r, "lowrank")].double().numpy().reshape(rows, cols) for r in range(n))
        assert rel(delivered + residual, sent) < 1e-5, k
        assert rel(delivered, sent) > 1e-2  # rank 4 of 24 columns: far from the sum itself
    assert set(fb.residuals) == {("k", r, "lowrank") for r in range(n)}
    # without ef: no residual, the warm start only
    fb2 = td.Feedback()
    g.all_reduce(inputs(n, (rows, cols), 0), "powersgd:r4", feedback=fb2, key="k")
    assert not fb2.residuals and set(fb2.warm) == {"k"}


def test_each_stream_keeps_its_own_warm_start():
    n, shape = 2, (40, 32)
    g = td.SimGroup(n)
    a = [inputs(n, shape, 1), inputs(n, shape, 2)]
    b = inputs(n, shape, 3)
    alone = td.Feedback()  # stream A twice
    first = g.all_reduce(a[0], "powersgd:r4", feedback=alone, key=(0, "attn_out", "fwd"))[0]
    second = g.all_reduce(a[1], "powersgd:r4", feedback=alone, key=(0, "attn_out", "fwd"))[0]
    mixed = td.Feedback()  # stream A, then another layer's stream B, then A again
    assert torch.equal(g.all_reduce(a[0], "powersgd:r4", feedback=mixed, key=(0, "attn_out", "fwd"))[0], first)
    g.all_reduce(b, "powersgd:r4", feedback=mixed, key=(1, "attn_out", "fwd"))
    assert torch.equal(g.all_reduce(a[1], "powersgd:r4", feedback=mixed, key=(0, "attn_out", "fwd"))[0], second)
    assert set(mixed.warm) == {(0, "attn_out", "fwd"), (1, "attn_out", "fwd")}
    assert not torch.equal(mixed.warm[(0, "attn_out", "fwd")], mixed.warm[(1, "attn_out", "fwd")])
    # the first warm starts differ per stream too (seeded by the key), and repeat across Feedbacks
    fresh = td.Feedback()
    q0 = lr.warm_start(fresh.warm, (0, "attn_out", "fwd"), 32, 4, "cpu")
    q1 = lr.warm_start(fresh.warm, (1, "attn_out", "fwd"), 32, 4, "cpu")
    assert not torch.equal(q0, q1)
    assert torch.equal(q0, lr.warm_start({}, (0, "attn_out", "fwd"), 32, 4, "cpu"))


def test_bf16_messages_and_tp_collective_accounting():
    """TP.collective: one stream per layer, the result in the input's dtype, and the wire bytes
    2 (rows + cols) R per rank per message, counted independently here."""
    n, seq, batch, hidden, rank = 2, 16, 3, 64, 8
    comp = T.Compression("powersgd:r8")
    tp = T.TP.simulated(n, comp)
    for layer in (0, 1):
        xs = inputs(n, (seq, batch, hidden), 20 + layer, torch.bfloat16)
        out = tp.collective("all_reduce", xs, layer, "attn_out", "fwd")
        assert out[0].dtype == torch.bfloat16 and out[0].shape == (seq, batch, hidden)
    assert set(comp.feedback.warm) == {(0, "attn_out", "fwd"), (1, "attn_out", "fwd")}
    per_message = 2 * (seq * batch * rank + hidden * rank)
    assert comp.wire_bytes[("attn_out", "fwd")] == 2 * per_message
    assert comp.elements[("attn_out", "fwd")] == 2 * seq * batch * hidden
    x = torch.zeros(512, 32, 768)
    assert td.wire_bytes_sent(x, "powersgd:r8", "all_reduce", 4) == 2 * (512 * 32 + 768) * 8
    assert td.wire_bytes_sent(x, "powersgd:r8:fp32", "all_reduce", 4) == 4 * (512 * 32 + 768) * 8
    # loopback (one rank's work, peers' factors copies of its own): runs, same shapes
    lb = T.TP.loopback(4, T.Compression("powersgd:r4"))
    assert lb.collective("all_reduce", xs[:1], 0, "mlp_out", "fwd")[0].shape == xs[0].shape


def test_per_direction_mix():
    comp = T.Compression("powersgd:r8")
    comp.set_direction("bwd", "int4-g32-had")
    assert comp.variant_for("mlp_out", "fwd") == lr.LowRank(8)
    assert comp.variant_for("attn_qkv", "bwd") == "int4-g32-had"
    assert comp.lowrank_specs() == {lr.LowRank(8)}
    d = comp.describe()
    assert d["default"] == "powersgd:r8" and d["per_site"]["mlp_fc1.bwd"] == "int4-g32-had"
    with pytest.raises(TacoInputError, match="unknown direction"):
        comp.set_direction("up", "taco")


# ---- simulated ranks == gloo processes ------------------------------------------------------------------

CASES = [("ef:powersgd:r4", (24, 40), torch.float32), ("ef:powersgd:r8", (6, 4, 32), torch.bfloat16),
         ("powersgd:r3:fp32", (20, 16), torch.float32)]


def _worker(rank, n, store, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=n)
    fb, res = td.Feedback(), {}
    for step in range(3):
        for i, (variant, shape, dtype) in enumerate(CASES):
            x = inputs(n, shape, 50 * step + i, dtype)[rank]
            res[(step, i)] = td.all_reduce(x, variant, "auto", None, feedback=fb, key=("layer", i))
    res["residual"] = fb.residuals[(("layer", 0), rank, "lowrank")].clone()
    torch.save(res, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


def test_gloo_processes_equal_the_simulated_group_bit_for_bit(tmp_path):
    """fp32 on the CPU with one thread per process: the same GEMMs and QR on the same bits in the
    same order, so the results (and residuals) are bit for bit equal over three calls."""
    n = 2
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(_worker, args=(n, str(tmp_path / "store"), str(tmp_path)), nprocs=n, join=True)
    got = [torch.load(tmp_path / f"rank{r}.pt") for r in range(n)]
    torch.set_num_threads(1)
    g, fb = td.SimGroup(n), td.Feedback()
    for step in range(3):
        for i, (variant, shape, dtype) in enumerate(CASES):
            want = g.all_reduce(inputs(n, shape, 50 * step + i, dtype), variant, feedback=fb, key=("layer", i))
            for r in range(n):
                assert got[r][(step, i)].dtype == dtype and got[r][(step, i)].shape == shape
                assert torch.equal(bits(got[r][(step, i)]), bits(want[r])), (step, variant, r)
    for r in range(n):
        assert torch.equal(bits(got[r]["residual"]), bits(fb.residuals[(("layer", 0), r, "lowrank")]))


# ---- the trainer ------------------------------------------------------------------------------------

TINY = ["--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--seq", "32", "--batch", "4",
        "--steps", "4", "--eval-every", "2", "--eval-batches", "2", "--log-every", "1", "--data", str(REPO / "python"),
        "--data-bytes", "200000", "--threads", "1", "--device", "cpu"]
TOKENS, HIDDEN = 4 * 32, 64


def train(tmp_path, name, *args, check=True):
    out = tmp_path / name
    r = subprocess.run([sys.executable, "-m", "taco.train", *TINY, *args, "--out", str(out)], capture_output=True,
                       text=True, env=dict(os.environ), timeout=600)
    if check:
        assert r.returncode == 0, r.stderr[-3000:]
    return r, out


def records(out, kind):
    recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [r for r in recs if r["type"] == kind]


def test_trainer_runs_powersgd_and_counts_its_bytes(tmp_path):
    _, out = train(tmp_path, "lr", "--tp-sim", "2", "--compress", "powersgd:r4", "--sample-every", "2")
    log = json.loads((out / "train_log.json").read_text())
    assert log["variant"] == "powersgd:r4" and log["compression"]["default"] == "powersgd:r4"
    fired = {(f["site"], f["direction"], f["collective"]): f["calls"] for f in log["fired"]}
    assert fired == {("attn_qkv", "bwd", "all_reduce"): 8, ("mlp_fc1", "bwd", "all_reduce"): 8,
                     ("attn_out", "fwd", "all_reduce"): 8, ("mlp_out", "fwd", "all_reduce"): 8}  # 4 steps x 2 layers
    bpe = 2 * 4 * (TOKENS + HIDDEN) / (TOKENS * HIDDEN)  # 0.1875
    for t in log["traffic"]:
        assert t["wire_bytes"] == 8 * 2 * 4 * (TOKENS + HIDDEN) and t["elements"] == 8 * TOKENS * HIDDEN, t
        assert t["bytes_per_element"] == pytest.approx(bpe), t
    assert log["wire_bytes_per_element"] == pytest.approx(bpe)
    steps = records(out, "step")
    assert all(np.isfinite(r["loss"]) and r["wire_bytes_per_element"] == pytest.approx(bpe) for r in steps)
    assert np.isfinite(log["final_val_loss"])
    errs = records(out, "error")
    assert errs and all(0 < e["rel_l2"] < 2 for e in errs)


def test_trainer_mixes_powersgd_forward_with_a_quantized_backward(tmp_path):
    _, out = train(tmp_path, "mix", "--tp-sim", "2", "--compress", "powersgd:r4", "--compress-bwd", "int4-g32-had")
    log = json.loads((out / "train_log.json").read_text())
    assert log["variant"] == "powersgd:r4@bwd=int4-g32-had"
    assert log["compression"]["per_site"]["attn_qkv.bwd"] == "int4-g32-had"
    traffic = {(t["site"], t["direction"]): t["bytes_per_element"] for t in log["traffic"]}
    fwd = 2 * 4 * (TOKENS + HIDDEN) / (TOKENS * HIDDEN)
    assert traffic[("attn_out", "fwd")] == pytest.approx(fwd) and traffic[("mlp_out", "fwd")] == pytest.approx(fwd)
    assert traffic[("attn_qkv", "bwd")] == pytest.approx(0.625) and traffic[("mlp_fc1", "bwd")] == pytest.approx(0.625)
    assert log["wire_bytes_per_element"] == pytest.approx((fwd + 0.625) / 2)
    assert np.isfinite(log["final_train_loss"]) and np.isfinite(log["final_val_loss"])
    # and the other way round: a codec forward, plain backward
    _, out = train(tmp_path, "fwdonly", "--tp-sim", "2", "--compress", "taco", "--compress-bwd", "none")
    traffic = {(t["site"], t["direction"]): t["bytes_per_element"] for t in
               json.loads((out / "train_log.json").read_text())["traffic"]}
    assert traffic[("attn_qkv", "bwd")] == 4 and traffic[("attn_out", "fwd")] == pytest.approx(1.0625)  # fp32 plain


def test_trainer_simulated_equals_gloo_processes(tmp_path):
    args = ["--compress", "ef:powersgd:r4"]
    _, sim = train(tmp_path, "sim", "--tp-sim", "2", *args)
    _, real = train(tmp_path, "real", "--tp", "2", *args)
    assert [(r["step"], r["loss"]) for r in records(sim, "step")] == [(r["step"], r["loss"]) for r in records(real, "step")]
    assert [r["val_loss"] for r in records(sim, "val")] == [r["val_loss"] for r in records(real, "val")]


@pytest.mark.parametrize("args, needle", [
    (["--compress", "powersgd:r0"], "variant 'powersgd:r0': the rank must be at least 1, got 0"),
    (["--compress", "powersgd:r4:fast"], "unknown option 'fast'"),
    (["--compress", "ef:powersgd:r4:noef"], "unknown option 'noef'"),
    (["--compress", "powersgd:r65"], "rank 65 exceeds the message's smaller side (a [128, 64] message)"),
    (["--compress", "taco", "--compress-bwd", "powersgd:rx"], "--compress-bwd: variant 'powersgd:rx'"),
    (["--compress", "powersgd:r4", "--sp"], "powersgd is a low-rank all-reduce: --sp"),
    (["--compress-bwd", "tacco"], "--compress-bwd: "),
])
def test_bad_powersgd_configurations_exit_2_with_one_line(tmp_path, args, needle):
    r, out = train(tmp_path, "bad", "--tp-sim", "2", *args, check=False)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("taco: error:") and needle in r.stderr, r.stderr
    assert not (out / "train_log.json").exists()
