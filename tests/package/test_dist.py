"""taco.dist: the simulated group reproduces the study's collective simulation (C++,
collectives/sim_collectives) bit for bit, and real gloo process groups of 2 and 4 ranks reproduce the
simulated group bit for bit, for every algorithm, with and without error feedback."""
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import taco.dist as td
from taco import _C

VARIANTS = ["taco", "fp8-g128", "int4-g32", "mxfp8", "bf16"]
SHAPES = [(8, 256), (5, 96)]  # rows divisible by N (row blocks) and not (flat chunks)


def inputs(n, shape, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(shape, generator=g) * (1 + r)).to(dtype) for r in range(n)]


def bits(t):
    return t.contiguous().view(torch.int32 if t.dtype == torch.float32 else torch.int16)


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", SHAPES)
def test_sim_group_equals_the_study_simulation(n, variant, shape):
    xs = inputs(n, shape, seed=n * 31 + len(variant))
    rows, cols = shape[0], shape[1]
    flat = [x.numpy().reshape(-1) for x in xs]
    g = td.SimGroup(n)
    for algo in ("one_shot", "two_shot", "ring"):
        want = _C.simulate_collective(variant, algo, flat, rows, cols)
        got = g.all_reduce(xs, variant, algo)
        for r in range(n):
            assert torch.equal(bits(got[r].reshape(-1)), bits(torch.from_numpy(want[r]))), (algo, r)
    if rows * cols % n:  # shards would differ in size: refused (test_sim_errors_are_one_clear_line)
        with pytest.raises(ValueError, match="equal shards"):
            g.reduce_scatter(xs, variant)
    else:
        want = _C.simulate_collective(variant, "reduce_scatter", flat, rows, cols)
        got = g.reduce_scatter(xs, variant)
        for r in range(n):
            assert torch.equal(bits(got[r].reshape(-1)), bits(torch.from_numpy(want[r]))), ("rs", r)
    want = _C.simulate_collective(variant, "all_gather", flat, rows, cols)
    got = g.all_gather(xs, variant)
    assert got[0].shape == (n * rows, cols)
    assert torch.equal(bits(got[0].reshape(-1)), bits(torch.from_numpy(want[0])))


def test_sim_group_in_bf16_rounds_the_float32_result_once():
    xs = inputs(4, (8, 256), 5, torch.bfloat16)
    want = _C.simulate_collective("taco", "two_shot", [x.float().numpy().reshape(-1) for x in xs], 8, 256)[0]
    got = td.SimGroup(4).all_reduce(xs, "taco", "two_shot")[0]
    assert torch.equal(bits(got.reshape(-1)), bits(torch.from_numpy(want).to(torch.bfloat16)))


def test_plain_and_lossless_bf16_match_the_exact_sum_for_bf16_partials():
    xs = inputs(2, (8, 256), 9, torch.bfloat16)
    g = td.SimGroup(2)
    plain = g.all_reduce(xs, None)[0]
    assert torch.equal(plain, (xs[0].float() + xs[1].float()).to(torch.bfloat16))
    for algo in ("one_shot", "two_shot", "ring"):
        assert torch.equal(g.all_reduce(xs, "bf16", algo)[0], plain)


def test_auto_algorithm_follows_taco_comm():
    assert td.auto_algo(64 << 20, 2) == "one_shot"
    assert td.auto_algo(512 << 10, 4) == "one_shot"
    assert td.auto_algo(8 << 20, 4) == "two_shot"
    assert td.auto_algo(64 << 20, 8) == "ring"


