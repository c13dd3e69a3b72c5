"""Compressed collectives over torch.distributed, and the same collectives simulated in one process.

    import taco.dist as td
    y = td.all_reduce(x, "taco")                  # x: this rank's partial sum; y: the (lossy) total
    s = td.reduce_scatter(x, "fp8-g128")          # this rank's chunk of the sum (dim 0 split N ways)
    g = td.all_gather(x, "taco")                  # the N ranks' tensors concatenated along dim 0

Semantics (shared with `taco comm` and the study's simulation, collectives/sim_collectives.hpp, which the
tests compare against bit for bit): the [rows, cols] view of a tensor (cols = its last dimension) is
cut into N chunks (N equal row blocks when N divides rows, else N flat ranges), chunk j owned by
rank j; every message is a codec's wire; receivers decode, sum in float32 in rank order 0..N-1,
re-encode where the algorithm forwards a sum, and round once to the input dtype at the end.
All-reduce algorithms: one_shot (each element quantized once), two_shot (twice: the owner of a
chunk re-encodes its sum), ring (N times). "auto" picks as `taco comm` does: one-shot below 1 MiB
or at N = 2, two-shot below 32 MiB, ring above. Every rank ends with identical bits.

variant=None (or "none") runs the plain collective of the backend (NCCL in the tensor's dtype;
gloo in float32 staging).

Error feedback: pass a Feedback object and a stream key; each encode a rank makes adds the residual
it kept for (key, rank, stage) and keeps the new one (stages: "in" for the rank's own contribution,
"shard" for the two-shot owner's re-encode, ("ring", hop) for ring hops). A variant "ef:<v>" asks for
it; a Feedback object passed with another variant is ignored.

Low rank: all_reduce also takes `[ef:]powersgd:r<R>[:fp32]` (a string, or its parsed
taco.lowrank.LowRank): PowerSGD's two factor all-reduces with a warm start per stream, and with
ef: error feedback (taco.lowrank has the algorithm). It needs a Feedback object and a key (the
warm start lives there), ignores `algo` (each rank's factors reach every rank, as one-shot's chunks
do, and are summed in float32 in rank order), and is an all-reduce only: reduce_scatter and
all_gather refuse it.

SimGroup(n) runs the same algorithms on a list of n tensors, one per simulated rank, in one process
(on one GPU or the CPU), with the same numerics as n processes: same codec calls on the same
chunks, same summation order.

Calls are stream-ordered: codec kernels run on the current CUDA stream, NCCL collectives are
ordered after them by torch, and nothing synchronises the host.
"""
import torch
import torch.distributed as dist

from . import codec as tc
from . import lowrank as lr
from .errors import TacoInputError

__all__ = ["all_reduce", "reduce_scatter", "all_gather", "sendrecv", "transfer", "p2p_wire_bytes", "SimGroup",
           "LoopbackGroup", "Feedback", "auto_algo", "chunk_layout", "ALGOS"]

ALGOS = ("auto", "one_shot", "two_shot", "ring")


def auto_algo(nbytes, n):
    """The all-reduce algorithm `taco comm --algo auto` runs for a per-rank buffer of nbytes."""
    if n == 2 or nbytes < (1 << 20):
        return "one_shot"
    return "two_shot" if nbytes < (32 << 20) else "ring"


