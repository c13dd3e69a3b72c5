"""Megatron-style tensor-parallel (TP) building blocks with compressed collectives.

Per transformer layer, with TP degree N (methods.md 1.3), the four TP communication points:

  without sequence parallelism (SP)            with SP
  column-parallel input (QKV, fc1)             column-parallel input
    fwd identity                                 fwd all-gather of the sequence shards
    bwd all-reduce of the input gradient         bwd reduce-scatter of the input gradient
  row-parallel output (attn out-proj, fc2)     row-parallel output
    fwd all-reduce of the partial sums           fwd reduce-scatter of the partial sums
    bwd identity                                 bwd all-gather of the gradient shards

The autograd functions below are those points, named as Megatron-LM names them
(megatron/core/tensor_parallel/mappings.py); each collective goes through taco.dist with the codec
the Compression object assigns to its (site, direction).

One model code, two ways to run TP. `TP.process(group)`: one process per rank over
torch.distributed (NCCL or gloo). `TP.simulated(n)`: all n ranks in one process, on one GPU or the
CPU, through taco.dist.SimGroup, with the numerics of n processes. Between a column-parallel and a
row-parallel layer the model holds one tensor per local rank (a list: one entry per process, or n
when simulated); outside, one tensor. With SP a simulated run keeps the whole sequence in one
tensor (the concatenation of the ranks' shards) where a process holds its shard.
"""
import collections
import json

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from . import dist as td
from . import lowrank as lr
from .errors import TacoInputError

SITES = ("attn_qkv", "attn_out", "mlp_fc1", "mlp_out")
COLUMN_SITES = ("attn_qkv", "mlp_fc1")
ROW_SITES = ("attn_out", "mlp_out")
DIRECTIONS = ("fwd", "bwd")
SEQ_DIM = 0


class Compression:
    """Which codec each TP communication site uses, the all-reduce algorithm, the error-feedback
    state (one residual per layer, site, direction, rank and stage; the low-rank all-reduce's warm
    starts), and what happened: collectives fired, elements and wire bytes moved, and sampled
    errors against the exact sum.

    A variant is a codec string (checked here), `[ef:]powersgd:r<R>[:fp32]` (parsed here, once,
    into a taco.lowrank.LowRank that the collectives receive), or None / "none" (plain)."""

    def __init__(self, variant=None, algo="auto", per_site=None, sample_every=0):
        if algo not in td.ALGOS:
            raise TacoInputError(f"unknown all-reduce algorithm {algo!r} (one of {', '.join(td.ALGOS)})")
        self.default = _parse_variant(variant)
        self.algo = algo
        self.per_site = {}
        for (site, direction), v in (per_site or {}).items():
            self.set_variant(site, direction, v)
        self.sample_every = int(sample_every)
        self.feedback = td.Feedback()
        self.step = 0
        self.recorder = None  # taco.capture.recorder.Recorder, or None
        self.fired = collections.Counter()   # (site, direction, collective) -> calls
        self.fired_modules = collections.Counter()  # (module name, direction, collective) -> calls
        # (site, direction) -> per rank: elements of the full-width tensor each message stands for,
        # elements the message carried (fewer under --subspace), and the wire bytes encoded
        self.elements = collections.Counter()
        self.wire_elements = collections.Counter()
        self.wire_bytes = collections.Counter()
        self.samples = []  # {"step", "layer", "site", "direction", "collective", "rel_l2"}

    @classmethod
    def from_selection(cls, path, algo="auto", sample_every=0):
        """From `taco study --select`'s selection.json (choices per site and direction)."""
        try:
            with open(path) as f:
                sel = json.load(f)
            choices = sel["choices"]
            per_site = {(c["site"], c["direction"]): c["variant"] for c in choices}
        except OSError as ex:
            raise TacoInputError(f"--config {path}: {ex.strerror}") from None
        except (ValueError, KeyError, TypeError) as ex:
            raise TacoInputError(f"--config {path}: not a selection.json from taco study --select ({ex})") from None
        return cls(None, algo, per_site, sample_every)

    def set_variant(self, site, direction, variant):
        """The variant of one (site, direction), over the default."""
        if site not in SITES:
            raise TacoInputError(f"unknown TP site {site!r} (one of {', '.join(SITES)})")
        if direction not in DIRECTIONS:
            raise TacoInputError(f"unknown direction {direction!r} for site {site} (fwd or bwd)")
        self.per_site[(site, direction)] = _parse_variant(variant)

    def set_direction(self, direction, variant):
        """`variant` for every site in `direction` ("fwd" or "bwd"), over the default and any
        per-site choice (the trainer's --compress-bwd)."""
        if direction not in DIRECTIONS:
            raise TacoInputError(f"unknown direction {direction!r} (fwd or bwd)")
        for site in SITES:
            self.set_variant(site, direction, variant)

    def variant_for(self, site, direction):
        return self.per_site.get((site, direction), self.default)

    def lowrank_specs(self):
        """The low-rank (powersgd) variants in use, as taco.lowrank.LowRank."""
        return {v for v in list(self.per_site.values()) + [self.default] if isinstance(v, lr.LowRank)}

    def describe(self):
        return {"default": _variant_name(self.default), "algo": self.algo,
                "per_site": {f"{s}.{d}": _variant_name(v) for (s, d), v in sorted(self.per_site.items())}}