def test_sim_errors_are_one_clear_line():
    g = td.SimGroup(2)
    for bad, exc, needle in [
        (lambda: g.all_reduce(inputs(3, (4, 8), 0), "taco"), ValueError, "3 tensors for a group of 2"),
        (lambda: g.all_reduce(inputs(2, (4, 8), 0), "taco", "tree"), ValueError, "unknown all-reduce algorithm"),
        (lambda: g.all_reduce(inputs(2, (4, 8), 0), "taco9"), ValueError, "taco9"),
        (lambda: g.all_reduce(inputs(2, (4, 8), 0), "ef:int4-g32"), ValueError, "Feedback"),
        (lambda: g.all_reduce([torch.ones(4, 8), torch.ones(4, 9)], "taco"), ValueError, "differ"),
        (lambda: td.SimGroup(0), ValueError, "at least 1 rank"),
        # a reduce-scatter's shards are equal: 10 elements do not split 3 ways (plain or compressed)
        (lambda: td.SimGroup(3).reduce_scatter([torch.ones(10)] * 3, "taco"), ValueError,
         "10 elements do not split into 3 equal shards"),
        (lambda: td.SimGroup(3).reduce_scatter([torch.ones(2, 5)] * 3), ValueError,
         "10 elements do not split into 3 equal shards"),
        (lambda: td.LoopbackGroup(3).reduce_scatter([torch.ones(10)]), ValueError, "3 equal shards"),
    ]:
        with pytest.raises(exc) as ei:
            bad()
        assert needle in str(ei.value) and "\n" not in str(ei.value)


# ---- real process groups (gloo) against the simulated group -------------------------------------------

def cases(n):
    """(name, function of (rank-local call, simulated call))."""
    out = []
    for variant in VARIANTS + [None]:
        for shape in SHAPES:
            for dtype in (torch.float32, torch.bfloat16):
                seed = len(out) + 100 * n
                for algo in ("one_shot", "two_shot", "ring"):
                    out.append(("all_reduce", variant, algo, shape, dtype, seed))
                out.append(("reduce_scatter", variant, None, shape, dtype, seed))
                out.append(("all_gather", variant, None, shape, dtype, seed))
    return out


def run_case(kind, variant, algo, x, group, feedback=None, key=None):
    kw = {"feedback": feedback, "key": key} if feedback is not None else {}
    if kind == "all_reduce":
        return td.all_reduce(x, variant, algo, group, **kw)
    return getattr(td, kind)(x, variant, group, **kw)


def sim_case(kind, variant, algo, xs, g, feedback=None, key=None):
    kw = {"feedback": feedback, "key": key} if feedback is not None else {}
    if kind == "all_reduce":
        return g.all_reduce(xs, variant, algo, **kw)
    return getattr(g, kind)(xs, variant, **kw)


