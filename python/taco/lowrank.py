"""Low-rank all-reduce with error feedback, PowerSGD-style (Vogels et al. 2019, arXiv 1905.13727),
for the TP all-reduces (the row-parallel forward partial sums, the column-parallel backward input
gradients). It is a collective algorithm over low-rank factors written in torch, not a codec of the
C++ codec contract: nothing here has a wire format of its own, a CPU reference in src/ or a CUDA
kernel; taco.dist runs it where a variant spells `powersgd:r<R>`.

Spelling: `[ef:]powersgd:r<R>[:fp32]`
  ef:    with error feedback (one residual per stream and rank), as `ef:<codec>` asks for it
  r<R>   the rank R (a positive integer; at most the message's smaller side)
  fp32   factor messages in float32 (default bfloat16)
Error feedback is off by default, unlike PowerSGD's data-parallel setting: there a residual is
part of a weight gradient that the optimizer sums over steps anyway; a TP message is per token
(activations forward, input gradients backward), so a residual is added to the next step's
*other* tokens. The warm start carries over either way (it lives in the hidden dimension).

One call on a stream (layer, site, direction), each rank r holding M_r [rows, cols] (the message's
[numel / last dim, last dim] view, rows = tokens, cols = hidden), in float32:
  M_r  = X_r + e_r                           e_r: rank r's residual (zeros at first; without ef: none)
  P_r  = M_r Q                               Q [cols, R]: the stream's warm start, the same on every rank
  P    = sum_r P_r                           first message: each rank sends P_r [rows, R]
  P^   = QR(P).Q                             orthonormal columns; every rank computes it alike
  Q_r  = M_r^T P^                            second message: each rank sends Q_r [cols, R]
  Qs   = sum_r Q_r
  out  = P^ Qs^T                             (= P^ P^^T sum_r M_r up to the factors' rounding)
  e_r  = M_r - P^ Q_r^T                      with Q_r as sent (rounded), so that the residuals carry
                                             the rounding too: sum_r e_r = sum_r M_r - out exactly
  Q    = QR(Qs).Q                            next call's warm start (orthonormal columns)
The factors travel in bf16 (`fp32`: float32) and are summed in float32 in rank order 0..N-1; the
result is rounded once to the input dtype. The first warm start is a Gaussian from a seed derived
from the stream key (crc32 of its repr), orthonormalised in float64 on the CPU: the same on every
rank and device, never sent.

Bytes a rank sends per message: (rows + cols) * R * 2 (bf16 factors; fp32: * 4), counted as
taco.dist counts a plain all-reduce (each element of the rank's buffer once).
"""
import dataclasses
import functools
import zlib

import torch

from .errors import TacoInputError

__all__ = ["LowRank", "PREFIX", "GRAMMAR", "spec_of", "parse", "reduce", "wire_bytes"]

PREFIX = "powersgd"
GRAMMAR = "[ef:]powersgd:r<R>[:fp32]"
_FACTOR_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


@dataclasses.dataclass(frozen=True)
class LowRank:
    """A parsed `powersgd:` variant: rank R, error feedback on or off, the factors' wire dtype."""
    rank: int
    feedback: bool = False
    factors: str = "bf16"

    @property
    def name(self):
        """The canonical spelling (parse(name) rebuilds an equal spec)."""
        return ("ef:" if self.feedback else "") + f"{PREFIX}:r{self.rank}" + \
            ("" if self.factors == "bf16" else f":{self.factors}")

    def __str__(self):
        return self.name

    @property
    def factor_dtype(self):
        return _FACTOR_DTYPES[self.factors]

    @property
    def factor_bytes(self):
        return 2 if self.factors == "bf16" else 4

    def check_shape(self, rows, cols):
        if self.rank > min(rows, cols):
            raise TacoInputError(f"variant {self.name}: rank {self.rank} exceeds the message's smaller side "
                                 f"(a [{rows}, {cols}] message)")


def _bad(text, why):
    return TacoInputError(f"variant {text!r}: {why} (spelling: {GRAMMAR})")