def chunk_layout(rows, cols, n):
    """[(element offset, rows, cols)] of the n chunks of a [rows, cols] buffer (sim::chunk_layout)."""
    if rows % n == 0:
        r = rows // n
        return [(j * r * cols, r, cols) for j in range(n)]
    numel = rows * cols
    return [(numel * j // n, 1, numel * (j + 1) // n - numel * j // n) for j in range(n)]


def _round16(b):
    return (b + 15) // 16 * 16


def _plain(variant):
    return variant is None or variant == "none"


class Feedback:
    """Error-feedback residuals (float32), one per (stream key, rank, stage), kept across steps."""

    def __init__(self):
        self.residuals = {}
        self.warm = {}  # low-rank all-reduce (taco.lowrank): stream key -> warm-start Q [cols, R]

    def get(self, key, like, numel):
        r = self.residuals.get(key)
        if r is None:
            r = torch.zeros(numel, dtype=torch.float32, device=like.device)
            self.residuals[key] = r
        elif r.numel() != numel:
            raise ValueError(f"error feedback stream {key}: shape changed ({r.numel()} -> {numel} elements)")
        return r

    def reset(self):
        self.residuals.clear()
        self.warm.clear()


# ---- geometry and codec calls on flat tensors ---------------------------------------------------

def _rows_cols(x):
    if x.numel() == 0:
        raise ValueError("cannot communicate an empty tensor")
    cols = x.shape[-1] if x.dim() else 1
    return x.numel() // cols, cols


class _Plan:
    """A [rows, cols] buffer cut into n chunks, and the wire slots of its chunks (16-byte aligned)."""

    def __init__(self, codec, rows, cols, n):
        self.rows, self.cols, self.n = rows, cols, n
        self.chunks = chunk_layout(rows, cols, n)
        self.cb = [codec.chunk_bytes(r, c) for _, r, c in self.chunks]
        self.slot = max(_round16(b) for b in self.cb)
        # Equal chunks whose wires fill their slots exactly: one codec launch covers all of them.
        self.packed = rows % n == 0 and self.slot == self.cb[0]


class _Codec:
    """The codec calls of one collective: flat torch tensors in, on the tensor's stream."""

    def __init__(self, variant, x, feedback, key):
        self.c = tc.get_codec(variant)
        if self.c.feedback and feedback is None:
            raise ValueError(f"variant {variant!r} is error feedback: pass a taco.dist.Feedback (and a stream key)")
        self.stream = tc._stream(x)
        # Error feedback when the variant asks for it (ef:<v>); `feedback` holds the residuals.
        self.feedback, self.key = (feedback, key) if self.c.feedback else (None, None)

    def plan(self, rows, cols, n):
        return _Plan(self.c, rows, cols, n)

    def encode(self, x, rows, cols, chunks, out, rank, stage):
        if self.feedback is None:
            self.c.encode(P(x), P(out), chunks, rows, cols, self.stream)
        else:
            res = self.feedback.get((self.key, rank, stage), x, x.numel())
            self.c.encode_ef(P(x), P(res), P(out), chunks, rows, cols, self.stream)

    def decode_reduce(self, wires, rows, cols, chunks, out):
        self.c.decode_reduce([P(w) for w in wires], P(out), chunks, rows, cols, self.stream)

    def decode_reduce_encode(self, wires, rows, cols, out, rank, stage, chunks=1):
        if self.feedback is None:
            self.c.decode_reduce_encode([P(w) for w in wires], P(out), chunks, rows, cols, self.stream)
        else:  # the same fp32 sum, encoded with the owner's residual
            s = torch.empty(chunks * rows * cols, dtype=torch.float32, device=out.device)
            self.c.decode_reduce([P(w) for w in wires], P(s), chunks, rows, cols, self.stream)
            self.encode(s, rows, cols, chunks, out, rank, stage)

    def decode_add_encode(self, wire, own, rows, cols, out, rank, stage):
        if self.feedback is None:
            self.c.decode_add_encode(P(wire), P(own), P(out), rows, cols, self.stream)
        else:
            s = torch.empty(rows * cols, dtype=torch.float32, device=out.device)
            self.c.decode_reduce([P(wire)], P(s), 1, rows, cols, self.stream)
            s.add_(own.float())
            self.encode(s, rows, cols, 1, out, rank, stage)

    def encode_chunks(self, p, x, send, rank):
        """Rank `rank`'s n chunks of x (flat) into the slots of `send` (n * slot bytes)."""
        if p.packed:
            self.encode(x, p.rows // p.n, p.cols, p.n, send, rank, "in")
            return
        for j, (off, r, c) in enumerate(p.chunks):
            self.encode(x[off:off + r * c], r, c, 1, send[j * p.slot:j * p.slot + p.cb[j]], rank, ("in", j))


P = tc._pass


def _u8(n, like):
    return torch.empty(n, dtype=torch.uint8, device=like.device)


def _out_like(x, shape=None):
    return torch.empty(x.shape if shape is None else shape, dtype=x.dtype, device=x.device)


def _check(x, variant, algo=None):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"expected a torch tensor, got {type(x).__name__}")
    if not x.is_contiguous():
        raise ValueError("the tensor is not contiguous (call .contiguous() first)")
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"dtype must be float32, bfloat16 or float16, got {x.dtype}")
    if algo is not None and algo not in ALGOS:
        raise ValueError(f"unknown all-reduce algorithm {algo!r} (one of {', '.join(ALGOS)})")
    if not _plain(variant) and lr.spec_of(variant) is None:
        tc.get_codec(variant)  # ValueError for a bad variant, before any communication


def _no_lowrank(variant, kind):
    """The low-rank all-reduce has no reduce-scatter or all-gather form: one line saying so."""
    spec = lr.spec_of(variant)
    if spec is not None:
        raise TacoInputError(f"variant {spec.name} is a low-rank all-reduce: {kind} (sequence parallelism) "
                                "takes a codec, not powersgd")


def _check_scatter(x, n):
    """A reduce-scatter gives every rank an equal shard: the element count must divide by n."""
    if x.numel() % n:
        raise ValueError(f"reduce_scatter: {x.numel()} elements do not split into {n} equal shards "
                         f"(shape {tuple(x.shape)}; the element count must be divisible by the group size)")


def _shard_shape(x, n, rank):
    """The shape of rank `rank`'s chunk of x: dim 0 split n ways when it divides, else flat."""
    rows, cols = _rows_cols(x)
    if x.dim() >= 1 and x.shape[0] % n == 0:
        return (x.shape[0] // n,) + tuple(x.shape[1:])
    off, r, c = chunk_layout(rows, cols, n)[rank]
    return (r * c,)


# ---- transports: real process groups --------------------------------------------------------------

class _Group:
    def __init__(self, group):
        self.group = group
        self.n = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.gloo = str(dist.get_backend(group)).lower() == "gloo"

    def global_rank(self, q):
        """The default group's rank of this group's rank q (p2p calls take global ranks)."""
        if self.group is None:
            return q
        get = getattr(dist, "get_global_rank", None) or dist.distributed_c10d._get_global_rank  # torch < 2.0
        return get(self.group, q)

    def all_gather(self, send):
        """Every rank's `send` (same size) concatenated in rank order."""
        if self.gloo:
            dtype = send.dtype
            send = send.view(torch.uint8)  # gloo moves bytes of any dtype (it has no bfloat16)
            parts = [torch.empty_like(send) for _ in range(self.n)]
            dist.all_gather(parts, send, group=self.group)
            return torch.cat(parts).view(dtype)
        out = torch.empty(self.n * send.numel(), dtype=send.dtype, device=send.device)
        dist.all_gather_into_tensor(out, send, group=self.group)
        return out

    def exchange(self, wires):
        """This rank's factor wire -> every rank's, in rank order (the low-rank all-reduce)."""
        (w,) = wires
        return list(self.all_gather(w.contiguous().view(-1)).view((self.n,) + tuple(w.shape)).unbind(0))

    def all_to_all(self, send):
        """Slot q of `send` (n equal slots) goes to rank q; slot q of the result came from rank q."""
        recv = torch.empty_like(send)
        if not self.gloo:
            dist.all_to_all_single(recv, send, group=self.group)
            return recv
        slot = send.numel() // self.n
        ops = []
        for q in range(self.n):
            if q == self.rank:
                recv[q * slot:(q + 1) * slot].copy_(send[q * slot:(q + 1) * slot])
                continue
            peer = self.global_rank(q)
            ops.append(dist.P2POp(dist.isend, send[q * slot:(q + 1) * slot], peer, self.group))
            ops.append(dist.P2POp(dist.irecv, recv[q * slot:(q + 1) * slot], peer, self.group))
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        return recv

    def shift(self, send, recv):
        """Sends `send` to rank + 1 and receives `recv` from rank - 1 (a ring hop)."""
        nxt, prv = self.global_rank((self.rank + 1) % self.n), self.global_rank((self.rank - 1) % self.n)
        ops = [dist.P2POp(dist.isend, send, nxt, self.group), dist.P2POp(dist.irecv, recv, prv, self.group)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()


# ---- the collectives on one rank of a process group ---------------------------------------------------

def all_reduce(x, variant=None, algo="auto", group=None, *, feedback=None, key=None):
    """The sum of x over the group, compressed with `variant` (a new tensor, x's shape and dtype)."""
    _check(x, variant, algo)
    g = _Group(group)
    if g.n == 1:
        return x.clone()
    if _plain(variant):
        return _plain_all_reduce(x, g)
    spec = lr.spec_of(variant)
    if spec is not None:
        return lr.reduce([x], [g.rank], spec, feedback, key, g.exchange)
    n, r = g.n, g.rank
    cx = _Codec(variant, x, feedback, key)
    rows, cols = _rows_cols(x)
    p = cx.plan(rows, cols, n)
    algo = auto_algo(x.numel() * x.element_size(), n) if algo == "auto" else algo
    flat, out = x.reshape(-1), _out_like(x)
    oflat = out.view(-1)
    S = p.slot

    def decode_gathered(gath):  # gath: chunk j's final wire in slot j
        if p.packed:
            cx.decode_reduce([gath], p.rows // n, cols, n, oflat)
            return
        for j, (off, rr, cc) in enumerate(p.chunks):
            cx.decode_reduce([gath[j * S:j * S + p.cb[j]]], rr, cc, 1, oflat[off:off + rr * cc])

    if algo == "one_shot":
        send = _u8(n * S, x)
        cx.encode_chunks(p, flat, send, r)
        gath = g.all_gather(send)  # rank q's chunk j at q * n * S + j * S
        if p.packed:
            cx.decode_reduce([gath[q * n * S:(q + 1) * n * S] for q in range(n)], p.rows // n, cols, n, oflat)
        else:
            for j, (off, rr, cc) in enumerate(p.chunks):
                srcs = [gath[q * n * S + j * S:q * n * S + j * S + p.cb[j]] for q in range(n)]
                cx.decode_reduce(srcs, rr, cc, 1, oflat[off:off + rr * cc])
    elif algo == "two_shot":
        send = _u8(n * S, x)
        cx.encode_chunks(p, flat, send, r)
        recv = g.all_to_all(send)  # slot q: rank q's encoding of chunk r
        _, rr, cc = p.chunks[r]
        shard = _u8(S, x)
        cx.decode_reduce_encode([recv[q * S:q * S + p.cb[r]] for q in range(n)], rr, cc, shard[:p.cb[r]], r, "shard")
        decode_gathered(g.all_gather(shard))
    elif algo == "ring":
        a, b = _u8(S, x), _u8(S, x)
        off, rr, cc = p.chunks[(r - 1) % n]
        cx.encode(flat[off:off + rr * cc], rr, cc, 1, a[:p.cb[(r - 1) % n]], r, ("ring", 0))
        for h in range(1, n):
            sent, got = (r - h) % n, (r - 1 - h) % n
            g.shift(a[:p.cb[sent]], b[:p.cb[got]])
            off, rr, cc = p.chunks[got]
            cx.decode_add_encode(b[:p.cb[got]], flat[off:off + rr * cc], rr, cc, a[:p.cb[got]], r, ("ring", h))
        decode_gathered(g.all_gather(a))
    return out


def reduce_scatter(x, variant=None, group=None, *, feedback=None, key=None):
    """This rank's chunk of the sum of x over the group (dim 0 split N ways; flat if it does not divide)."""
    _no_lowrank(variant, "reduce_scatter")
    _check(x, variant)
    g = _Group(group)
    if g.n == 1:
        return x.clone()
    n, r = g.n, g.rank
    _check_scatter(x, n)
    shape = _shard_shape(x, n, r)
    if _plain(variant):
        full = _plain_all_reduce(x, g).view(-1)
        off, rr, cc = chunk_layout(*_rows_cols(x), n)[r]
        return full[off:off + rr * cc].clone().view(shape)
    cx = _Codec(variant, x, feedback, key)
    rows, cols = _rows_cols(x)
    p = cx.plan(rows, cols, n)
    S = p.slot
    send = _u8(n * S, x)
    cx.encode_chunks(p, x.reshape(-1), send, r)
    recv = g.all_to_all(send)
    _, rr, cc = p.chunks[r]
    out = _out_like(x, shape)
    cx.decode_reduce([recv[q * S:q * S + p.cb[r]] for q in range(n)], rr, cc, 1, out.view(-1))
    return out


def all_gather(x, variant=None, group=None, *, feedback=None, key=None):
    """Every rank's x concatenated along dim 0 in rank order (each rank encodes its x once)."""
    _no_lowrank(variant, "all_gather")
    _check(x, variant)
    g = _Group(group)
    if g.n == 1:
        return x.clone()
    n, r = g.n, g.rank
    shape = (n * x.shape[0],) + tuple(x.shape[1:]) if x.dim() else (n,)
    if _plain(variant):
        return g.all_gather(x.contiguous().view(-1)).view(shape)
    cx = _Codec(variant, x, feedback, key)
    rows, cols = _rows_cols(x)
    cb = cx.c.chunk_bytes(rows, cols)
    S = _round16(cb)
    send = _u8(S, x)
    cx.encode(x.reshape(-1), rows, cols, 1, send[:cb], r, "in")
    gath = g.all_gather(send)
    out = _out_like(x, shape)
    oflat = out.view(-1)
    if S == cb:
        cx.decode_reduce([gath], rows, cols, n, oflat)
    else:
        for q in range(n):
            cx.decode_reduce([gath[q * S:q * S + cb]], rows, cols, 1, oflat[q * rows * cols:(q + 1) * rows * cols])
    return out


def _plain_all_reduce(x, g):
    if g.gloo:  # gloo: float32 staging, one rounding at the end
        buf = x.detach().to(torch.float32, copy=True)
        dist.all_reduce(buf, group=g.group)
        return buf.to(x.dtype)
    buf = x.detach().clone()
    dist.all_reduce(buf, group=g.group)
    return buf


# ---- the same collectives on n simulated ranks ------------------------------------------------------

class SimGroup:
    """n TP ranks in one process: every collective takes a list of n tensors (rank q's at index q)
    and returns a list of n tensors with the bits n real processes would hold."""

    def __init__(self, n):
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"a simulated group needs at least 1 rank, got {n!r}")
        self.n = n

    def _inputs(self, xs, variant, algo=None):
        xs = list(xs)
        if len(xs) != self.n:
            raise ValueError(f"{len(xs)} tensors for a group of {self.n} ranks")
        for x in xs:
            _check(x, variant, algo)
            if x.shape != xs[0].shape or x.dtype != xs[0].dtype or x.device != xs[0].device:
                raise ValueError("the ranks' tensors differ in shape, dtype or device")
        return xs

    def all_reduce(self, xs, variant=None, algo="auto", *, feedback=None, key=None):
        xs = self._inputs(xs, variant, algo)
        n, x0 = self.n, xs[0]
        if n == 1:
            return [x0.clone()]
        if _plain(variant):
            return [_sum_f32(xs).to(x0.dtype)] * n
        spec = lr.spec_of(variant)
        if spec is not None:  # every rank's wire is here already
            return [lr.reduce(xs, list(range(n)), spec, feedback, key, lambda ws: ws)] * n
        cx = _Codec(variant, x0, feedback, key)
        rows, cols = _rows_cols(x0)
        p = cx.plan(rows, cols, n)
        algo = auto_algo(x0.numel() * x0.element_size(), n) if algo == "auto" else algo
        out = _out_like(x0)
        oflat = out.view(-1)
        flats = [x.reshape(-1) for x in xs]
        if algo in ("one_shot", "two_shot"):
            sends = []
            for q in range(n):
                s = _u8(n * p.slot, x0)
                cx.encode_chunks(p, flats[q], s, q)
                sends.append(s)
            S = p.slot
            # (sources, rows, cols, chunks, destination, owner ranks) of each codec launch: one for
            # every chunk when the chunks are packed, else one per chunk
            if p.packed:
                launches = [(sends, p.rows // n, cols, n, oflat, list(range(n)))]
            else:
                launches = [([s[j * S:j * S + p.cb[j]] for s in sends], rr, cc, 1, oflat[off:off + rr * cc], [j])
                            for j, (off, rr, cc) in enumerate(p.chunks)]
            for srcs, rr, cc, k, dst, owners in launches:
                if algo == "one_shot":
                    cx.decode_reduce(srcs, rr, cc, k, dst)
                    continue
                cb = p.cb[owners[0]]
                shard = _u8(k * cb, x0)
                if cx.feedback is None:
                    cx.decode_reduce_encode(srcs, rr, cc, shard, None, None, chunks=k)
                else:  # each owner's re-encode keeps its own residual
                    for i, owner in enumerate(owners):
                        cx.decode_reduce_encode([s[i * cb:(i + 1) * cb] for s in srcs], rr, cc,
                                                shard[i * cb:(i + 1) * cb], owner, "shard")
                cx.decode_reduce([shard], rr, cc, k, dst)
            return [out] * n
        if algo != "ring":
            raise ValueError(f"unknown all-reduce algorithm {algo!r}")
        for j, (off, rr, cc) in enumerate(p.chunks):
            cb = p.cb[j]
            k = (j + 1) % n  # the rank that starts chunk j
            w = _u8(cb, x0)
            cx.encode(flats[k][off:off + rr * cc], rr, cc, 1, w, k, ("ring", 0))
            for h in range(1, n):
                k = (k + 1) % n  # the rank that receives chunk j at hop h
                w2 = _u8(cb, x0)
                cx.decode_add_encode(w, flats[k][off:off + rr * cc], rr, cc, w2, k, ("ring", h))
                w = w2
            cx.decode_reduce([w], rr, cc, 1, oflat[off:off + rr * cc])
        return [out] * n

    def reduce_scatter(self, xs, variant=None, *, feedback=None, key=None):
        """Rank q's entry: chunk q of the sum."""
        _no_lowrank(variant, "reduce_scatter")
        xs = self._inputs(xs, variant)
        n, x0 = self.n, xs[0]
        if n == 1:
            return [x0.clone()]
        _check_scatter(x0, n)
        rows, cols = _rows_cols(x0)
        chunks = chunk_layout(rows, cols, n)
        shapes = [_shard_shape(x0, n, q) for q in range(n)]
        if _plain(variant):
            full = _sum_f32(xs).to(x0.dtype).view(-1)
            return [full[off:off + r * c].view(sh) for (off, r, c), sh in zip(chunks, shapes)]
        cx = _Codec(variant, x0, feedback, key)
        p = cx.plan(rows, cols, n)
        S = p.slot
        sends = []
        for q in range(n):
            s = _u8(n * S, x0)
            cx.encode_chunks(p, xs[q].reshape(-1), s, q)
            sends.append(s)
        full = torch.empty(rows * cols, dtype=x0.dtype, device=x0.device)
        if p.packed:
            cx.decode_reduce(sends, rows // n, cols, n, full)
        else:
            for j, (off, r, c) in enumerate(chunks):
                cx.decode_reduce([s[j * S:j * S + p.cb[j]] for s in sends], r, c, 1, full[off:off + r * c])
        return [full[off:off + r * c].view(sh) for (off, r, c), sh in zip(chunks, shapes)]

    def all_gather(self, xs, variant=None, *, feedback=None, key=None):
        """Every entry: the n tensors concatenated along dim 0 (identical on every rank)."""
        _no_lowrank(variant, "all_gather")
        xs = self._inputs(xs, variant)
        n, x0 = self.n, xs[0]
        shape = (n * x0.shape[0],) + tuple(x0.shape[1:]) if x0.dim() else (n,)
        if n == 1:
            return [x0.clone()]
        if _plain(variant):
            return [torch.cat([x.reshape(-1) for x in xs]).view(shape)] * n
        cx = _Codec(variant, x0, feedback, key)
        rows, cols = _rows_cols(x0)
        cb = cx.c.chunk_bytes(rows, cols)
        out = torch.empty(shape, dtype=x0.dtype, device=x0.device)
        oflat = out.view(-1)
        wires = _u8(n * cb, x0)
        for q in range(n):
            cx.encode(xs[q].reshape(-1), rows, cols, 1, wires[q * cb:(q + 1) * cb], q, "in")
        cx.decode_reduce([wires], rows, cols, n, oflat)
        return [out] * n


class LoopbackGroup:
    """Rank 0 of n, alone: every collective does this rank's codec work (the same kernels on
    buffers of the same sizes as with n ranks, the peers' wires being copies of its own) and moves
    nothing. Plain collectives cost nothing. For timing one rank's compute and codecs on one GPU;
    the results are not a reduction."""

    def __init__(self, n):
        self.n = n
        self._bufs = {}

    def _buf(self, key, nbytes, like):
        b = self._bufs.get(key)
        if b is None or b.numel() != nbytes or b.device != like.device:
            b = self._bufs[key] = torch.zeros(nbytes, dtype=torch.uint8, device=like.device)
        return b

    def all_reduce(self, xs, variant=None, algo="auto", *, feedback=None, key=None):
        (x,) = xs
        if _plain(variant) or self.n == 1:
            return [x]
        n = self.n
        spec = lr.spec_of(variant)
        if spec is not None:  # the peers' factors are copies of this rank's
            return [lr.reduce([x], [0], spec, feedback, key, lambda ws: ws * n)]
        cx = _Codec(variant, x, feedback, key)
        rows, cols = _rows_cols(x)
        p = cx.plan(rows, cols, n)
        if not p.packed:
            raise ValueError(f"loopback timing needs {rows} rows divisible by {n} and 16-byte chunk wires")
        algo = auto_algo(x.numel() * x.element_size(), n) if algo == "auto" else algo
        r, S = rows // n, p.slot
        out = _out_like(x)
        send = self._buf(("send", x.shape), n * S, x)
        cx.encode_chunks(p, x.reshape(-1), send, 0)
        if algo == "one_shot":
            cx.decode_reduce([send] * n, r, cols, n, out.view(-1))
        elif algo == "two_shot":
            shard = self._buf(("shard", x.shape), n * S, x)
            cx.decode_reduce_encode([send[:S]] * n, r, cols, shard[:S], 0, "shard")
            cx.decode_reduce([shard], r, cols, n, out.view(-1))
        else:  # ring: n - 1 decode-add-encode hops on one chunk, then the gathered shards
            a, b = send[:S], self._buf(("hop", x.shape), S, x)
            for h in range(1, n):
                cx.decode_add_encode(a, x.reshape(-1)[:r * cols], r, cols, b, 0, ("ring", h))
                a, b = b, a
            cx.decode_reduce([send], r, cols, n, out.view(-1))
        return [out]

    def reduce_scatter(self, xs, variant=None, *, feedback=None, key=None):
        _no_lowrank(variant, "reduce_scatter")
        (x,) = xs
        if self.n > 1:
            _check_scatter(x, self.n)
        shape = _shard_shape(x, self.n, 0)
        if _plain(variant) or self.n == 1:
            return [x.reshape(-1)[:_numel(shape)].view(shape)]
        cx = _Codec(variant, x, feedback, key)
        rows, cols = _rows_cols(x)
        p = cx.plan(rows, cols, self.n)
        if not p.packed:
            raise ValueError(f"loopback timing needs {rows} rows divisible by {self.n} and 16-byte chunk wires")
        send = self._buf(("send", x.shape), self.n * p.slot, x)
        cx.encode_chunks(p, x.reshape(-1), send, 0)
        out = _out_like(x, shape)
        cx.decode_reduce([send[:p.slot]] * self.n, rows // self.n, cols, 1, out.view(-1))
        return [out]

    def all_gather(self, xs, variant=None, *, feedback=None, key=None):
        _no_lowrank(variant, "all_gather")
        (x,) = xs
        shape = (self.n * x.shape[0],) + tuple(x.shape[1:])
        if _plain(variant) or self.n == 1:
            return [x.repeat((self.n,) + (1,) * (x.dim() - 1))]
        cx = _Codec(variant, x, feedback, key)
        rows, cols = _rows_cols(x)
        cb = cx.c.chunk_bytes(rows, cols)
        wires = self._buf(("gather", x.shape), self.n * cb, x)
        cx.encode(x.reshape(-1), rows, cols, 1, wires[:cb], 0, "in")
        out = _out_like(x, shape)
        cx.decode_reduce([wires], rows, cols, self.n, out.view(-1))
        return [out]


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def wire_bytes_sent(x, variant, kind, n):
    """Bytes a rank encodes for one collective on x (plain: x's own bytes): all_gather encodes x
    whole, the others its n chunks; the low-rank all-reduce its two factors, (rows + cols) x R
    elements of 2 bytes (bf16) or 4 (fp32)."""
    if _plain(variant) or n == 1:
        return x.numel() * x.element_size()
    rows, cols = _rows_cols(x)
    spec = lr.spec_of(variant)
    if spec is not None:
        if kind != "all_reduce":
            _no_lowrank(spec, kind)
        return lr.wire_bytes(spec, rows, cols)
    c = tc.get_codec(variant)
    if kind == "all_gather":
        return c.chunk_bytes(rows, cols)
    return sum(c.chunk_bytes(r, cc) for _, r, cc in chunk_layout(rows, cols, n))


def _sum_f32(xs):
    acc = xs[0].float()
    for x in xs[1:]:
        acc = acc + x.float()
    return acc


# ---- point-to-point: pipeline stage boundaries -------------------------------------------------
# A message is the codec's wire of the whole tensor ([rows, cols] view, cols = the last dimension,
# one chunk); the receiver decodes it into the tensor's dtype. variant None / "none" sends the
# tensor's own bytes. An `ef:<v>` variant keeps one float32 residual per (key, rank, "p2p") in a
# Feedback (a pipeline keys a stream per boundary and direction). `transfer` runs the same codec
# calls on the same bits in one process, so a simulated pipeline gives the processes' numbers.

def _p2p_codec(variant):
    return None if _plain(variant) else tc.get_codec(variant)


def p2p_wire_bytes(x, variant):
    """Bytes one transfer of x puts on the wire."""
    c = _p2p_codec(variant)
    if c is None:
        return x.numel() * x.element_size()
    return c.chunk_bytes(*_rows_cols(x))


def _p2p_encode(x, variant, feedback, key, rank):
    """x's wire (uint8); with an ef: variant, through the residual (key, rank, "p2p")."""
    _check(x, variant)
    if _plain(variant):
        return x.detach().contiguous().view(-1).view(torch.uint8)
    k = _Codec(variant, x, feedback, key)
    rows, cols = _rows_cols(x)
    wire = _u8(k.c.chunk_bytes(rows, cols), x)
    k.encode(x.detach().contiguous().view(-1), rows, cols, 1, wire, rank, "p2p")
    return wire


def _p2p_empty_wire(like, variant):
    return _u8(p2p_wire_bytes(like, variant), like)


def _p2p_decode(wire, like, variant):
    c = _p2p_codec(variant)
    if c is None:
        return wire.view(like.dtype).view(like.shape).clone()
    out = _out_like(like)
    rows, cols = _rows_cols(like)
    c.decode_reduce([P(wire)], P(out.view(-1)), 1, rows, cols, tc._stream(like))
    return out


def transfer(x, variant=None, *, feedback=None, key=None, rank=0):
    """The tensor a receiver decodes when rank `rank` sends x (a simulated send/recv)."""
    return _p2p_decode(_p2p_encode(x, variant, feedback, key, rank), x, variant)


def sendrecv(x=None, dst=None, like=None, src=None, variant=None, group=None, *, feedback=None, key=None):
    """Sends x to rank dst and/or receives a tensor shaped like `like` from rank src (ranks of
    `group`), in one batch of isend/irecv, and waits for both. Returns the received tensor, or
    None. `key` names the sent stream for error feedback."""
    if (x is None) != (dst is None) or (like is None) != (src is None):
        raise ValueError("sendrecv: give x with dst, like with src, or both pairs")
    g = _Group(group)
    ops, wire = [], None
    if x is not None:
        ops.append(dist.P2POp(dist.isend, _p2p_encode(x, variant, feedback, key, g.rank), g.global_rank(dst), group))
    if like is not None:
        wire = _p2p_empty_wire(like, variant)
        ops.append(dist.P2POp(dist.irecv, wire, g.global_rank(src), group))
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    return None if wire is None else _p2p_decode(wire, like, variant)
