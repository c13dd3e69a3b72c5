"""Megatron-style tensor-parallel linear layers over torch.distributed, with capture.

Activations are laid out [seq, batch, hidden] as in Megatron, so sequence parallel (SP) splits
dimension 0. Per transformer layer, with TP degree N (methods.md section 1.3):

  without SP                                   with SP
  ColumnParallelLinear (QKV, fc1)              ColumnParallelLinear
    fwd: identity                                fwd: all-gather of the input [s/N,b,h] (captured)
    bwd: all-reduce of the input gradient        bwd: reduce-scatter of the input gradient
         [s,b,h], a partial sum (captured)            [s,b,h], a partial sum (captured)
  RowParallelLinear (attn out-proj, fc2)       RowParallelLinear
    fwd: all-reduce of the output [s,b,h],       fwd: reduce-scatter of the output [s,b,h],
         a partial sum, before bias (captured)        a partial sum, before bias (captured)
    bwd: identity                                bwd: all-gather of the output gradient
                                                      [s/N,b,h] (captured)

ColumnParallelLinear splits the output features (weight [out/N, in]); with `chunks` > 1 the
output is `chunks` stacked blocks (QKV: q, k, v) and each block is split, so rank r holds
[q_r; k_r; v_r], i.e. whole attention heads. RowParallelLinear splits the input features
(weight [out, in/N]) and adds its bias after the reduction.

Weights are kept in float32 (master weights) and cast to the activations' dtype at use, so a
bf16 model carries bf16 on every collective, as Megatron with --bf16 does.

Collectives go through TPGroup, which works with NCCL or gloo. Gloo (CPU, or two processes
sharing one GPU) has no reduce-scatter and no CUDA all-gather, so there the tensors are staged
through host memory in float32 and reduce-scatter is all-reduce then slice. The tensors that
are captured are the collective inputs, so none of this changes what is recorded.
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

SEQ_DIM = 0


class TPGroup:
    """A TP process group, and the recorder its collectives report to (or None)."""

    def __init__(self, group=None, recorder=None):
        self.group = group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        self.backend = str(dist.get_backend(group)).lower()
        self.recorder = recorder

    # ---- collectives (out of place; inputs are never modified) ----
    def _stage(self, t):
        """A fresh buffer to run the collective on (never the caller's tensor): for gloo a host
        float32 copy, otherwise a contiguous copy on the GPU."""
        if self.backend == "gloo":
            return t.detach().to("cpu", torch.float32, copy=True).contiguous()
        if not t.is_cuda:
            return t.detach().to(torch.device("cuda", torch.cuda.current_device()), copy=True).contiguous()
        return t.detach().clone().contiguous()

    def all_reduce(self, t):
        buf = self._stage(t)
        dist.all_reduce(buf, group=self.group)
        return buf.to(t.device, t.dtype)

    def all_gather(self, t, dim=SEQ_DIM):
        src = self._stage(t)
        parts = [torch.empty_like(src) for _ in range(self.size)]
        dist.all_gather(parts, src, group=self.group)
        return torch.cat(parts, dim=dim).to(t.device, t.dtype)

    def reduce_scatter(self, t, dim=SEQ_DIM):
        n = t.shape[dim]
        if n % self.size:
            raise ValueError(f"reduce-scatter: dimension {dim} of size {n} is not divisible by TP size {self.size}")
        full = self.all_reduce(t)  # gloo has no reduce-scatter; for 2 ranks the sum is the same
        return full.narrow(dim, self.rank * (n // self.size), n // self.size).contiguous()

    def scatter(self, t, dim=SEQ_DIM):
        n = t.shape[dim]
        if n % self.size:
            raise ValueError(f"sequence length {n} is not divisible by TP size {self.size}")
        return t.narrow(dim, self.rank * (n // self.size), n // self.size).contiguous()

    def record(self, t, layer, site, direction, collective, module):
        if self.recorder is not None:
            self.recorder.record(t, layer=layer, site=site, direction=direction, collective=collective,
                                 tp_rank=self.rank, tp_size=self.size, module=module)


# ---- autograd functions at the TP communication points; `where` = (layer, site, module) ----
class _CopyToTP(torch.autograd.Function):
    """fwd identity; bwd all-reduce of the (partial) input gradient of a column-parallel layer."""

    @staticmethod
    def forward(ctx, x, tp, where):
        ctx.tp, ctx.where = tp, where
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        layer, site, module = ctx.where
        ctx.tp.record(g, layer, site, "bwd", "all_reduce", module)
        return ctx.tp.all_reduce(g), None, None


class _ReduceFromTP(torch.autograd.Function):
    """fwd all-reduce of a row-parallel layer's partial output; bwd identity."""

    @staticmethod
    def forward(ctx, y, tp, where):
        layer, site, module = where
        tp.record(y, layer, site, "fwd", "all_reduce", module)
        return tp.all_reduce(y)

    @staticmethod
    def backward(ctx, g):
        return g, None, None


class _GatherFromSP(torch.autograd.Function):
    """fwd all-gather of the sequence shard before a column-parallel layer;
    bwd reduce-scatter of the (partial) input gradient."""

    @staticmethod
    def forward(ctx, x, tp, where):
        ctx.tp, ctx.where = tp, where
        layer, site, module = where
        tp.record(x, layer, site, "fwd", "all_gather", module)
        return tp.all_gather(x)

    @staticmethod
    def backward(ctx, g):
        layer, site, module = ctx.where
        ctx.tp.record(g, layer, site, "bwd", "reduce_scatter", module)
        return ctx.tp.reduce_scatter(g), None, None


class _ReduceScatterToSP(torch.autograd.Function):
    """fwd reduce-scatter of a row-parallel layer's partial output;
    bwd all-gather of the output-gradient shard."""

    @staticmethod
    def forward(ctx, y, tp, where):
        ctx.tp, ctx.where = tp, where
        layer, site, module = where
        tp.record(y, layer, site, "fwd", "reduce_scatter", module)
        return tp.reduce_scatter(y)

    @staticmethod
    def backward(ctx, g):
        layer, site, module = ctx.where
        ctx.tp.record(g, layer, site, "bwd", "all_gather", module)
        return ctx.tp.all_gather(g), None, None


class _ScatterToSP(torch.autograd.Function):
    """Enter the SP region (after the embedding): fwd keep this rank's shard; bwd all-gather."""

    @staticmethod
    def forward(ctx, x, tp):
        ctx.tp = tp
        return tp.scatter(x)

    @staticmethod
    def backward(ctx, g):
        return ctx.tp.all_gather(g), None


class _GatherReplicated(torch.autograd.Function):
    """Leave the SP region before a replicated head: fwd all-gather; bwd keep this rank's shard
    (every rank computes the same loss from the gathered sequence)."""

    @staticmethod
    def forward(ctx, x, tp):
        ctx.tp = tp
        return tp.all_gather(x)

    @staticmethod
    def backward(ctx, g):
        return ctx.tp.scatter(g), None


def scatter_to_sp(x, tp):
    return _ScatterToSP.apply(x, tp)


def gather_from_sp_replicated(x, tp):
    return _GatherReplicated.apply(x, tp)


def shard_rows(out_features, tp_size, tp_rank, chunks=1):
    """Indices of the output features rank tp_rank holds when `chunks` stacked blocks are each
    split into tp_size contiguous parts (chunks=3 for a fused QKV)."""
    if out_features % (chunks * tp_size):
        raise ValueError(f"{out_features} output features do not split into {chunks} chunks x {tp_size} ranks")
    block = out_features // chunks
    part = block // tp_size
    idx = [torch.arange(c * block + tp_rank * part, c * block + (tp_rank + 1) * part) for c in range(chunks)]
    return torch.cat(idx)


def shard_cols(in_features, tp_size, tp_rank):
    if in_features % tp_size:
        raise ValueError(f"{in_features} input features do not split over {tp_size} ranks")
    part = in_features // tp_size
    return torch.arange(tp_rank * part, (tp_rank + 1) * part)


class ColumnParallelLinear(nn.Module):
    def __init__(self, in_features, out_features, tp, *, layer, site, sequence_parallel=False, chunks=1,
                 bias=True, name=""):
        super().__init__()
        self.in_features, self.out_features, self.chunks = in_features, out_features, chunks
        self.tp, self.sequence_parallel = tp, sequence_parallel
        self.where = (int(layer), site, name)
        self.rows = shard_rows(out_features, tp.size, tp.rank, chunks)
        self.weight = nn.Parameter(torch.empty(len(self.rows), in_features))   # [out/N, in]
        self.weight.tp_sharded = True
        if bias:
            self.bias = nn.Parameter(torch.zeros(len(self.rows)))
            self.bias.tp_sharded = True
        else:
            self.register_parameter("bias", None)

    @torch.no_grad()
    def load_full(self, weight, bias=None):
        """Takes this rank's rows of an unsplit [out, in] weight (and [out] bias)."""
        self.weight.copy_(weight[self.rows])
        if self.bias is not None and bias is not None:
            self.bias.copy_(bias[self.rows])

    def forward(self, x):                          # x: [s/N or s, b, in]
        if self.sequence_parallel:
            x = _GatherFromSP.apply(x, self.tp, self.where)     # [s, b, in]
        else:
            x = _CopyToTP.apply(x, self.tp, self.where)
        b = None if self.bias is None else self.bias.to(x.dtype)
        return F.linear(x, self.weight.to(x.dtype), b)          # [s, b, out/N]


class RowParallelLinear(nn.Module):
    def __init__(self, in_features, out_features, tp, *, layer, site, sequence_parallel=False, bias=True,
                 name=""):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.tp, self.sequence_parallel = tp, sequence_parallel
        self.where = (int(layer), site, name)
        self.cols = shard_cols(in_features, tp.size, tp.rank)
        self.weight = nn.Parameter(torch.empty(out_features, len(self.cols)))  # [out, in/N]
        self.weight.tp_sharded = True
        if bias:
            self.bias = nn.Parameter(torch.zeros(out_features))
            # With SP the bias is added on a sequence shard: its gradient is partial per rank.
            self.bias.sp_partial_grad = True
        else:
            self.register_parameter("bias", None)

    @torch.no_grad()
    def load_full(self, weight, bias=None):
        self.weight.copy_(weight[:, self.cols])
        if self.bias is not None and bias is not None:
            self.bias.copy_(bias)

    def forward(self, x):                          # x: [s, b, in/N]
        y = F.linear(x, self.weight.to(x.dtype))   # [s, b, out], partial sum over ranks
        if self.sequence_parallel:
            y = _ReduceScatterToSP.apply(y, self.tp, self.where)  # [s/N, b, out]
        else:
            y = _ReduceFromTP.apply(y, self.tp, self.where)       # [s, b, out]
        return y if self.bias is None else y + self.bias.to(y.dtype)


def allreduce_sp_partial_grads(model, tp):
    """With SP, replicated parameters used on sequence shards (layer norms, row-parallel biases)
    get a partial gradient on each rank; sum them over the TP group (Megatron does the same)."""
    grads = [p.grad for p in model.parameters() if getattr(p, "sp_partial_grad", False) and p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1).float() for g in grads])
    flat = tp.all_reduce(flat)
    offset = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[offset:offset + n].view_as(g))
        offset += n


def grad_norm(model, tp=None):
    """Global gradient L2 norm: replicated parameters counted once, sharded ones summed over TP."""
    rep, shard = [], []
    for p in model.parameters():
        if p.grad is not None:
            (shard if getattr(p, "tp_sharded", False) else rep).append(p.grad.float().pow(2).sum())
    dev = next(model.parameters()).device
    r = torch.stack(rep).sum() if rep else torch.zeros((), device=dev)
    s = torch.stack(shard).sum() if shard else torch.zeros((), device=dev)
    if tp is not None and tp.size > 1:
        s = tp.all_reduce(s.reshape(1)).reshape(())
    return (r + s).sqrt()
