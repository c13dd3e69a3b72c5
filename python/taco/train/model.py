"""Decoder-only transformers for TP training with compression in the loop: a Llama-style one
(RMSNorm, rotary positions, SwiGLU, grouped-query attention, no biases) and a GPT-2-style one
(LayerNorm, learned positions, GELU MLP, multi-head attention, biases); byte vocabulary.

Built three ways from one code: unsplit (tp=None: plain linears, the reference and what the capture
emulator hooks), or tensor-parallel through taco.tp (a TP object: one rank per process, or all
ranks simulated in one process). Layout [seq, batch, hidden] as in Megatron. Parameters are
float32 (master weights); activations run in `compute_dtype`, so a bf16 model carries bf16 on every
TP collective.

Module names (emulate_rules() gives the capture emulator's rules for the unsplit model):
  layers.<i>.attn.qkv   column-parallel, blocks [q, k, v]     site attn_qkv
  layers.<i>.attn.proj  row-parallel                          site attn_out
  layers.<i>.mlp.fc1    column-parallel ([gate, up] SwiGLU)   site mlp_fc1
  layers.<i>.mlp.fc2    row-parallel                          site mlp_out
Initialisation draws every full (unsplit) weight from one generator in module order, so every
rank, the simulated run and the unsplit model start from the same weights.

With `subspace=k` (Protocol Models' subspace confinement, docs/training.md) the residual stream
is fixed[token] + U c: the token (and gpt2 position) embeddings are k-dimensional and mapped by U,
`fixed` is a seeded, untrained table rebuilt from the token ids on every rank, the row-parallel
layers write k coordinates (their TP all-reduce sums k-vectors), and each block enters its TP
region before its norm, so that the backward all-reduce carries the k coordinates of the ranks'
partial input gradients (taco.tp.copy_to_subspace_region).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from .. import tp as T
from .config import ModelConfig  # noqa: F401  (the model's configuration, torch-free)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
EMBED_STD = 0.02  # GPT-2's initialisation; also the scale of the subspace model's fixed token table


def emulate_rules(cfg):
    """taco.capture.emulate rules for the unsplit model: (pattern, kind, site, chunks or output blocks)."""
    d = cfg.head_dim
    fc1 = [cfg.ffn, cfg.ffn] if cfg.arch == "llama" else [cfg.ffn]
    return [(r"^layers\.(?P<layer>\d+)\.attn\.qkv\.lin$", "column", "attn_qkv",
             [cfg.heads * d, cfg.kv_heads * d, cfg.kv_heads * d]),
            (r"^layers\.(?P<layer>\d+)\.attn\.proj\.lin$", "row", "attn_out", 1),
            (r"^layers\.(?P<layer>\d+)\.mlp\.fc1\.lin$", "column", "mlp_fc1", fc1),
            (r"^layers\.(?P<layer>\d+)\.mlp\.fc2\.lin$", "row", "mlp_out", 1)]


class CastLinear(nn.Linear):
    """nn.Linear with float32 weights used in the input's dtype (unsplit model)."""

    def forward(self, x):
        b = None if self.bias is None else self.bias.to(x.dtype)
        return F.linear(x, self.weight.to(x.dtype), b)


class LayerNorm(nn.LayerNorm):
    """LayerNorm in float32, output in the input's dtype."""

    def __init__(self, n):
        super().__init__(n)
        self.weight.sp_partial_grad = self.bias.sp_partial_grad = True

    def forward(self, x):
        return F.layer_norm(x.float(), self.normalized_shape, self.weight, self.bias, self.eps).to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, n, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(n))
        self.weight.sp_partial_grad = True

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight).to(x.dtype)


def rope_tables(seq, dim, theta, device):
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32, device=device) / dim))
    ang = torch.outer(torch.arange(seq, dtype=torch.float32, device=device), inv)  # [s, d/2]
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):
    """x: [b, heads, s, d], rotating pairs (x[2i], x[2i+1]) by position angles."""
    xf = x.float()
    x1, x2 = xf[..., 0::2], xf[..., 1::2]
    c, s = cos[: x.shape[-2]], sin[: x.shape[-2]]
    out = torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)
    return out.to(x.dtype)


