"""taco.dist runs the C++ plans (taco._C.collective_plan, collectives/comm_alg_*.hpp), the one
statement of every compressed collective: their shape as exported, the error-feedback stages they
key, and the loopback executor on rank 0's plan."""
import pytest
import torch

import taco.codec as tc
import taco.dist as td
from taco import _C


def bits(t):
    return t.contiguous().view(torch.int32 if t.dtype == torch.float32 else torch.int16)


def inputs(n, shape, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g) * (1 + r) for r in range(n)]


def round16(b):
    return (b + 15) // 16 * 16


def test_two_shot_plan_as_exported():
    codec = tc.get_codec("taco")
    n, rank, rows, cols = 4, 1, 8, 256
    plan = _C.collective_plan(codec, "all_reduce", "two_shot", n, rank, rows, cols, 4)
    cb = codec.chunk_bytes(rows // n, cols)
    S = round16(cb)
    assert (plan["algo"], plan["quantizations"], plan["in_elems"], plan["out_elems"]) == ("two_shot", 2, 2048, 2048)
    (steps,) = plan["pieces"]  # one piece: taco.dist does not pipeline
    assert [comm for comm, _ in steps] == [False, True, False, True, False]
    encode, exchange, reduce, gather, decode = (ops for _, ops in steps)
    # the n chunk encodes coalesced into one op of n blocks, chunk j into slot j of W0
    assert [(o[0], o[3], o[4], o[6], o[7]) for o in encode] == [("encode", n, ((0, 0),), S, (2, 0))]
    # a send and a receive with each peer; the owner reduces chunk `rank` and re-encodes it into W2
    assert sorted((o[0], o[8], o[9]) for o in exchange) == sorted(
        [(k, q, cb) for q in range(n) if q != rank for k in ("send", "recv")])
    assert reduce[0][0] == "decode_reduce_encode" and reduce[0][7] == (4, 0)
    assert gather[0][0] == "all_gather" and gather[0][9] == S
    assert decode[0][0] == "decode" and decode[0][3] == n and decode[0][7] == (1, 0)
    assert plan["bytes_sent"] == (n - 1) * cb + (n - 1) * S
    assert plan["wire_bytes"] == n * cb


def test_auto_and_direct_algorithms_resolve_in_cpp():
    codec = tc.get_codec("fp8-g128")
    auto = lambda nbytes, n: _C.collective_plan(codec, "all_reduce", "auto", n, 0, nbytes // 4 // 256, 256, 4)["algo"]  # noqa: E731
    assert [auto(8 << 20, 2), auto(512 << 10, 4), auto(8 << 20, 4), auto(64 << 20, 8)] == \
        ["one_shot", "one_shot", "two_shot", "ring"]
    assert td.auto_algo(8 << 20, 4) == "two_shot"
    assert _C.collective_plan(codec, "all_gather", "auto", 2, 0, 4, 256, 4)["algo"] == "direct"
    with pytest.raises(ValueError, match="only all_reduce has a choice"):
        _C.collective_plan(codec, "reduce_scatter", "ring", 2, 0, 4, 256, 4)
    with pytest.raises(ValueError, match="rank 2 of 2"):
        _C.collective_plan(codec, "all_reduce", "ring", 2, 2, 4, 256, 4)
    assert td.chunk_layout(5, 96, 2) == [(0, 1, 240), (240, 1, 240)]
    assert td.chunk_layout(8, 96, 4)[3] == (6 * 96, 2, 96)


@pytest.mark.parametrize("algo, stages", [
    ("one_shot", ["in"]),
    ("two_shot", ["in", ("sum", 0, 2)]),  # the owner's re-encode of its shard (step 2)
    ("ring", ["in", ("sum", 0, 2), ("sum", 0, 4)]),  # the two hops of n = 3 (steps 2 and 4)
])
def test_error_feedback_keys_a_residual_per_rank_and_stage(algo, stages):
    n = 3
    xs = inputs(n, (6, 64), 7)
    fb = td.Feedback()
    td.SimGroup(n).all_reduce(xs, "ef:int4-g32", algo, feedback=fb, key="k")
    assert set(fb.residuals) == {("k", r, s) for r in range(n) for s in stages}
    assert all(r.dtype == torch.float32 for r in fb.residuals.values())
    assert fb.residuals[("k", 0, "in")].numel() == 6 * 64  # one residual over the rank's whole input


@pytest.mark.parametrize("variant", ["taco", "int4-g32", "nvfp4", "bf16"])
@pytest.mark.parametrize("shape", [(8, 256), (6, 100)])  # (6, 100): wires not 16-byte multiples
def test_loopback_runs_rank_0s_plan_as_if_every_rank_held_its_input(variant, shape):
    """One-shot and all-gather move whole wires, so rank 0 alone, its wire in every slot, computes
    what n ranks holding the same tensor would: the simulated group's bits."""
    n = 2
    (x,) = inputs(1, shape, 3)
    loop, sim = td.LoopbackGroup(n), td.SimGroup(n)
    assert torch.equal(bits(loop.all_reduce([x], variant, "one_shot")[0]), bits(sim.all_reduce([x] * n, variant, "one_shot")[0]))
    assert torch.equal(bits(loop.all_gather([x], variant)[0]), bits(sim.all_gather([x] * n, variant)[0]))
    for algo in ("two_shot", "ring"):  # a timing run: rank 0's codec calls, finite results
        assert torch.isfinite(loop.all_reduce([x], variant, algo)[0]).all()
    assert loop.reduce_scatter([x], variant)[0].shape == (shape[0] // n, shape[1])
