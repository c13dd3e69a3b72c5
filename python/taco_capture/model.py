"""A small GPT (pre-LayerNorm, learned positions, GELU MLP, byte vocabulary) that is built
either unsplit from plain linear layers (for single-process runs and TP emulation) or
tensor-parallel from tp.ColumnParallelLinear / tp.RowParallelLinear (one process per rank).

Layout [seq, batch, hidden] throughout, as in Megatron. Parameters are float32; activations
run in `compute_dtype` (bf16 on GPU), so the TP collectives carry bf16.

Module names (the emulation rules in DEFAULT_RULES match them):
  blocks.<i>.attn.qkv   [3h, h]   column-parallel, chunks=3   site attn_qkv
  blocks.<i>.attn.proj  [h, h]    row-parallel                site attn_out
  blocks.<i>.mlp.fc1    [f, h]    column-parallel             site mlp_fc1
  blocks.<i>.mlp.fc2    [h, f]    row-parallel                site mlp_out
"""
import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import tp as tpmod
from .emulate import Rule

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

DEFAULT_RULES = [
    Rule(r"^blocks\.(?P<layer>\d+)\.attn\.qkv$", "column", "attn_qkv", chunks=3),
    Rule(r"^blocks\.(?P<layer>\d+)\.attn\.proj$", "row", "attn_out"),
    Rule(r"^blocks\.(?P<layer>\d+)\.mlp\.fc1$", "column", "mlp_fc1"),
    Rule(r"^blocks\.(?P<layer>\d+)\.mlp\.fc2$", "row", "mlp_out"),
]


@dataclass
class GPTConfig:
    vocab: int = 256
    seq: int = 256
    layers: int = 4
    hidden: int = 512
    heads: int = 8
    ffn: int = 0            # 0 = 4 * hidden
    compute_dtype: str = "float32"

    def __post_init__(self):
        if self.ffn == 0:
            self.ffn = 4 * self.hidden
        if self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not divisible by heads {self.heads}")
        if self.compute_dtype not in DTYPES:
            raise ValueError(f"compute_dtype must be one of {sorted(DTYPES)}")

    def name(self):
        return f"gpt-byte-{self.layers}L-{self.hidden}H-{self.heads}A-{self.ffn}F-seq{self.seq}"

    def as_dict(self):
        return asdict(self)


class CastLinear(nn.Linear):
    """nn.Linear with float32 weights used in the input's dtype (bf16 compute, fp32 master)."""

    def forward(self, x):
        b = None if self.bias is None else self.bias.to(x.dtype)
        return F.linear(x, self.weight.to(x.dtype), b)


class LayerNorm(nn.LayerNorm):
    """LayerNorm computed in float32, output in the input's dtype."""

    def __init__(self, n):
        super().__init__(n)
        self.weight.sp_partial_grad = True
        self.bias.sp_partial_grad = True

    def forward(self, x):
        return F.layer_norm(x.float(), self.normalized_shape, self.weight, self.bias, self.eps).to(x.dtype)


