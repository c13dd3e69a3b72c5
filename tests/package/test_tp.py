"""taco.tp: the TP building blocks compute the unsplit layer (gradients checked against an explicit
computation), every compressed collective receives exactly the ranks' partials and delivers their
compressed reduction (bit for bit), with and without sequence parallelism."""
import pytest
import torch

import taco.dist as td
import taco.tp as T


class Tape:
    """A recorder: the tensors every collective received, per (site, direction, collective, rank)."""

    def __init__(self):
        self.seen = {}

    def record(self, t, *, layer, site, direction, collective, tp_rank, tp_size, module=""):
        self.seen[(site, direction, collective, tp_rank)] = t.detach().clone()


def two_layers(tp, sp, seed=0):
    g = torch.Generator().manual_seed(seed)
    col = T.ColumnParallelLinear(16, [24], tp, layer=0, site="mlp_fc1", bias=True, sequence_parallel=sp)
    row = T.RowParallelLinear(24, 16, tp, layer=0, site="mlp_out", bias=True, sequence_parallel=sp)
    w1, b1 = torch.randn(24, 16, generator=g), torch.randn(24, generator=g)
    w2, b2 = torch.randn(16, 24, generator=g), torch.randn(16, generator=g)
    col.load_full(w1, b1)
    row.load_full(w2, b2)
    return col, row, (w1, b1, w2, b2)


def run(tp, sp, x, grad):
    col, row, full = two_layers(tp, sp)
    x = x.clone().requires_grad_(True)
    h = [torch.tanh(t) for t in col(x)]
    y = row(h)
    (y * grad).sum().backward()
    return y, x.grad, col, row, full


def explicit(x, grad, full):
    w1, b1, w2, b2 = [t.clone().requires_grad_(True) for t in full]
    x = x.clone().requires_grad_(True)
    y = torch.nn.functional.linear(torch.tanh(torch.nn.functional.linear(x, w1, b1)), w2, b2)
    (y * grad).sum().backward()
    return y, x.grad, (w1.grad, b1.grad, w2.grad, b2.grad)


@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("sp", [False, True])
def test_uncompressed_tp_layers_compute_the_unsplit_layer_and_its_gradients(n, sp):
    if sp and n == 1:
        pytest.skip("sequence parallelism needs 2 or more ranks")
    torch.manual_seed(1)
    x, grad = torch.randn(8, 3, 16, dtype=torch.float64).float(), torch.randn(8, 3, 16)
    tp = T.TP.simulated(n)
    y, gx, col, row, full = run(tp, sp, x, grad)
    y0, gx0, gw = explicit(x, grad, full)
    torch.testing.assert_close(y, y0, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gx, gx0, rtol=1e-5, atol=1e-5)
    # the shards' gradients are the unsplit gradient's rows / columns
    w1g = torch.zeros(24, 16)
    for i, rows in enumerate(col.rows):
        w1g[rows] = col.weight[i].grad
    torch.testing.assert_close(w1g, gw[0], rtol=1e-5, atol=1e-5)
    w2g = torch.cat([w.grad for w in row.weight], dim=1)
    torch.testing.assert_close(w2g, gw[2], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(row.bias.grad, gw[3], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", ["taco", "int4-g32", "bf16"])
def test_compressed_sites_reduce_exactly_the_ranks_partials(variant):
    torch.manual_seed(2)
    n = 2
    x, grad = torch.randn(8, 3, 16), torch.randn(8, 3, 16)
    comp = T.Compression(variant, algo="two_shot")
    comp.recorder = Tape()
    tp = T.TP.simulated(n, comp)
    y, gx, col, row, full = run(tp, False, x, grad)
    seen = comp.recorder.seen
    g = td.SimGroup(n)
    fwd = g.all_reduce([seen[("mlp_out", "fwd", "all_reduce", r)] for r in range(n)], variant, "two_shot")[0]
    assert torch.equal(y, fwd + row.bias)                     # forward: compressed sum of the partials
    bwd = g.all_reduce([seen[("mlp_fc1", "bwd", "all_reduce", r)] for r in range(n)], variant, "two_shot")[0]
    assert torch.equal(gx, bwd)                               # backward: compressed sum of the input gradients
    # the partials are what each rank computes: rank r's input gradient is grad_h_r @ W1_r
    for r in range(n):
        w1r = col.weight[r].detach()
        h_r = torch.tanh(torch.nn.functional.linear(x, w1r, col.bias[r].detach()))
        gh = torch.nn.functional.linear(grad, row.weight[r].detach().t()) * (1 - h_r ** 2)
        torch.testing.assert_close(seen[("mlp_fc1", "bwd", "all_reduce", r)], gh @ w1r, rtol=1e-5, atol=1e-5)
    assert dict(comp.fired) == {("mlp_out", "fwd", "all_reduce"): 1, ("mlp_fc1", "bwd", "all_reduce"): 1}


def test_sequence_parallel_sites_gather_and_scatter_compressed():
    torch.manual_seed(3)
    n, variant = 2, "fp8-g128"
    x, grad = torch.randn(8, 3, 16), torch.randn(8, 3, 16)
    comp = T.Compression(variant)
    comp.recorder = Tape()
    tp = T.TP.simulated(n, comp)
    y, gx, col, row, full = run(tp, True, x, grad)
    seen, g = comp.recorder.seen, td.SimGroup(n)
    # forward: rank r all-gathers its sequence shard; the row-parallel partials are reduce-scattered
    for r, shard in enumerate(x.chunk(n, dim=0)):
        assert torch.equal(seen[("mlp_fc1", "fwd", "all_gather", r)], shard)
    rs = g.reduce_scatter([seen[("mlp_out", "fwd", "reduce_scatter", r)] for r in range(n)], variant)
    assert torch.equal(y, torch.cat(rs) + row.bias)
    # backward: the output gradient's shards are all-gathered, the input gradients reduce-scattered
    for r, shard in enumerate(grad.chunk(n, dim=0)):
        assert torch.equal(seen[("mlp_out", "bwd", "all_gather", r)], shard)
    rs = g.reduce_scatter([seen[("mlp_fc1", "bwd", "reduce_scatter", r)] for r in range(n)], variant)
    assert torch.equal(gx, torch.cat(rs))
    assert set(comp.fired) == {("mlp_fc1", "fwd", "all_gather"), ("mlp_out", "fwd", "reduce_scatter"),
                               ("mlp_out", "bwd", "all_gather"), ("mlp_fc1", "bwd", "reduce_scatter")}


def test_compression_config_rejects_unknown_sites_and_variants(tmp_path):
    from taco.errors import TacoInputError
    with pytest.raises(TacoInputError, match="unknown TP site 'attn_proj'"):
        T.Compression(per_site={("attn_proj", "fwd"): "taco"})
    with pytest.raises(TacoInputError, match="unknown direction"):
        T.Compression(per_site={("attn_out", "up"): "taco"})
    with pytest.raises(TacoInputError, match="variant 'tacco'"):
        T.Compression("tacco")
    p = tmp_path / "sel.json"
    p.write_text('{"choices": [{"site": "mlp_out", "direction": "fwd", "variant": "taco"}]}')
    c = T.Compression.from_selection(p)
    assert c.variant_for("mlp_out", "fwd") == "taco" and c.variant_for("attn_out", "fwd") is None
    p.write_text('{"choices": 3}')
    with pytest.raises(TacoInputError, match="not a selection.json"):
        T.Compression.from_selection(p)