def _parse_variant(v):
    """None for plain, a LowRank for `powersgd:...`, else the codec string once checked;
    TacoInputError (one line) for a bad one."""
    if v is None or v == "none":
        return None
    spec = lr.spec_of(v)
    if spec is not None:
        return spec
    from . import codec as tc
    try:
        tc.get_codec(v)
    except ValueError as ex:
        raise TacoInputError(str(ex)) from None
    return v


def _variant_name(v):
    return "none" if v is None else str(v)


class TP:
    """A TP group as the model sees it: `size` ranks, of which `ranks` run in this process.
    Collectives go through a process group (`group`), or through `local`, an object with
    taco.dist.SimGroup's list API (all ranks here, or one rank's work on loopback)."""

    def __init__(self, size, ranks, group=None, local=None, compression=None):
        self.size, self.ranks, self.group, self.local = size, list(ranks), group, local
        self.compression = compression or Compression()

    @classmethod
    def process(cls, group=None, compression=None):
        return cls(dist.get_world_size(group), [dist.get_rank(group)], group, None, compression)

    @classmethod
    def simulated(cls, n, compression=None):
        return cls(n, range(n), None, td.SimGroup(n), compression)

    @classmethod
    def loopback(cls, n, compression=None):
        """Rank 0 of n with every message coming back to it: one rank's compute and codec work,
        no communication (the layer benchmark on one GPU)."""
        return cls(n, [0], None, td.LoopbackGroup(n), compression)

    @property
    def simulated_ranks(self):
        """All ranks in this process: sequence-parallel tensors hold the whole sequence."""
        return len(self.ranks) > 1

    # ---- the compressed collectives of the TP sites (lists: one tensor per local rank) ----
    def collective(self, kind, xs, layer, site, direction, stands_for=None, module=None):
        """One compressed collective over the local ranks' tensors xs. `stands_for`: the elements
        of the full-width tensor the message replaces (a subspace's k coordinates stand for a
        hidden-wide row), so that bytes per element sit on one axis; default xs[0].numel().
        `module`: the name of the module that sends (DTensor styles, where several modules share a
        layer and site); it keys the error-feedback stream and `fired_modules`."""
        c = self.compression
        variant = c.variant_for(site, direction)
        key = (layer, site, direction) if module is None else (module, direction)
        xs = [x.contiguous() for x in xs]
        if c.recorder is not None:
            for r, x in zip(self.ranks, xs):
                c.recorder.record(x, layer=layer, site=site, direction=direction, collective=kind,
                                  tp_rank=r, tp_size=self.size, module=module or f"layers.{layer}.{site}")
        kw = dict(feedback=c.feedback, key=key) if variant is not None else {}
        if self.local is not None:
            fn = getattr(self.local, kind)
            outs = fn(xs, variant, c.algo, **kw) if kind == "all_reduce" else fn(xs, variant, **kw)
        else:
            fn = getattr(td, kind)
            x = xs[0]
            outs = [fn(x, variant, c.algo, self.group, **kw) if kind == "all_reduce" else fn(x, variant, self.group, **kw)]
        c.fired[(site, direction, kind)] += 1
        if module is not None:
            c.fired_modules[(module, direction, kind)] += 1
        c.elements[(site, direction)] += xs[0].numel() if stands_for is None else int(stands_for)
        c.wire_elements[(site, direction)] += xs[0].numel()
        c.wire_bytes[(site, direction)] += td.wire_bytes_sent(xs[0], variant, kind, self.size)
        if c.sample_every and c.step % c.sample_every == 0 and kind != "all_gather":
            self._sample(kind, xs, outs, layer, site, direction)
        return outs

    def _sample(self, kind, xs, outs, layer, site, direction):
        """rel_l2 of what the collective delivered against the exact (float64) sum."""
        with torch.no_grad():
            if self.local is not None:
                ref = sum(x.double() for x in xs)
            else:
                ref = xs[0].double()
                dist.all_reduce(ref, group=self.group)
            if kind == "reduce_scatter":
                got = torch.cat([o.reshape(-1) for o in outs]) if self.simulated_ranks else outs[0].reshape(-1)
                ref = ref.reshape(-1)
                if not self.simulated_ranks:
                    off, r, cc = td.chunk_layout(*_rows_cols(xs[0]), self.size)[self.ranks[0]]
                    ref = ref[off:off + r * cc]
            else:
                got = outs[0].reshape(-1)
                ref = ref.reshape(-1)
            num = (got.double() - ref).pow(2).sum()
            den = ref.pow(2).sum()
            if self.local is None:  # the same number on every rank
                both = torch.stack([num, den])
                dist.all_reduce(both, group=self.group)
                num, den = both[0], both[1]
        rel = float(num.sqrt() / den.sqrt()) if float(den) > 0 else 0.0
        self.compression.samples.append({"step": self.compression.step, "layer": layer, "site": site,
                                         "direction": direction, "collective": kind, "rel_l2": rel})

    # ---- plain (uncompressed) helpers outside the TP sites ----
    def split_seq(self, x):
        """The ranks' sequence shards of a tensor that holds all of them (simulated SP)."""
        n = self.size
        if x.shape[SEQ_DIM] % n:
            raise ValueError(f"sequence length {x.shape[SEQ_DIM]} is not divisible by TP size {n}")
        return list(x.chunk(n, dim=SEQ_DIM))

    def sum_scalars(self, values):
        """Per-rank float32 scalars summed over the group (rank order when simulated)."""
        total = values[0].reshape(1).float()
        if self.local is not None:
            for v in values[1:]:
                total = total + v.reshape(1).float()
            return total.reshape(())
        total = total.clone()
        dist.all_reduce(total, group=self.group)
        return total.reshape(())