def causal_attention(q, k, v):
    """q: [b, h, s, d]; k, v: [b, h, s, d] -> [b, h, s, d]."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = q.shape[-2]
    att = torch.matmul(q.float(), k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    att = att.masked_fill(mask, float("-inf")).softmax(-1)
    return torch.matmul(att, v.float()).to(q.dtype)


class _Column(nn.Module):
    """A column-parallel linear, or an unsplit one (tp=None); forward -> one tensor per local rank."""

    def __init__(self, fin, blocks, tp, sp, layer, site, bias):
        super().__init__()
        self.split = tp is not None
        if self.split:
            self.lin = T.ColumnParallelLinear(fin, blocks, tp, layer=layer, site=site, bias=bias, sequence_parallel=sp)
        else:
            self.lin = CastLinear(fin, sum(blocks), bias=bias)

    def forward(self, x):
        return self.lin(x) if self.split else [self.lin(x)]

    def local(self, xs):
        """On inputs already one per local rank (a subspace block's copies)."""
        return self.lin.local(xs) if self.split else [self.lin(xs[0])]


class _Row(nn.Module):
    def __init__(self, fin, fout, tp, sp, layer, site, bias, subspace=None):
        super().__init__()
        self.split = tp is not None
        self.subspace = subspace
        if self.split:
            self.lin = T.RowParallelLinear(fin, fout, tp, layer=layer, site=site, bias=bias, sequence_parallel=sp,
                                           subspace=subspace)
        else:
            self.lin = CastLinear(fin, fout if subspace is None else subspace.k, bias=bias)

    def forward(self, xs):
        if self.split:
            return self.lin(xs)
        y = self.lin(xs[0])
        return y if self.subspace is None else self.subspace.expand(y)


class Attention(nn.Module):
    def __init__(self, cfg, layer, tp, sp, subspace=None):
        super().__init__()
        n = 1 if tp is None else tp.size
        self.cfg = cfg
        self.local_heads, self.local_kv = cfg.heads // n, cfg.kv_heads // n
        d = cfg.head_dim
        bias = cfg.arch == "gpt2"
        self.qkv = _Column(cfg.hidden, [cfg.heads * d, cfg.kv_heads * d, cfg.kv_heads * d], tp, sp, layer, "attn_qkv",
                           bias)
        self.proj = _Row(cfg.heads * d, cfg.hidden, tp, sp, layer, "attn_out", bias, subspace)

    def core(self, qkv, rope):
        """One rank's attention over its heads: [s, b, (h + 2 kv) d] -> [s, b, h d]."""
        s, b = qkv.shape[0], qkv.shape[1]
        d, h, kv = self.cfg.head_dim, self.local_heads, self.local_kv
        q, k, v = qkv.split([h * d, kv * d, kv * d], dim=-1)
        q = q.reshape(s, b, h, d).permute(1, 2, 0, 3)
        k = k.reshape(s, b, kv, d).permute(1, 2, 0, 3)
        v = v.reshape(s, b, kv, d).permute(1, 2, 0, 3)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        if kv != h:
            k = k.repeat_interleave(h // kv, dim=1)
            v = v.repeat_interleave(h // kv, dim=1)
        y = causal_attention(q, k, v)                          # [b, h, s, d]
        return y.permute(2, 0, 1, 3).reshape(s, b, h * d)

    def forward(self, x, rope):
        return self.proj([self.core(t, rope) for t in self.qkv(x)])

    def local(self, xs, rope):
        return self.proj([self.core(t, rope) for t in self.qkv.local(xs)])


class MLP(nn.Module):
    def __init__(self, cfg, layer, tp, sp, subspace=None):
        super().__init__()
        self.swiglu = cfg.arch == "llama"
        blocks = [cfg.ffn, cfg.ffn] if self.swiglu else [cfg.ffn]
        bias = cfg.arch == "gpt2"
        self.fc1 = _Column(cfg.hidden, blocks, tp, sp, layer, "mlp_fc1", bias)
        self.fc2 = _Row(cfg.ffn, cfg.hidden, tp, sp, layer, "mlp_out", bias, subspace)

    def act(self, h):
        if self.swiglu:
            gate, up = h.chunk(2, dim=-1)
            return F.silu(gate) * up
        return F.gelu(h)

    def forward(self, x):
        return self.fc2([self.act(h) for h in self.fc1(x)])

    def local(self, xs):
        return self.fc2([self.act(h) for h in self.fc1.local(xs)])


class Block(nn.Module):
    def __init__(self, cfg, layer, tp, sp, subspace=None):
        super().__init__()
        norm = RMSNorm if cfg.arch == "llama" else LayerNorm
        self.norm1, self.norm2 = norm(cfg.hidden), norm(cfg.hidden)
        self.attn = Attention(cfg, layer, tp, sp, subspace)
        self.mlp = MLP(cfg, layer, tp, sp, subspace)
        self.layer, self.tp, self.subspace = layer, tp, subspace
        if subspace is not None:  # each rank applies the norms to its own copy: partial gradients
            for p in (*self.norm1.parameters(), *self.norm2.parameters()):
                p.subspace_partial_grad = True

    def forward(self, x, rope):
        if self.subspace is None:
            x = x + self.attn(self.norm1(x), rope)
            return x + self.mlp(self.norm2(x))
        x = x + self.attn.local(self._enter(x, "attn_qkv", self.norm1), rope)
        return x + self.mlp.local(self._enter(x, "mlp_fc1", self.norm2))

    def _enter(self, x, site, norm):
        """The block's TP region entered before its norm: each local rank normalises its own copy."""
        if self.tp is None:
            return [norm(x)]
        xs = T.copy_to_subspace_region(x, self.subspace, self.tp, (self.layer, site))
        if len(xs) == 1:
            return [norm(xs[0])]
        # Simulated ranks: recompute the norm in the backward, so that N copies of its float32
        # intermediates are not kept (the same values, 4x less memory at TP 4).
        return [checkpoint(norm, xi, use_reentrant=False) for xi in xs]


class Transformer(nn.Module):
    def __init__(self, cfg, tp=None, sequence_parallel=False, seed=0):
        super().__init__()
        if sequence_parallel and tp is None:
            raise ValueError("sequence parallelism needs a TP group")
        if sequence_parallel and cfg.subspace:
            raise ValueError("subspace confinement runs without sequence parallelism")
        if tp is not None:
            cfg.check_tp(tp.size)
        self.cfg, self.tp, self.sp = cfg, tp, bool(sequence_parallel)
        # Subspace confinement: embeddings of width k, a fixed full-width token table, U shared by all.
        self.subspace = T.Subspace(cfg.hidden, cfg.subspace) if cfg.subspace else None
        width = cfg.hidden if self.subspace is None else self.subspace.k
        self.tok = nn.Embedding(cfg.vocab, width)
        self.pos = nn.Embedding(cfg.seq, width) if cfg.arch == "gpt2" else None
        if self.subspace is not None:
            gen = torch.Generator().manual_seed(self.subspace.seed + 1)
            self.register_buffer("fixed", torch.randn(cfg.vocab, cfg.hidden, generator=gen) * EMBED_STD,
                                 persistent=False)
        self.layers = nn.ModuleList(Block(cfg, i, tp, self.sp, self.subspace) for i in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden) if cfg.arch == "llama" else LayerNorm(cfg.hidden)
        self.head = CastLinear(cfg.hidden, cfg.vocab, bias=False)
        self.reset_parameters(seed)

    @torch.no_grad()
    def reset_parameters(self, seed):
        """GPT-2 initialisation: N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 L)), biases 0,
        norms 1; full weights drawn from one generator in module order, then sharded."""
        gen = torch.Generator().manual_seed(int(seed))
        std_out = EMBED_STD / math.sqrt(2 * self.cfg.layers)
        if self.subspace is not None:  # U A z of the same expected norm as W z
            std_out *= math.sqrt(self.cfg.hidden / self.subspace.k)
        for name, m in self.named_modules():
            std = std_out if (".attn.proj." in name or ".mlp.fc2." in name) else EMBED_STD
            if isinstance(m, (T.ColumnParallelLinear, T.RowParallelLinear)):
                full = torch.randn(m.out_features, m.in_features, generator=gen) * std
                m.load_full(full, torch.zeros(m.out_features))
            elif isinstance(m, CastLinear):
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * std)
                if m.bias is not None:
                    m.bias.zero_()
            elif isinstance(m, nn.Embedding):
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * EMBED_STD)

    def embed(self, idx):
        """Token ids [b, s] -> the residual stream [s, b, hidden] in the compute dtype (the first
        pipeline stage's input)."""
        s = idx.shape[1]
        x = self.tok(idx.t())
        if self.pos is not None:
            x = x + self.pos.weight[:s].unsqueeze(1)
        if self.subspace is not None:                            # fixed[token] + U c
            x = self.fixed[idx.t()] + self.subspace.expand(x)
        return x.to(DTYPES[self.cfg.compute_dtype])              # [s, b, h]

    def rope(self, s, device):
        """The rotary tables for sequence length s (llama), else None."""
        if self.cfg.arch != "llama":
            return None
        return rope_tables(s, self.cfg.head_dim, self.cfg.rope_theta, device)

    def head_loss(self, x, targets):
        """LM head and mean loss on the final norm's output x [s, b, hidden] (the last pipeline
        stage's end) -> (logits [s, b, vocab] float32, loss or None)."""
        logits = self.head(x).float()
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.t().reshape(-1))
        return logits, loss

    def forward(self, idx, targets=None):
        """idx, targets: [b, s] int64. Returns (logits [s, b, vocab] float32, mean loss or None)."""
        x = self.embed(idx)
        rope = self.rope(idx.shape[1], x.device)
        if self.sp:
            x = T.scatter_to_sequence_parallel_region(x, self.tp)
        for blk in self.layers:
            x = blk(x, rope)
        x = self.norm(x)
        if self.sp:
            x = T.gather_from_sequence_parallel_region_replicated(x, self.tp)
        return self.head_loss(x, targets)
