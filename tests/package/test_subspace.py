"""Subspace-confined TP (taco.tp.Subspace, `python -m taco.train --subspace K`): the row-parallel
all-reduce sums k coordinates and equals the explicit full-width layer U A; the backward
all-reduce carries the k coordinates of the ranks' partial input gradients and still gives every
parameter the gradient of the unsplit model (no collective, plain autograd) to float32 rounding."""
import json

import pytest
import torch

import taco.tp as T
from taco.errors import TacoInputError
from taco.train.config import ModelConfig
from taco.train.model import Transformer
from test_tp import Tape


def test_basis_is_orthonormal_seeded_and_checked():
    a, b = T.Subspace(64, 16), T.Subspace(64, 16)
    assert a.basis.shape == (64, 16) and torch.equal(a.basis, b.basis)
    torch.testing.assert_close(a.basis.t() @ a.basis, torch.eye(16), rtol=0, atol=1e-6)
    assert not torch.equal(T.Subspace(64, 16, seed=7).basis, a.basis)
    x = torch.randn(5, 16)
    torch.testing.assert_close(a.coords(a.expand(x)), x, rtol=0, atol=1e-5)  # U^T U c = c
    for k, needle in [(0, "between 1 and 63"), (64, "between 1 and 63"), (12, "multiple of 8"), (2.0, "integer")]:
        with pytest.raises(TacoInputError, match=needle):
            T.Subspace(64, k)
    assert issubclass(TacoInputError, ValueError)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_row_layer_all_reduces_k_coordinates_and_equals_the_full_width_layer(n):
    g = torch.Generator().manual_seed(n)
    sub = T.Subspace(16, 8)
    comp = T.Compression(None)
    comp.recorder = Tape()
    tp = T.TP.simulated(n, comp) if n > 1 else T.TP.simulated(1, comp)
    row = T.RowParallelLinear(24, 16, tp, layer=0, site="mlp_out", bias=True, subspace=sub)
    a, bias = torch.randn(8, 24, generator=g), torch.randn(8, generator=g)
    row.load_full(a, bias)
    assert row.out_features == 8 and tuple(row.weight[0].shape) == (8, 24 // n)
    x = torch.randn(6, 3, 24, generator=g)
    y = row([x[..., c] for c in row.cols])
    # the explicit full-width computation: W = U A, b_full = U b, in float64
    u = sub.basis.double()
    y0 = x.double() @ (u @ a.double()).t() + u @ bias.double()
    torch.testing.assert_close(y.double(), y0, rtol=1e-5, atol=1e-5)
    for r in range(n):  # what crossed the collective: each rank's k coordinates A_r x_r
        sent = comp.recorder.seen[("mlp_out", "fwd", "all_reduce", r)]
        assert sent.shape == (6, 3, 8)
        torch.testing.assert_close(sent, x[..., row.cols[r]] @ row.weight[r].detach().t(), rtol=1e-6, atol=1e-6)
    assert comp.wire_elements[("mlp_out", "fwd")] == 6 * 3 * 8
    assert comp.elements[("mlp_out", "fwd")] == 6 * 3 * 16  # what the coordinates stand for


def _full_grads(model):
    """{parameter name of the unsplit model: gradient}, the shards of a TP model put together."""
    out = {}
    for name, m in model.named_modules():
        if isinstance(m, T.ColumnParallelLinear):
            w = torch.zeros(m.out_features, m.in_features)
            b = torch.zeros(m.out_features)
            for i, rows in enumerate(m.rows):
                w[rows] = m.weight[i].grad
                if m.bias is not None:
                    b[rows] = m.bias[i].grad
            out[name + ".weight"] = w
            if m.bias is not None:
                out[name + ".bias"] = b
        elif isinstance(m, T.RowParallelLinear):
            out[name + ".weight"] = torch.cat([w.grad for w in m.weight], dim=1)
            if m.bias is not None:
                out[name + ".bias"] = m.bias.grad
    for name, p in model.named_parameters():  # replicated: embeddings, norms, the head
        if ".lin." not in name:
            out[name] = p.grad
    return out


@pytest.mark.parametrize("arch, n", [("llama", 2), ("llama", 4), ("gpt2", 2)])
def test_subspace_model_gradients_equal_the_unsplit_model(arch, n):
    """The k-dim backward all-reduce drops the part of each input gradient outside span(U); no
    parameter needs it, so every gradient equals the unsplit model's (which sends nothing)."""
    kv = 2 if arch == "llama" and n == 2 else 4
    cfg = ModelConfig(arch=arch, seq=16, layers=2, hidden=64, heads=4, kv_heads=kv, subspace=16)
    comp = T.Compression(None)
    comp.recorder = Tape()
    tp_model = Transformer(cfg, T.TP.simulated(n, comp), seed=3)
    ref = Transformer(cfg, None, seed=3)
    idx = torch.randint(0, 256, (3, 16), generator=torch.Generator().manual_seed(4))
    tgt = torch.roll(idx, -1, dims=1)
    loss = tp_model(idx, tgt)[1]
    loss.backward()
    loss0 = ref(idx, tgt)[1]
    loss0.backward()
    torch.testing.assert_close(loss, loss0, rtol=1e-5, atol=1e-6)
    got = _full_grads(tp_model)
    want = {name: p.grad for name, p in ref.named_parameters()}
    assert set(got) == set(want)
    for name, g0 in want.items():
        torch.testing.assert_close(got[name], g0, rtol=1e-4, atol=1e-6, msg=name)
    seen = comp.recorder.seen  # the backward wire: k coordinates per token at both column sites
    for site in ("attn_qkv", "mlp_fc1"):
        assert all(seen[(site, "bwd", "all_reduce", r)].shape == (16, 3, 16) for r in range(n))
    assert set(comp.fired) == {(s, d, "all_reduce") for s, d in
                               [("attn_qkv", "bwd"), ("mlp_fc1", "bwd"), ("attn_out", "fwd"), ("mlp_out", "fwd")]}


def test_the_backward_drops_only_what_lies_outside_the_subspace():
    """Control for the test above: one block's residual-stream gradient through the TP model
    (projected, k-dim all-reduce) and through the unsplit model (plain autograd) have the same k
    coordinates, and they differ, by a large part, only outside span(U)."""
    cfg = ModelConfig(arch="llama", seq=8, layers=1, hidden=64, heads=4, kv_heads=2, subspace=16)
    model = Transformer(cfg, T.TP.simulated(2), seed=5)
    ref = Transformer(cfg, None, seed=5)
    idx = torch.randint(0, 256, (2, 8), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        x = model.fixed[idx.t()] + model.subspace.expand(model.tok(idx.t()))
    x_tp, x_ref = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    w = torch.randn(x.shape, generator=torch.Generator().manual_seed(7))
    (model.layers[0](x_tp, None) * w).sum().backward()
    (ref.layers[0](x_ref, None) * w).sum().backward()
    u = model.subspace.basis
    torch.testing.assert_close(x_tp.grad @ u, x_ref.grad @ u, rtol=1e-4, atol=1e-6)
    dropped = x_ref.grad - x_tp.grad
    assert dropped.norm() > 0.1 * (x_ref.grad - w).norm()      # the block's gradient mostly lies outside U
    assert (dropped @ u).norm() < 1e-4 * dropped.norm()         # and only that part was dropped


def test_subspace_needs_no_sequence_parallelism():
    cfg = ModelConfig(arch="llama", seq=8, layers=1, hidden=64, heads=4, subspace=16)
    with pytest.raises(ValueError, match="without sequence parallelism"):
        Transformer(cfg, T.TP.simulated(2), sequence_parallel=True)


def test_row_layer_rejects_a_list_of_the_wrong_length():
    tp = T.TP.simulated(2)
    row = T.RowParallelLinear(8, 4, tp, layer=0, site="mlp_out")
    with pytest.raises(ValueError, match="3 inputs for 2 local TP ranks"):
        row([torch.zeros(2, 4)] * 3)
    col = T.ColumnParallelLinear(4, [8], tp, layer=0, site="mlp_fc1")
    with pytest.raises(ValueError, match="1 inputs for 2 local TP ranks"):
        col.local([torch.zeros(2, 4)])


def test_model_config_names_the_subspace():
    assert "-sub16-" in ModelConfig(hidden=64, heads=4, subspace=16).name()
    assert json.dumps(ModelConfig().as_dict())  # plain data
