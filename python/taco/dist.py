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
("sum", piece, step) for the re-encode of a sum at that step of its plan: the two-shot owner's
shard, each ring hop). A variant "ef:<v>" asks for it; a Feedback object passed with another
variant is ignored.

Low rank: all_reduce also takes `[ef:]powersgd:r<R>[:fp32]` (a string, or its parsed
taco.lowrank.LowRank): PowerSGD's two factor all-reduces with a warm start per stream, and with
ef: error feedback (taco.lowrank has the algorithm). It needs a Feedback object and a key (the
warm start lives there), ignores `algo` (each rank's factors reach every rank, as one-shot's chunks
do, and are summed in float32 in rank order), and is an all-reduce only: reduce_scatter and
all_gather refuse it.

The algorithms are not written here: every compressed collective runs the rank's plan from
taco._C.collective_plan, the C++ statement that `taco comm` runs on GPUs (collectives/comm_alg_*.hpp).
SimGroup(n) runs the n ranks' plans on a list of n tensors, one per simulated rank, in one process
(on one GPU or the CPU), with the same numerics as n processes: same codec calls on the same
chunks, same summation order.

Calls are stream-ordered: codec kernels run on the current CUDA stream, NCCL collectives are
ordered after them by torch, and nothing synchronises the host.
"""
from functools import lru_cache

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
    return tc._C.auto_allreduce_algo(float(nbytes), n)


def chunk_layout(rows, cols, n):
    """[(element offset, rows, cols)] of the n chunks of a [rows, cols] buffer (sim::chunk_layout)."""
    return [tuple(c) for c in tc._C.chunk_layout(rows, cols, n)]


def _plain(variant):
    return variant is None or variant == "none"


class Feedback:
    """Error-feedback residuals (float32), one per (stream key, rank, stage), kept across steps.
    Stages: "in" (the rank's own input, every element encoded once a call), ("sum", piece, step)
    for the re-encode of a sum at that step of the rank's plan (two-shot's shard, ring hops)."""

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


# ---- plans: the C++ statement of every algorithm (collectives/comm_alg_*.hpp) ----------------------
# taco._C.collective_plan gives one rank's plan of a collective: pieces of steps, each step either
# codec ops (encode, decode, decode_reduce_encode, decode_add_encode, copy) or communication (send,
# recv, all_gather), over the rank's buffers In (its input), Out and the wire buffers W0..W3. The
# same plans drive `taco comm` on GPUs and its CPU host executor; here they run over a process
# group (_Group), over n simulated ranks in one process (SimGroup) and on one rank alone
# (LoopbackGroup). Only the transport differs.

_IN, _OUT = 0, 1  # buffer numbers of a plan's references; 2..5 are W0..W3


def _rows_cols(x):
    if x.numel() == 0:
        raise ValueError("cannot communicate an empty tensor")
    cols = x.shape[-1] if x.dim() else 1
    return x.numel() // cols, cols


@lru_cache(maxsize=512)
def _plan(codec, coll, algo, n, rank, rows, cols, elem_bytes):
    return tc._C.collective_plan(codec, coll, algo, n, rank, rows, cols, elem_bytes)


class _Codec:
    """The codec calls of one collective: flat torch tensors in, on the tensor's stream."""

    def __init__(self, variant, x, feedback, key):
        self.c = tc.get_codec(variant)
        if self.c.feedback and feedback is None:
            raise ValueError(f"variant {variant!r} is error feedback: pass a taco.dist.Feedback (and a stream key)")
        self.stream = tc._stream(x)
        # Error feedback when the variant asks for it (ef:<v>); `feedback` holds the residuals.
        self.feedback, self.key = (feedback, key) if self.c.feedback else (None, None)

    def plan(self, coll, algo, x, n, rank):
        rows, cols = _rows_cols(x)
        return _plan(self.c, coll, algo, n, rank, rows, cols, x.element_size())

    def residual(self, rank, stage, numel, like):
        return None if self.feedback is None else self.feedback.get((self.key, rank, stage), like, numel)

    def encode(self, x, rows, cols, chunks, out, res=None):
        if res is None:
            self.c.encode(P(x), P(out), chunks, rows, cols, self.stream)
        else:
            self.c.encode_ef(P(x), P(res), P(out), chunks, rows, cols, self.stream)

    def decode_reduce(self, wires, rows, cols, chunks, out):
        self.c.decode_reduce([P(w) for w in wires], P(out), chunks, rows, cols, self.stream)

    def decode_reduce_encode(self, wires, rows, cols, chunks, out, res=None):
        if res is None:
            self.c.decode_reduce_encode([P(w) for w in wires], P(out), chunks, rows, cols, self.stream)
            return
        s = torch.empty(chunks * rows * cols, dtype=torch.float32, device=out.device)  # the same fp32 sum
        self.decode_reduce(wires, rows, cols, chunks, s)
        self.encode(s, rows, cols, chunks, out, res)

    def decode_add_encode(self, wire, own, rows, cols, out, res=None):
        if res is None:
            self.c.decode_add_encode(P(wire), P(own), P(out), rows, cols, self.stream)
            return
        s = torch.empty(rows * cols, dtype=torch.float32, device=out.device)
        self.decode_reduce([wire], rows, cols, 1, s)
        s.add_(own.float())
        self.encode(s, rows, cols, 1, out, res)