def _rows_cols(x):
    cols = x.shape[-1]
    return x.numel() // cols, cols


# ---- Megatron's four mappings, compressed ---------------------------------------------------------

def _fire(tp, kind, xs, where, direction, stands_for=None):
    """tp.collective for a TP site `where`: (layer, site), or (layer, site, module name)."""
    layer, site, *module = where
    return tp.collective(kind, xs, layer, site, direction, stands_for, module[0] if module else None)


def _copies(x, tp):
    """x as each local rank's own tensor: x itself for one rank, a copy each when simulated."""
    if len(tp.ranks) == 1:
        return x.view_as(x)
    return tuple(x.clone() for _ in tp.ranks)


class _CopyToTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, tp, where):
        ctx.tp, ctx.where = tp, where
        return _copies(x, tp)

    @staticmethod
    def backward(ctx, *gs):
        outs = _fire(ctx.tp, "all_reduce", [g.contiguous() for g in gs], ctx.where, "bwd")
        return outs[0], None, None


class _ReduceFromTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tp, where, stands_for, *ys):
        ctx.n = len(ys)
        return _fire(tp, "all_reduce", list(ys), where, "fwd", stands_for)[0]

    @staticmethod
    def backward(ctx, g):
        return (None, None, None) + (g,) * ctx.n