def _worker(rank, n, store, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=n)
    res = {}
    for i, (kind, variant, algo, shape, dtype, seed) in enumerate(cases(n)):
        x = inputs(n, shape, seed, dtype)[rank]
        res[i] = run_case(kind, variant, algo, x, None)
    fb = td.Feedback()  # error feedback across three steps of every algorithm
    for step in range(3):
        for algo in ("one_shot", "two_shot", "ring"):
            x = inputs(n, (6, 64), 1000 + step)[rank]
            res[("ef", step, algo)] = td.all_reduce(x, "ef:int4-g32", algo, None, feedback=fb, key=("l0", algo))
    if n == 4:  # a subgroup: peers are addressed by their global ranks
        sub = dist.new_group([2, 3])
        if rank in (2, 3):
            x = inputs(4, (8, 96), 77)[rank]
            for algo in ("one_shot", "two_shot", "ring"):
                res[("sub", algo)] = td.all_reduce(x, "fp8-g128", algo, sub)
            res[("sub", "rs")] = td.reduce_scatter(x, "taco", sub)
    torch.save(res, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.parametrize("n", [2, 4])
def test_gloo_process_group_equals_the_simulated_group(n, tmp_path):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(_worker, args=(n, str(tmp_path / "store"), str(tmp_path)), nprocs=n, join=True)
    got = [torch.load(tmp_path / f"rank{r}.pt") for r in range(n)]
    g = td.SimGroup(n)
    for i, (kind, variant, algo, shape, dtype, seed) in enumerate(cases(n)):
        want = sim_case(kind, variant, algo, inputs(n, shape, seed, dtype), g)
        for r in range(n):
            if variant is None and kind != "all_gather" and n > 2:
                # plain gloo sums in its own order: equal up to rounding, not bit for bit
                torch.testing.assert_close(got[r][i], want[r], rtol=1e-2, atol=1e-2)
                continue
            assert got[r][i].shape == want[r].shape, (kind, variant, algo, shape, dtype)
            assert torch.equal(bits(got[r][i]), bits(want[r])), (kind, variant, algo, shape, dtype, r)
    fb = td.Feedback()
    for step in range(3):
        for algo in ("one_shot", "two_shot", "ring"):
            want = g.all_reduce(inputs(n, (6, 64), 1000 + step), "ef:int4-g32", algo, feedback=fb, key=("l0", algo))
            for r in range(n):
                assert torch.equal(bits(got[r][("ef", step, algo)]), bits(want[r])), ("ef", step, algo, r)
    if n == 4:
        xs = inputs(4, (8, 96), 77)[2:]
        g2 = td.SimGroup(2)
        for algo in ("one_shot", "two_shot", "ring"):
            want = g2.all_reduce(xs, "fp8-g128", algo)
            for r in (2, 3):
                assert torch.equal(bits(got[r][("sub", algo)]), bits(want[r - 2])), ("sub", algo, r)
        want = g2.reduce_scatter(xs, "taco")
        for r in (2, 3):
            assert torch.equal(bits(got[r][("sub", "rs")]), bits(want[r - 2]))
    # error feedback changed the results after the first step
    plain = g.all_reduce(inputs(n, (6, 64), 1002), "int4-g32", "one_shot")[0]
    assert not torch.equal(got[0][("ef", 2, "one_shot")], plain)


def test_feedback_state_is_used_only_by_ef_variants():
    xs = inputs(2, (8, 64), 3)  # chunks of [4, 64]: 160-byte wires, one launch for both
    g = td.SimGroup(2)
    fb = td.Feedback()
    plain = g.all_reduce(xs, "int4-g32", "one_shot")[0]
    assert torch.equal(g.all_reduce(xs, "int4-g32", "one_shot", feedback=fb, key="k")[0], plain)
    assert not fb.residuals
    g.all_reduce(xs, "ef:int4-g32", "one_shot", feedback=fb, key="k")
    assert set(fb.residuals) == {("k", 0, "in"), ("k", 1, "in")}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (GPU tests run on the GPU machine)")
@pytest.mark.parametrize("variant", ["taco", "fp8-g128", "int8-g128-had", "mxfp8", "int4-g32-had", "nvfp4", "mxfp4",
                                     "fp8-row", "bf16"])
def test_sim_group_on_cuda_equals_the_cpu(variant):
    g = td.SimGroup(4)
    for shape, dtype in (((8, 256), torch.bfloat16), ((4, 512), torch.float32)):
        xs = inputs(4, shape, 11, dtype)
        xg = [x.cuda() for x in xs]
        for algo in ("one_shot", "two_shot", "ring"):
            a, b = g.all_reduce(xs, variant, algo), g.all_reduce(xg, variant, algo)
            for r in range(4):
                assert b[r].is_cuda and torch.equal(bits(b[r].cpu()), bits(a[r])), (algo, shape, r)
        for a, b in ((g.reduce_scatter(xs, variant), g.reduce_scatter(xg, variant)),
                     (g.all_gather(xs, variant), g.all_gather(xg, variant))):
            for r in range(len(a)):
                assert torch.equal(bits(b[r].cpu()), bits(a[r])), (shape, r)
    if variant == "bf16":
        return
    fc, fg = td.Feedback(), td.Feedback()  # error feedback: three steps of every algorithm
    for step in range(3):
        xs = inputs(4, (8, 256), 500 + step)
        for algo in ("one_shot", "two_shot", "ring"):
            a = g.all_reduce(xs, "ef:" + variant, algo, feedback=fc, key=algo)
            b = g.all_reduce([x.cuda() for x in xs], "ef:" + variant, algo, feedback=fg, key=algo)
            for r in range(4):
                assert torch.equal(bits(b[r].cpu()), bits(a[r])), ("ef", step, algo, r)