P = tc._pass


class _Rank:
    """One rank's buffers while it runs a plan: In (x, flat), Out and the wire buffers."""

    def __init__(self, plan, rank, x, out, wires=None):
        self.plan, self.rank = plan, rank
        if wires is None:
            wires = [_u8(n, x) for n in plan["wire_size"]]
        self.bufs = [x.reshape(-1), out.view(-1)] + list(wires)

    def at(self, ref, n):
        """n items (elements of In / Out, bytes of a wire buffer) from a reference (buffer, offset)."""
        b, off = ref
        return self.bufs[b][off:off + n]


def _blocks(op, cb):
    """The codec calls of an op of `count` blocks: (blocks, sources, destination) with the
    blocks of one call side by side (one launch when the plan packed them, else one per block)."""
    kind, rows, cols, count, srcs, sstride, dstride, dst = op[:8]
    unit = lambda ref: rows * cols if ref[0] <= _OUT else cb  # noqa: E731  (a block's size in its buffer)
    if count == 1 or (sstride == unit(srcs[0]) and dstride == unit(dst)):
        return [(count, srcs, dst)]
    return [(1, tuple((b, o + i * sstride) for b, o in srcs), (dst[0], dst[1] + i * dstride)) for i in range(count)]


def _compute(cx, rk, op, stage):
    """One codec op of rank rk's plan; `stage` names the residual of a re-encode ((piece, step))."""
    kind, rows, cols = op[0], op[1], op[2]
    if kind == "copy":
        rk.at(op[7], op[9]).copy_(rk.at(op[4][0], op[9]))
        return
    numel, cb = rows * cols, cx.c.chunk_bytes(rows, cols)
    for k, srcs, dst in _blocks(op, cb):
        if kind == "encode":  # the rank's own input: one residual over In, element for element
            res = cx.residual(rk.rank, "in", rk.plan["in_elems"], rk.bufs[_IN])
            res = None if res is None else res[srcs[0][1]:srcs[0][1] + k * numel]
            cx.encode(rk.at(srcs[0], k * numel), rows, cols, k, rk.at(dst, k * cb), res)
        elif kind == "decode":
            cx.decode_reduce([rk.at(s, k * cb) for s in srcs], rows, cols, k, rk.at(dst, k * numel))
        elif kind == "decode_reduce_encode":
            res = cx.residual(rk.rank, ("sum",) + stage, k * numel, rk.bufs[_IN])
            cx.decode_reduce_encode([rk.at(s, k * cb) for s in srcs], rows, cols, k, rk.at(dst, k * cb), res)
        elif kind == "decode_add_encode":
            res = cx.residual(rk.rank, ("sum",) + stage, numel, rk.bufs[_IN])
            cx.decode_add_encode(rk.at(srcs[0], cb), rk.at(srcs[1], numel), rows, cols, rk.at(dst, cb), res)
        else:
            raise RuntimeError(f"taco.dist: plan op {kind!r} is not a codec op")