class _GatherFromSP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, tp, where):
        ctx.tp, ctx.where = tp, where
        shards = tp.split_seq(x) if tp.simulated_ranks else [x]
        out = _fire(tp, "all_gather", shards, where, "fwd")[0]
        return out if len(tp.ranks) == 1 else tuple([out] + [out.clone() for _ in tp.ranks[1:]])

    @staticmethod
    def backward(ctx, *gs):
        shards = _fire(ctx.tp, "reduce_scatter", [g.contiguous() for g in gs], ctx.where, "bwd")
        return (torch.cat(shards, dim=SEQ_DIM) if ctx.tp.simulated_ranks else shards[0]), None, None


class _ReduceScatterToSP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tp, where, *ys):
        ctx.tp, ctx.where, ctx.n = tp, where, len(ys)
        shards = _fire(tp, "reduce_scatter", list(ys), where, "fwd")
        return torch.cat(shards, dim=SEQ_DIM) if tp.simulated_ranks else shards[0]

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous()
        shards = ctx.tp.split_seq(g) if ctx.tp.simulated_ranks else [g]
        out = _fire(ctx.tp, "all_gather", [s.contiguous() for s in shards], ctx.where, "bwd")[0]
        return (None, None) + (out,) * ctx.n


def copy_to_tensor_model_parallel_region(x, tp, where):
    """Identity forward, compressed all-reduce of the input gradient backward. One tensor per local rank."""
    out = _CopyToTP.apply(x, tp, where)
    return [out] if isinstance(out, torch.Tensor) else list(out)


def reduce_from_tensor_model_parallel_region(ys, tp, where, stands_for=None):
    """Compressed all-reduce of the ranks' partial sums forward, identity backward."""
    return _ReduceFromTP.apply(tp, where, stands_for, *ys)


def gather_from_sequence_parallel_region(x, tp, where):
    """Compressed all-gather of the sequence shards forward, reduce-scatter of the gradient backward."""
    out = _GatherFromSP.apply(x, tp, where)
    return [out] if isinstance(out, torch.Tensor) else list(out)


def reduce_scatter_to_sequence_parallel_region(ys, tp, where):
    """Compressed reduce-scatter of the partial sums forward, all-gather of the gradient backward."""
    return _ReduceScatterToSP.apply(tp, where, *ys)


class _ScatterToSP(torch.autograd.Function):
    """Enters the SP region (after the embedding): a process keeps its shard; bwd all-gather (plain)."""

    @staticmethod
    def forward(ctx, x, tp):
        ctx.tp = tp
        if tp.simulated_ranks or tp.size == 1:
            return x.view_as(x)
        n, r = tp.size, tp.ranks[0]
        return x.chunk(n, dim=SEQ_DIM)[r].contiguous()

    @staticmethod
    def backward(ctx, g):
        tp = ctx.tp
        if tp.simulated_ranks or tp.size == 1:
            return g, None
        return td.all_gather(g.contiguous(), None, tp.group), None


class _GatherReplicated(torch.autograd.Function):
    """Leaves the SP region before a replicated head: fwd all-gather (plain); bwd this rank's shard."""

    @staticmethod
    def forward(ctx, x, tp):
        ctx.tp = tp
        if tp.simulated_ranks or tp.size == 1:
            return x.view_as(x)
        return td.all_gather(x.contiguous(), None, tp.group)

    @staticmethod
    def backward(ctx, g):
        tp = ctx.tp
        if tp.simulated_ranks or tp.size == 1:
            return g, None
        return g.chunk(tp.size, dim=SEQ_DIM)[tp.ranks[0]].contiguous(), None