def causal_attention(q, k, v):
    """q, k, v: [b, heads, s, d] -> [b, heads, s, d]."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = q.shape[-2]
    att = torch.matmul(q.float(), k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    att = att.masked_fill(mask, float("-inf")).softmax(-1)
    return torch.matmul(att, v.float()).to(q.dtype)


def _linear(kind, fin, fout, tp, sp, layer, site, name, chunks=1):
    if tp is None:
        return CastLinear(fin, fout)
    if kind == "column":
        return tpmod.ColumnParallelLinear(fin, fout, tp, layer=layer, site=site, sequence_parallel=sp,
                                          chunks=chunks, name=name)
    return tpmod.RowParallelLinear(fin, fout, tp, layer=layer, site=site, sequence_parallel=sp, name=name)


class Attention(nn.Module):
    def __init__(self, cfg, layer, tp, sp):
        super().__init__()
        n = 1 if tp is None else tp.size
        if cfg.heads % n:
            raise ValueError(f"{cfg.heads} heads do not split over TP={n}")
        self.local_heads = cfg.heads // n
        self.head_dim = cfg.hidden // cfg.heads
        p = f"blocks.{layer}.attn"
        self.qkv = _linear("column", cfg.hidden, 3 * cfg.hidden, tp, sp, layer, "attn_qkv", p + ".qkv", chunks=3)
        self.proj = _linear("row", cfg.hidden, cfg.hidden, tp, sp, layer, "attn_out", p + ".proj")

    def forward(self, x):                                    # [s(/N), b, h]
        qkv = self.qkv(x)                                    # [s, b, 3 * h/N]
        s, b = qkv.shape[0], qkv.shape[1]
        q, k, v = (t.reshape(s, b, self.local_heads, self.head_dim).permute(1, 2, 0, 3)
                   for t in qkv.chunk(3, dim=-1))            # [b, heads/N, s, d]
        y = causal_attention(q, k, v)
        y = y.permute(2, 0, 1, 3).reshape(s, b, self.local_heads * self.head_dim)  # [s, b, h/N]
        return self.proj(y)                                  # [s(/N), b, h]


class MLP(nn.Module):
    def __init__(self, cfg, layer, tp, sp):
        super().__init__()
        p = f"blocks.{layer}.mlp"
        self.fc1 = _linear("column", cfg.hidden, cfg.ffn, tp, sp, layer, "mlp_fc1", p + ".fc1")
        self.fc2 = _linear("row", cfg.ffn, cfg.hidden, tp, sp, layer, "mlp_out", p + ".fc2")

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, cfg, layer, tp, sp):
        super().__init__()
        self.ln1 = LayerNorm(cfg.hidden)
        self.attn = Attention(cfg, layer, tp, sp)
        self.ln2 = LayerNorm(cfg.hidden)
        self.mlp = MLP(cfg, layer, tp, sp)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg, tp=None, sequence_parallel=False):
        super().__init__()
        if sequence_parallel and tp is None:
            raise ValueError("sequence parallel needs a TP group")
        self.cfg, self.tp, self.sp = cfg, tp, bool(sequence_parallel)
        self.tok = nn.Embedding(cfg.vocab, cfg.hidden)
        self.pos = nn.Embedding(cfg.seq, cfg.hidden)
        self.blocks = nn.ModuleList(Block(cfg, i, tp, self.sp) for i in range(cfg.layers))
        self.ln_f = LayerNorm(cfg.hidden)
        self.head = CastLinear(cfg.hidden, cfg.vocab, bias=False)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self):
        """GPT-2 initialisation: N(0, 0.02), residual projections scaled by 1/sqrt(2 L)."""
        std_out = 0.02 / math.sqrt(2 * self.cfg.layers)
        for name, p in self.named_parameters():
            if p.dim() == 1:
                continue  # biases zero, LayerNorm weights one (their defaults)
            std = std_out if name.endswith(("attn.proj.weight", "mlp.fc2.weight")) else 0.02
            p.normal_(0.0, std)
        for m in self.modules():
            if isinstance(m, nn.Linear) and m.bias is not None:
                m.bias.zero_()
        for m in self.modules():
            if isinstance(m, (tpmod.ColumnParallelLinear, tpmod.RowParallelLinear)) and m.bias is not None:
                m.bias.zero_()

    def forward(self, idx, targets=None):
        """idx, targets: [b, s] int64. Returns (logits [s, b, vocab] float32, mean loss or None)."""
        b, s = idx.shape
        dtype = DTYPES[self.cfg.compute_dtype]
        x = (self.tok(idx.t()) + self.pos.weight[:s].unsqueeze(1)).to(dtype)   # [s, b, h]
        if self.sp:
            x = tpmod.scatter_to_sp(x, self.tp)                                # [s/N, b, h]
        for blk in self.blocks:
            x = blk(x)
        x = self.ln_f(x)
        if self.sp:
            x = tpmod.gather_from_sp_replicated(x, self.tp)                    # [s, b, h]
        logits = self.head(x).float()                                          # [s, b, vocab]
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.t().reshape(-1))
        return logits, loss

    def set_sequence_parallel(self, on):
        """Switches SP on or off in place (same weights): the TP layers' collectives change."""
        if on and self.tp is None:
            raise ValueError("sequence parallel needs a TP group")
        self.sp = bool(on)
        for m in self.modules():
            if isinstance(m, (tpmod.ColumnParallelLinear, tpmod.RowParallelLinear)):
                m.sequence_parallel = self.sp


@torch.no_grad()
def load_from_full(tp_model, full_model):
    """Copies an unsplit GPT's weights into a TP GPT: each parallel layer takes its shard, the
    replicated parameters are copied whole."""
    full = dict(full_model.named_modules())
    for name, m in tp_model.named_modules():
        if isinstance(m, (tpmod.ColumnParallelLinear, tpmod.RowParallelLinear)):
            src = full[name]
            m.load_full(src.weight, src.bias)
    full_params = dict(full_model.named_parameters())
    for name, p in tp_model.named_parameters():
        if not getattr(p, "tp_sharded", False):
            p.copy_(full_params[name])