def _execute(cx, ranks, transport):
    """Runs the plans of `ranks` (one per process, all of them when simulated) step by step:
    codec ops on every rank, then each communication step through `transport`."""
    pieces = ranks[0].plan["pieces"]
    for p in range(len(pieces)):
        for s in range(len(pieces[p])):
            if pieces[p][s][0]:
                transport(ranks, [rk.plan["pieces"][p][s][1] for rk in ranks])
                continue
            for rk in ranks:
                for op in rk.plan["pieces"][p][s][1]:
                    _compute(cx, rk, op, (p, s))


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


def _gather_shape(x, n):
    return (n * x.shape[0],) + tuple(x.shape[1:]) if x.dim() else (n,)


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

    def all_gather(self, send, out=None):
        """Every rank's `send` (same size) concatenated in rank order (into `out` when given)."""
        if self.gloo:
            dtype = send.dtype
            send = send.view(torch.uint8)  # gloo moves bytes of any dtype (it has no bfloat16)
            parts = [torch.empty_like(send) for _ in range(self.n)]
            dist.all_gather(parts, send, group=self.group)
            got = torch.cat(parts).view(dtype)
            return got if out is None else out.copy_(got)
        if out is None:
            out = torch.empty(self.n * send.numel(), dtype=send.dtype, device=send.device)
        dist.all_gather_into_tensor(out, send, group=self.group)
        return out

    def exchange(self, wires):
        """This rank's factor wire -> every rank's, in rank order (the low-rank all-reduce)."""
        (w,) = wires
        return list(self.all_gather(w.contiguous().view(-1)).view((self.n,) + tuple(w.shape)).unbind(0))

    def run_comm(self, ranks, steps):
        """A communication step of this rank's plan: its sends and receives in one batch, its
        all-gathers (of wire bytes, the plan's source possibly inside the destination) in order."""
        (rk,), (ops,) = ranks, steps
        p2p = []
        for kind, *_, srcs, _ss, _ds, dst, peer, nbytes in ops:
            if kind == "send":
                p2p.append(dist.P2POp(dist.isend, rk.at(srcs[0], nbytes), self.global_rank(peer), self.group))
            elif kind == "recv":
                p2p.append(dist.P2POp(dist.irecv, rk.at(dst, nbytes), self.global_rank(peer), self.group))
            elif kind == "all_gather":
                self.all_gather(rk.at(srcs[0], nbytes).clone(), out=rk.at(dst, self.n * nbytes))
            else:
                raise RuntimeError(f"taco.dist: plan op {kind!r} is not a communication op")
        if p2p:
            for w in dist.batch_isend_irecv(p2p):
                w.wait()


# ---- the collectives on one rank of a process group ---------------------------------------------------

def _run_group(coll, x, variant, algo, g, feedback, key, out):
    cx = _Codec(variant, x, feedback, key)
    rk = _Rank(cx.plan(coll, algo, x, g.n, g.rank), g.rank, x, out)
    _execute(cx, [rk], g.run_comm)
    return out


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
    return _run_group("all_reduce", x, variant, algo, g, feedback, key, _out_like(x))


def reduce_scatter(x, variant=None, group=None, *, feedback=None, key=None):
    """This rank's chunk of the sum of x over the group (dim 0 split N ways; flat if it does not divide)."""
    _no_lowrank(variant, "reduce_scatter")
    _check(x, variant)
    g = _Group(group)
    if g.n == 1:
        return x.clone()
    _check_scatter(x, g.n)
    shape = _shard_shape(x, g.n, g.rank)
    if _plain(variant):
        full = _plain_all_reduce(x, g).view(-1)
        off, rr, cc = chunk_layout(*_rows_cols(x), g.n)[g.rank]
        return full[off:off + rr * cc].clone().view(shape)
    return _run_group("reduce_scatter", x, variant, "direct", g, feedback, key, _out_like(x, shape))


def all_gather(x, variant=None, group=None, *, feedback=None, key=None):
    """Every rank's x concatenated along dim 0 in rank order (each rank encodes its x once)."""
    _no_lowrank(variant, "all_gather")
    _check(x, variant)
    g = _Group(group)
    if g.n == 1:
        return x.clone()
    shape = _gather_shape(x, g.n)
    if _plain(variant):
        return g.all_gather(x.contiguous().view(-1)).view(shape)
    return _run_group("all_gather", x, variant, "direct", g, feedback, key, _out_like(x, shape))