def scatter_to_sequence_parallel_region(x, tp):
    return _ScatterToSP.apply(x, tp)


def gather_from_sequence_parallel_region_replicated(x, tp):
    return _GatherReplicated.apply(x, tp)


# ---- subspace-confined TP (Protocol Models, arXiv 2506.01260; docs/training.md) -------------------

SUBSPACE_SEED = 1337


def check_subspace(hidden, k):
    """The subspace sizes the trainer accepts: 0 < k < hidden, k a multiple of 8 (a token's
    coordinates are whole 16-byte bf16 vectors, as in the method's reference code)."""
    if isinstance(k, bool) or not isinstance(k, int):
        raise TacoInputError(f"subspace dimension must be an integer, got {k!r}")
    if k <= 0 or k >= hidden:
        raise TacoInputError(f"subspace dimension {k} must be between 1 and {hidden - 1} (hidden - 1)")
    if k % 8:
        raise TacoInputError(f"subspace dimension {k} must be a multiple of 8")


class Subspace(nn.Module):
    """A fixed orthonormal basis U (hidden x k) of the residual stream: QR of a seeded Gaussian,
    drawn alike on every rank (it is never sent). Modules that write into the residual stream
    produce k coordinates c and add U c; TP collectives then carry c."""

    def __init__(self, hidden, k, seed=SUBSPACE_SEED):
        super().__init__()
        check_subspace(hidden, k)
        self.hidden, self.k, self.seed = hidden, k, seed
        gen = torch.Generator().manual_seed(seed)
        basis = torch.linalg.qr(torch.randn(hidden, k, generator=gen, dtype=torch.float64))[0]
        self.register_buffer("basis", basis.float(), persistent=False)

    def expand(self, c):
        """U c for coordinates c [..., k] -> [..., hidden], in c's dtype."""
        return torch.matmul(c, self.basis.t().to(c.dtype))

    def coords(self, x):
        """U^T x for x [..., hidden] -> [..., k], in x's dtype."""
        return torch.matmul(x, self.basis.to(x.dtype))

    def stands_for(self, c):
        """Elements of the full-width tensor that coordinates c stand for."""
        return c.numel() // self.k * self.hidden


class _CopyToSubspace(torch.autograd.Function):
    """Enters a TP block from the residual stream x (before the norm): identity forward, one copy
    per local rank. Backward: each rank's partial gradient of x (through its norm and its
    column-parallel shard) is projected onto U, the k coordinates are all-reduced (compressed),
    and the sum maps back through U. Every parameter reaches the residual stream only through U,
    so only U^T of its gradient is ever used, and that part is summed exactly (docs/training.md)."""

    @staticmethod
    def forward(ctx, x, sub, tp, where):
        ctx.sub, ctx.tp, ctx.where = sub, tp, where
        return _copies(x, tp)

    @staticmethod
    def backward(ctx, *gs):
        layer, site = ctx.where
        sub = ctx.sub
        coords = [sub.coords(g.contiguous()) for g in gs]
        c = ctx.tp.collective("all_reduce", coords, layer, site, "bwd", sub.stands_for(coords[0]))[0]
        return sub.expand(c), None, None, None


def copy_to_subspace_region(x, sub, tp, where):
    """Identity forward; backward the all-reduce of the ranks' input gradients' k coordinates
    (compressed). One tensor per local rank."""
    out = _CopyToSubspace.apply(x, sub, tp, where)
    return [out] if isinstance(out, torch.Tensor) else list(out)


# ---- parallel linear layers -------------------------------------------------------------------------

def shard_rows(blocks, n, r):
    """Output features of rank r when stacked blocks (e.g. q, k, v) are each split in n parts."""
    idx, start = [], 0
    for b in blocks:
        if b % n:
            raise ValueError(f"a block of {b} output features does not split over TP={n}")
        part = b // n
        idx.append(torch.arange(start + r * part, start + (r + 1) * part))
        start += b
    return torch.cat(idx)