@functools.lru_cache(maxsize=64)
def parse(text):
    """The LowRank of a `[ef:]powersgd:` variant string; TacoInputError (one line) for a bad one."""
    feedback = text.startswith("ef:")
    parts = text[3 if feedback else 0:].split(":")
    if parts[0] != PREFIX:
        raise _bad(text, f"not a {PREFIX} variant")
    if len(parts) < 2 or not parts[1]:
        raise _bad(text, "the rank is missing")
    r = parts[1]
    if not r.startswith("r") or not r[1:].isdigit():
        raise _bad(text, f"the rank must be r<R> with R a positive integer, got {r!r}")
    rank = int(r[1:])
    if rank < 1:
        raise _bad(text, f"the rank must be at least 1, got {rank}")
    factors, seen = "bf16", set()
    for opt in parts[2:]:
        if opt in seen:
            raise _bad(text, f"option {opt!r} given twice")
        seen.add(opt)
        if opt in _FACTOR_DTYPES:
            factors = opt
        else:
            raise _bad(text, f"unknown option {opt!r}")
    if len(seen & set(_FACTOR_DTYPES)) > 1:
        raise _bad(text, "give one factor dtype")
    return LowRank(rank, feedback, factors)


def spec_of(variant):
    """The LowRank a variant stands for (a LowRank, or a string starting with `powersgd` or
    `ef:powersgd`), else None (a codec variant, None or "none")."""
    if isinstance(variant, LowRank):
        return variant
    if not isinstance(variant, str):
        return None
    bare = variant[3:] if variant.startswith("ef:") else variant
    if bare == PREFIX or bare.startswith(PREFIX + ":"):
        return parse(variant)
    return None


def wire_bytes(spec, rows, cols):
    """Bytes one rank sends for one message of [rows, cols]: its two factors, P_r and Q_r."""
    return (rows + cols) * spec.rank * spec.factor_bytes


# ---- the algorithm, on any transport ----------------------------------------------------------------

def _seed(key):
    return zlib.crc32(repr(key).encode())


def _orthonormal(a):
    """Q of the reduced QR of a (float32 or float64): orthonormal columns spanning a's, also where
    a is rank-deficient (Householder)."""
    return torch.linalg.qr(a, mode="reduced")[0]


def warm_start(state, key, cols, rank, device):
    """The stream's Q [cols, rank] (float32): the one kept from the previous call, else a seeded
    Gaussian, orthonormalised in float64 on the CPU (the same on every rank and device)."""
    q = state.get(key)
    if q is None:
        gen = torch.Generator().manual_seed(_seed(key))
        q = _orthonormal(torch.randn(cols, rank, generator=gen, dtype=torch.float64)).float().to(device)
        state[key] = q
    elif q.shape != (cols, rank):
        raise ValueError(f"low-rank stream {key}: shape changed ({tuple(q.shape)} -> {(cols, rank)} warm start)")
    return q


def _sum_f32(ws):
    acc = ws[0].float()
    for w in ws[1:]:
        acc = acc + w.float()
    return acc


@torch.no_grad()
def reduce(xs, ranks, spec, feedback, key, exchange):
    """The low-rank all-reduce of the local ranks' tensors `xs` (group ranks `ranks`, one tensor each;
    all n ranks when simulated). `feedback`: a taco.dist.Feedback (residuals per (key, rank), warm
    starts per key); `exchange(wires)`: the local ranks' factor wires -> all n ranks' wires in rank
    order. Returns the result (xs[0]'s shape and dtype), the same on every rank."""
    if feedback is None:
        raise ValueError(f"variant {spec.name} keeps a warm start per stream: pass a taco.dist.Feedback (and a "
                         "stream key)")
    x0 = xs[0]
    cols = x0.shape[-1] if x0.dim() else 1
    rows = x0.numel() // cols
    spec.check_shape(rows, cols)
    q = warm_start(feedback.warm, key, cols, spec.rank, x0.device)
    ms, res = [], []
    for x, r in zip(xs, ranks):
        m = x.reshape(rows, cols).float()  # M_r [rows, cols]
        if spec.feedback:
            e = feedback.get((key, r, "lowrank"), x, rows * cols).view(rows, cols)
            m = m + e
            res.append(e)
        ms.append(m)
    wdt = spec.factor_dtype
    p = _sum_f32(exchange([torch.matmul(m, q).to(wdt) for m in ms]))  # P [rows, R]
    p_hat = _orthonormal(p)
    q_wires = [torch.matmul(m.t(), p_hat).to(wdt) for m in ms]  # Q_r [cols, R]
    qs = _sum_f32(exchange(q_wires))
    out = torch.matmul(p_hat, qs.t())  # [rows, cols]
    for m, qw, e in zip(ms, q_wires, res):
        torch.sub(m, torch.matmul(p_hat, qw.float().t()), out=e)
    feedback.warm[key] = _orthonormal(qs)
    return out.to(x0.dtype).view(x0.shape)