def _plain_all_reduce(x, g):
    if g.gloo:  # gloo: float32 staging, one rounding at the end
        buf = x.detach().to(torch.float32, copy=True)
        dist.all_reduce(buf, group=g.group)
        return buf.to(x.dtype)
    buf = x.detach().clone()
    dist.all_reduce(buf, group=g.group)
    return buf


# ---- the same collectives on n simulated ranks ------------------------------------------------------

def _sim_comm(ranks, steps):
    """A communication step of every rank's plan in one process: each send lands in the peer's
    matching receive (in the order both plans list them), each all-gather source in every rank's
    destination slot. Sources are read before any destination is written."""
    sent = {}
    for rk, ops in zip(ranks, steps):
        for op in ops:
            if op[0] == "send":
                sent.setdefault((rk.rank, op[8]), []).append(rk.at(op[4][0], op[9]))
    gathered = [rk.at(op[4][0], op[9]) for rk, ops in zip(ranks, steps) for op in ops if op[0] == "all_gather"]
    writes = []
    for rk, ops in zip(ranks, steps):
        for op in ops:
            if op[0] == "recv":
                writes.append((rk.at(op[7], op[9]), sent[(op[8], rk.rank)].pop(0)))
            elif op[0] == "all_gather":  # one all-gather a step: rank q's source in slot q
                dst = rk.at(op[7], len(ranks) * op[9])
                writes += [(dst[q * op[9]:(q + 1) * op[9]], gathered[q]) for q in range(len(ranks))
                           if not (rk is ranks[q] and dst.data_ptr() + q * op[9] == gathered[q].data_ptr())]
    writes = [(d, s.clone()) for d, s in writes]  # every source read before any write
    for d, s in writes:
        d.copy_(s)


class SimGroup:
    """n TP ranks in one process: every collective takes a list of n tensors (rank q's at index q)
    and returns a list of n tensors with the bits n real processes would hold: every rank runs its
    own plan, and the communication steps copy between their buffers."""

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

    def _run(self, coll, xs, variant, algo, feedback, key, shapes):
        cx = _Codec(variant, xs[0], feedback, key)
        outs = [_out_like(xs[0], sh) for sh in shapes]
        ranks = [_Rank(cx.plan(coll, algo, xs[0], self.n, q), q, xs[q], outs[q]) for q in range(self.n)]
        _execute(cx, ranks, _sim_comm)
        return outs

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
        return self._run("all_reduce", xs, variant, algo, feedback, key, [x0.shape] * n)

    def reduce_scatter(self, xs, variant=None, *, feedback=None, key=None):
        """Rank q's entry: chunk q of the sum."""
        _no_lowrank(variant, "reduce_scatter")
        xs = self._inputs(xs, variant)
        n, x0 = self.n, xs[0]
        if n == 1:
            return [x0.clone()]
        _check_scatter(x0, n)
        shapes = [_shard_shape(x0, n, q) for q in range(n)]
        if _plain(variant):
            full = _sum_f32(xs).to(x0.dtype).view(-1)
            chunks = chunk_layout(*_rows_cols(x0), n)
            return [full[off:off + r * c].view(sh) for (off, r, c), sh in zip(chunks, shapes)]
        return self._run("reduce_scatter", xs, variant, "direct", feedback, key, shapes)

    def all_gather(self, xs, variant=None, *, feedback=None, key=None):
        """Every entry: the n tensors concatenated along dim 0 (identical on every rank)."""
        _no_lowrank(variant, "all_gather")
        xs = self._inputs(xs, variant)
        n, x0 = self.n, xs[0]
        if n == 1:
            return [x0.clone()]
        shape = _gather_shape(x0, n)
        if _plain(variant):
            return [torch.cat([x.reshape(-1) for x in xs]).view(shape)] * n
        return self._run("all_gather", xs, variant, "direct", feedback, key, [shape] * n)