def shard_cols(in_features, n, r):
    if in_features % n:
        raise ValueError(f"{in_features} input features do not split over TP={n}")
    part = in_features // n
    return torch.arange(r * part, (r + 1) * part)


class ColumnParallelLinear(nn.Module):
    """Output features split over the ranks (stacked `blocks`, e.g. [q, k, v], each split); holds the
    weight shards of the local ranks. forward(x) -> one output per local rank."""

    def __init__(self, in_features, blocks, tp, *, layer, site, bias=True, sequence_parallel=False):
        super().__init__()
        self.in_features, self.blocks, self.tp = in_features, list(blocks), tp
        self.out_features = sum(self.blocks)
        self.where, self.sequence_parallel = (int(layer), site), sequence_parallel
        self.rows = [shard_rows(self.blocks, tp.size, r) for r in tp.ranks]
        self.weight = nn.ParameterList(nn.Parameter(torch.empty(len(rows), in_features)) for rows in self.rows)
        self.bias = nn.ParameterList(nn.Parameter(torch.zeros(len(rows))) for rows in self.rows) if bias else None
        for shards in (self.weight, self.bias or []):
            for i, p in enumerate(shards):
                p.tp_sharded, p.tp_local = True, i

    @torch.no_grad()
    def load_full(self, weight, bias=None):
        for i, rows in enumerate(self.rows):
            self.weight[i].copy_(weight[rows])
            if self.bias is not None and bias is not None:
                self.bias[i].copy_(bias[rows])

    def forward(self, x):
        if self.sequence_parallel:
            xs = gather_from_sequence_parallel_region(x, self.tp, self.where)
        else:
            xs = copy_to_tensor_model_parallel_region(x, self.tp, self.where)
        return self.local(xs)

    def local(self, xs):
        """The local ranks' shards on inputs already split per rank (no communication)."""
        if len(xs) != len(self.rows):
            raise ValueError(f"{len(xs)} inputs for {len(self.rows)} local TP ranks (TP size {self.tp.size})")
        return [F.linear(xi, self.weight[i].to(xi.dtype), None if self.bias is None else self.bias[i].to(xi.dtype))
                for i, xi in enumerate(xs)]


class RowParallelLinear(nn.Module):
    """Input features split over the ranks. forward(xs: one input shard per local rank) -> the
    reduced output (bias added after the reduction). With `subspace` (a Subspace of
    out_features), the layer computes k coordinates (weight [k, in], bias [k]), the ranks
    all-reduce those, and the output is U c."""

    def __init__(self, in_features, out_features, tp, *, layer, site, bias=True, sequence_parallel=False,
                 subspace=None):
        super().__init__()
        if subspace is not None:
            if subspace.hidden != out_features:
                raise ValueError(f"a subspace of {subspace.hidden} features for a layer of {out_features} outputs")
            if sequence_parallel:
                raise ValueError("a subspace row-parallel layer runs without sequence parallelism")
            out_features = subspace.k
        self.subspace = subspace
        self.in_features, self.out_features, self.tp = in_features, out_features, tp
        self.where, self.sequence_parallel = (int(layer), site), sequence_parallel
        self.cols = [shard_cols(in_features, tp.size, r) for r in tp.ranks]
        self.weight = nn.ParameterList(nn.Parameter(torch.empty(out_features, len(c))) for c in self.cols)
        for i, p in enumerate(self.weight):
            p.tp_sharded, p.tp_local = True, i
        if bias:
            self.bias = nn.Parameter(torch.zeros(out_features))
            self.bias.sp_partial_grad = True  # with SP it is added on a sequence shard
        else:
            self.register_parameter("bias", None)

    @torch.no_grad()
    def load_full(self, weight, bias=None):
        for i, cols in enumerate(self.cols):
            self.weight[i].copy_(weight[:, cols])
        if self.bias is not None and bias is not None:
            self.bias.copy_(bias)

    def forward(self, xs):
        if len(xs) != len(self.cols):
            raise ValueError(f"{len(xs)} inputs for {len(self.cols)} local TP ranks (TP size {self.tp.size})")
        ys = [F.linear(xi, self.weight[i].to(xi.dtype)) for i, xi in enumerate(xs)]
        if self.sequence_parallel:
            y = reduce_scatter_to_sequence_parallel_region(ys, self.tp, self.where)
        else:
            stands_for = None if self.subspace is None else self.subspace.stands_for(ys[0])
            y = reduce_from_tensor_model_parallel_region(ys, self.tp, self.where, stands_for)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y if self.subspace is None else self.subspace.expand(y)