class LoopbackGroup:
    """Rank 0 of n, alone: every collective runs rank 0's plan (the same kernels on buffers of the
    same sizes as with n ranks); a receive gets a copy of what this rank sends in the same step, an
    all-gather this rank's slot in every slot, so every wire decoded is a valid one. Plain
    collectives cost nothing. For timing one rank's compute and codecs on one GPU; the results are
    not a reduction."""

    def __init__(self, n):
        self.n = n
        self._bufs = {}

    def _wires(self, coll, plan, like):
        key = (coll, plan["algo"], plan["in_elems"], like.dtype, like.device)
        w = self._bufs.get(key)
        if w is None:
            w = self._bufs[key] = [torch.zeros(n, dtype=torch.uint8, device=like.device) for n in plan["wire_size"]]
        return w

    def _comm(self, ranks, steps):
        (rk,), (ops,) = ranks, steps
        sent = [rk.at(op[4][0], op[9]) for op in ops if op[0] == "send"]
        recvs = [op for op in ops if op[0] == "recv"]
        for op, src in zip(recvs, sent):  # equal chunks (checked), so equal sizes
            rk.at(op[7], op[9]).copy_(src)
        for op in ops:
            if op[0] == "all_gather":
                src = rk.at(op[4][0], op[9])
                dst = rk.at(op[7], self.n * op[9]).view(self.n, op[9])
                dst.copy_(src.clone().expand(self.n, op[9]))

    def _run(self, coll, x, variant, algo, feedback, key, shape):
        cx = _Codec(variant, x, feedback, key)
        rows, _ = _rows_cols(x)
        if coll != "all_gather" and rows % self.n:
            raise ValueError(f"loopback timing needs {rows} rows divisible by {self.n}")
        plan = cx.plan(coll, algo, x, self.n, 0)
        out = _out_like(x, shape)
        _execute(cx, [_Rank(plan, 0, x, out, self._wires(coll, plan, x))], self._comm)
        return [out]

    def all_reduce(self, xs, variant=None, algo="auto", *, feedback=None, key=None):
        (x,) = xs
        if _plain(variant) or self.n == 1:
            return [x]
        n = self.n
        spec = lr.spec_of(variant)
        if spec is not None:  # the peers' factors are copies of this rank's
            return [lr.reduce([x], [0], spec, feedback, key, lambda ws: ws * n)]
        return self._run("all_reduce", x, variant, algo, feedback, key, x.shape)

    def reduce_scatter(self, xs, variant=None, *, feedback=None, key=None):
        _no_lowrank(variant, "reduce_scatter")
        (x,) = xs
        if self.n > 1:
            _check_scatter(x, self.n)
        shape = _shard_shape(x, self.n, 0)
        if _plain(variant) or self.n == 1:
            return [x.reshape(-1)[:_numel(shape)].view(shape)]
        return self._run("reduce_scatter", x, variant, "direct", feedback, key, shape)

    def all_gather(self, xs, variant=None, *, feedback=None, key=None):
        _no_lowrank(variant, "all_gather")
        (x,) = xs
        shape = (self.n * x.shape[0],) + tuple(x.shape[1:])
        if _plain(variant) or self.n == 1:
            return [x.repeat((self.n,) + (1,) * (x.dim() - 1))]
        return self._run("all_gather", x, variant, "direct", feedback, key, shape)


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def wire_bytes_sent(x, variant, kind, n):
    """Bytes a rank encodes for one collective on x (plain: x's own bytes): all_gather encodes x
    whole, the others its n chunks (the plan's wire bytes); the low-rank all-reduce its two
    factors, (rows + cols) x R elements of 2 bytes (bf16) or 4 (fp32)."""
    if _plain(variant) or n == 1:
        return x.numel() * x.element_size()
    rows, cols = _rows_cols(x)
    spec = lr.spec_of(variant)
    if spec is not None:
        if kind != "all_reduce":
            _no_lowrank(spec, kind)
        return lr.wire_bytes(spec, rows, cols)
    algo = "one_shot" if kind == "all_reduce" else "direct"  # every algorithm encodes the n chunks once
    return _plan(tc.get_codec(variant), kind, algo, n, 0, rows, cols, x.element_size())["wire_bytes"]


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
    k.encode(x.detach().contiguous().view(-1), rows, cols, 1, wire, k.residual(rank, "p2p", x.numel(), x))
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