# ---- gradients across ranks ---------------------------------------------------------------------------

def allreduce_sp_partial_grads(model, tp):
    """With SP in a process group, replicated parameters used on sequence shards (norms,
    row-parallel biases) get a partial gradient per rank; sum them (plain) as Megatron does."""
    allreduce_partial_grads(model, tp, "sp_partial_grad")


def allreduce_partial_grads(model, tp, flag):
    """Sums (plain) the gradients of the replicated parameters marked `flag` over a process group,
    where each rank holds a partial gradient: "sp_partial_grad" (norms and row biases on sequence
    shards) or "subspace_partial_grad" (block norms that each rank applies to its own copy of the
    residual stream under --subspace). Simulated ranks share one parameter: nothing to do."""
    if tp.simulated_ranks or tp.size == 1:
        return
    grads = [p.grad for p in model.parameters() if getattr(p, flag, False) and p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1).float() for g in grads])
    dist.all_reduce(flat, group=tp.group)
    off = 0
    for g in grads:
        g.copy_(flat[off:off + g.numel()].view_as(g))
        off += g.numel()


def grad_norm(model, tp):
    """Global gradient L2 norm: replicated parameters once, each rank's shards summed over the
    group (per rank in registration order, then over ranks), the same on every rank."""
    rep, shard = [], [[] for _ in tp.ranks]
    for p in model.parameters():
        if p.grad is None:
            continue
        sq = p.grad.float().pow(2).sum()
        if getattr(p, "tp_sharded", False):
            shard[p.tp_local].append(sq)
        else:
            rep.append(sq)
    dev = next(model.parameters()).device
    zero = torch.zeros((), device=dev)
    per_rank = [torch.stack(s).sum() if s else zero for s in shard]
    s = tp.sum_scalars(per_rank) if tp.size > 1 else per_rank[0]
    r = torch.stack(rep).sum() if rep else zero
    return (r + s).sqrt()


def param_count(model, tp):
    """Parameters of the whole model (every rank's shards counted once)."""
    n = 0
    for p in model.parameters():
        n += p.numel() * (tp.size // len(tp.ranks) if getattr(p, "tp_sharded", False) else 1)
    return n


_DTENSOR_NAMES = ("ColwiseParallel", "RowwiseParallel", "SequenceParallel", "compress_plan", "site_of")


def __getattr__(name):
    """The DTensor styles (taco.dtensor) as taco.tp.ColwiseParallel etc.; imported on first use,
    since they need torch >= 2.5 and the rest of this module does not."""
    if name in _DTENSOR_NAMES:
        from . import dtensor
        return getattr(dtensor, name)
    raise AttributeError(f"module 'taco.tp' has no attribute {name!r}")


__all__ = ["Compression", "TP", "ColumnParallelLinear", "RowParallelLinear", "SITES", "COLUMN_SITES", "ROW_SITES",
           "copy_to_tensor_model_parallel_region", "reduce_from_tensor_model_parallel_region",
           "gather_from_sequence_parallel_region", "reduce_scatter_to_sequence_parallel_region",
           "scatter_to_sequence_parallel_region", "gather_from_sequence_parallel_region_replicated",
           "Subspace", "copy_to_subspace_region", "check_subspace",
           "grad_norm", "allreduce_sp_partial_grads", "allreduce_partial_grads", "param_count"]
