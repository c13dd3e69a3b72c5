"""Pipeline (PP) and data (DP) parallelism beside TP, with every route compressed (docs/training.md,
"3D: pipeline and data parallelism").

Ranks: world = TP x DP x PP in Megatron's order, TP fastest, then DP, then PP:
rank = t + T (d + D s). A rank holds TP shard t of pipeline stage s in DP replica d.

- Pipeline: stage s holds layers [L s / P, L (s + 1) / P); the embedding sits on the first stage,
  the final norm, head and loss on the last (the model's embedding and head are not tied). Each
  replica's share of the batch is split into M micro-batches, run 1F1B (`schedule_1f1b`). The
  activation (forward) and its gradient (backward) cross each boundary through taco.dist's sendrecv with the
  `--compress-pp` codec; error feedback keys one stream per boundary and direction (and sender).
- Data parallel (ZeRO-1): each rank's parameters (its TP shards and the replicated ones) form one
  flat float32 buffer; gradients are reduce-scattered over DP with the `--compress-dp` codec, each
  DP rank runs AdamW on its shard (float32 master and moments), and the shards' updates are
  all-gathered: plain, the new master weights; with `--compress-dp-weights`, the difference between
  the new master shard and the weights every replica holds (SDP4Bit's weight differences; the next
  difference carries this one's rounding error).
- Simulated (`--tp-sim/--pp-sim/--dp-sim`): one Cell per (stage, replica) in this process, TP ranks
  simulated inside each; transfers and DP collectives run taco.dist.transfer and taco.dist.SimGroup
  on the same bits. Micro-batch order per stage, per stream and per gradient accumulation is the
  processes' (1F1B runs forwards and backwards each in micro-batch order), so the numbers agree.
"""
import collections
import contextlib
import math

import torch
import torch.nn as nn

from .. import dist as td
from .. import tp as T

COLS = 256  # row width of the flat DP buffers: whole codec groups (every group size divides it)


class Layout:
    """The 3D rank order: rank = t + T (d + D s) (TP fastest, then DP, then PP)."""

    def __init__(self, tp, dp, pp):
        self.tp, self.dp, self.pp = tp, dp, pp
        self.world = tp * dp * pp

    def rank(self, t, d, s):
        return t + self.tp * (d + self.dp * s)

    def coords(self, rank):
        """(t, d, s) of a global rank."""
        return rank % self.tp, rank // self.tp % self.dp, rank // (self.tp * self.dp)


def stage_layers(layers, pp, s):
    """The contiguous layers [lo, hi) of stage s."""
    return layers * s // pp, layers * (s + 1) // pp


def schedule_1f1b(pp, s, m):
    """[("F", i) / ("B", i)] in the order stage s runs its m micro-batches (PipeDream-flush /
    Megatron 1F1B): pp - s - 1 warm-up forwards, then one forward one backward, then the rest of
    the backwards. Forwards and backwards each run in micro-batch order."""
    warm = min(pp - s - 1, m)
    order = [("F", i) for i in range(warm)]
    for i in range(m - warm):
        order += [("F", warm + i), ("B", i)]
    return order + [("B", i) for i in range(m - warm, m)]


def make_stage(model, s, pp):
    """model (a taco.train.model.Transformer) cut to stage s: its layers, the embedding on the
    first stage, the final norm and head on the last."""
    lo, hi = stage_layers(len(model.layers), pp, s)
    model.layers = nn.ModuleList(list(model.layers)[lo:hi])
    if s > 0:
        model.tok, model.pos = None, None
    if s < pp - 1:
        model.norm, model.head = None, None
    return model


def stage_forward(model, first, last, inp, targets):
    """The stage's part of the model: token ids (first) or the boundary activation in; the
    activation out, or the loss on the last stage."""
    x = model.embed(inp) if first else inp
    rope = model.rope(x.shape[0], x.device)
    for blk in model.layers:
        x = blk(x, rope)
    if last:
        return model.head_loss(model.norm(x), targets)[1]
    return x


def local_params(model, q):
    """TP rank q's parameters of a stage in registration order: its shards and the replicated ones
    (simulated TP ranks share one replicated parameter)."""
    return [p for p in model.parameters() if not getattr(p, "tp_sharded", False) or p.tp_local == q]


class ShardedAdamW:
    """ZeRO-1 AdamW over one rank's parameters: the flat float32 buffer [rows, COLS] (zero-padded
    to whole rows per DP rank) is cut into dp row blocks; DP rank d keeps the master weights and
    moments of block d. `full` is what every replica holds (and loads into the model)."""

    def __init__(self, params, dp, d, betas=(0.9, 0.95), eps=1e-8):
        self.params, self.dp, self.d, self.betas, self.eps = params, dp, d, betas, eps
        self.numel = sum(p.numel() for p in params)
        self.rows = -(-self.numel // (dp * COLS)) * dp
        self.lo, self.hi = self.rows // dp * d, self.rows // dp * (d + 1)
        self.full = self.flatten([p.detach() for p in params])
        self.master = self.full[self.lo:self.hi].clone()
        self.m, self.v = torch.zeros_like(self.master), torch.zeros_like(self.master)
        mine = slice(self.lo, self.hi)
        self.decay = self.flatten([torch.full_like(p, float(p.dim() >= 2)) for p in params])[mine] > 0
        self.sharded = self.flatten([torch.full_like(p, float(getattr(p, "tp_sharded", False)))
                                     for p in params])[mine] > 0
        self.t = 0

    def flatten(self, tensors):
        dev = self.params[0].device
        buf = torch.zeros(self.rows * COLS, dtype=torch.float32, device=dev)
        torch.cat([t.reshape(-1).float() for t in tensors], out=buf[:self.numel])
        return buf.view(self.rows, COLS)

    def grads(self):
        return self.flatten([p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params])

    def norm_terms(self, grad):
        """Squares of this shard's gradient summed over TP-sharded and over replicated elements."""
        sq = grad.double().pow(2)
        return float(sq[self.sharded].sum()), float(sq[~self.sharded].sum())

    def step(self, grad, lr, weight_decay):
        """torch.optim.AdamW's update (single-tensor form) on the master shard."""
        self.t += 1
        b1, b2 = self.betas
        w = self.master
        w.copy_(torch.where(self.decay, w * (1 - lr * weight_decay), w))
        self.m.mul_(b1).add_(grad, alpha=1 - b1)
        self.v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
        denom = (self.v.sqrt() / math.sqrt(1 - b2 ** self.t)).add_(self.eps)
        w.addcdiv_(self.m, denom, value=-lr / (1 - b1 ** self.t))

    def outgoing(self, compressed):
        """What this rank all-gathers: its new master shard, or (compressed) its difference from
        the weights every replica holds."""
        return self.master - self.full[self.lo:self.hi] if compressed else self.master.clone()

    @torch.no_grad()
    def load(self, gathered, compressed):
        self.full = self.full + gathered if compressed else gathered
        flat, off = self.full.view(-1), 0
        for p in self.params:
            p.copy_(flat[off:off + p.numel()].view_as(p))
            off += p.numel()


class Routes:
    """What crossed the PP and DP routes (the TP route is counted by taco.tp.Compression):
    calls, elements and wire bytes per (route, site, direction, collective)."""

    def __init__(self):
        self.fired = collections.Counter()
        self.elements = collections.Counter()
        self.wire_bytes = collections.Counter()

    def count(self, route, site, direction, collective, elements, wire_bytes):
        k = (route, site, direction, collective)
        self.fired[k] += 1
        self.elements[k] += int(elements)
        self.wire_bytes[k] += int(wire_bytes)


class Cell:
    """One (stage, replica): the stage's model (TP simulated inside, or this process's TP rank),
    its TP Compression, and a ShardedAdamW per local TP rank."""

    def __init__(self, s, d, model, tp, comp, layout):
        self.s, self.d, self.model, self.tp, self.comp = s, d, model, tp, comp
        self.first, self.last = s == 0, s == layout.pp - 1
        self.tp_ranks = [0] if tp is None else list(tp.ranks)
        self.opts = [ShardedAdamW(local_params(model, q), layout.dp, d) for q in range(len(self.tp_ranks))]

    def forward(self, inp, targets):
        return stage_forward(self.model, self.first, self.last, inp, targets)


class Plan:
    """The run's 3D settings: layout, micro-batches and the codec of each route (parsed once)."""

    def __init__(self, layout, micro_batches, pp_variant, dp_variant, dp_weight_variant):
        self.layout, self.m = layout, micro_batches
        self.pp_variant, self.dp_variant, self.dp_weight_variant = pp_variant, dp_variant, dp_weight_variant
        self.pp_feedback, self.dp_feedback = td.Feedback(), td.Feedback()
        self.routes = Routes()

    def micro_batches(self, x, y, d):
        """Replica d's share of the global batch, split into m micro-batches."""
        per = x.shape[0] // self.layout.dp
        xs, ys = x[d * per:(d + 1) * per], y[d * per:(d + 1) * per]
        return list(zip(xs.chunk(self.m), ys.chunk(self.m)))

    def count_transfer(self, boundary, direction, x, variant):
        self.routes.count("pp", f"boundary{boundary}", direction, "send", x.numel(), td.p2p_wire_bytes(x, variant))

    def count_dp(self, site, kind, x, variant):
        self.routes.count("dp", site, "-", kind, x.numel(),
                          td.wire_bytes_sent(x, variant, kind, self.layout.dp))


def _send_key(boundary, direction):
    return ("pp", boundary, direction)


def _reduce_scatter_terms(plan, cell, q, shard):
    """(sharded, replicated) squares of a rank's averaged gradient shard; the replicated elements
    are counted on TP rank 0 only."""
    sh, rep = cell.opts[q].norm_terms(shard)
    return sh, (rep if cell.tp_ranks[q] == 0 else 0.0)


def _clip_factor(total_sq, clip):
    gnorm = math.sqrt(total_sq)
    return gnorm, (clip / gnorm if clip > 0 and math.isfinite(gnorm) and gnorm > clip else 1.0)


# ---- the simulated form: every cell in this process -------------------------------------------------

def sim_step(plan, cells, x, y, lr, a):
    """One training step of all cells (cells[s][d]). Returns (loss, grad norm)."""
    L = plan.layout
    loss_sum = [[0.0] * L.dp for _ in range(L.pp)]
    for d in range(L.dp):
        for i, (xb, yb) in enumerate(plan.micro_batches(x, y, d)):
            ins, outs, inp = [], [], xb
            for s in range(L.pp):
                cell = cells[s][d]
                if s > 0:
                    inp = td.transfer(outs[-1].detach(), plan.pp_variant, feedback=plan.pp_feedback,
                                       key=_send_key(s - 1, "fwd"), rank=L.rank(0, d, s - 1))
                    if d == 0:
                        plan.count_transfer(s - 1, "fwd", inp, plan.pp_variant)
                    inp.requires_grad_(True)
                ins.append(inp)
                outs.append(cell.forward(inp, yb))
            loss_sum[-1][d] += float(outs[-1])
            (outs[-1] / plan.m).backward()
            for s in range(L.pp - 2, -1, -1):
                g = td.transfer(ins[s + 1].grad, plan.pp_variant, feedback=plan.pp_feedback,
                                 key=_send_key(s, "bwd"), rank=L.rank(0, d, s + 1))
                if d == 0:
                    plan.count_transfer(s, "bwd", g, plan.pp_variant)
                torch.autograd.backward(outs[s], g)
    # DP: reduce-scatter each (stage, TP rank)'s gradients over the replicas
    group = td.SimGroup(L.dp)
    shards = {}
    for s in range(L.pp):
        for q in range(L.tp):
            gs = [cells[s][d].opts[q].grads() for d in range(L.dp)]
            if L.dp > 1 and q == 0:
                plan.count_dp("grads", "reduce_scatter", gs[0], plan.dp_variant)
            got = group.reduce_scatter(gs, plan.dp_variant, feedback=plan.dp_feedback, key=("dp", s, q))
            for d in range(L.dp):
                shards[(s, d, q)] = got[d] * (1.0 / L.dp)
    terms = []  # per global rank: (sharded, replicated, loss)
    for s in range(L.pp):
        for d in range(L.dp):
            for q in range(L.tp):
                sh, rep = _reduce_scatter_terms(plan, cells[s][d], q, shards[(s, d, q)])
                terms.append((sh, rep, loss_sum[s][d] if q == 0 else 0.0))
    total_sq = sum(t[0] + t[1] for t in terms)
    loss = sum(t[2] for t in terms) / (plan.m * L.dp)
    gnorm, factor = _clip_factor(total_sq, a.clip)
    compressed = plan.dp_weight_variant is not None
    for s in range(L.pp):
        for q in range(L.tp):
            sends = []
            for d in range(L.dp):
                opt = cells[s][d].opts[q]
                opt.step(shards[(s, d, q)].mul_(factor) if factor != 1.0 else shards[(s, d, q)], lr, a.weight_decay)
                sends.append(opt.outgoing(compressed))
            if L.dp > 1 and q == 0:
                plan.count_dp("weights", "all_gather", sends[0], plan.dp_weight_variant)
            got = group.all_gather(sends, plan.dp_weight_variant, feedback=plan.dp_feedback, key=("dpw", s, q))
            for d in range(L.dp):
                cells[s][d].opts[q].load(got[d], compressed)
    for s in range(L.pp):
        for d in range(L.dp):
            for p in cells[s][d].model.parameters():
                p.grad = None
    return loss, gnorm


@torch.no_grad()
def sim_eval(cells, x, y):
    """Validation loss of replica 0's pipeline (plain transfers)."""
    inp = x
    for s, row in enumerate(cells):
        inp = row[0].forward(inp, y)
    return float(inp)


# ---- the process form: this rank's cell over torch.distributed ----------------------------------------

class ProcessPipe:
    """This rank's cell and its groups: p2p with the neighbouring stages' same (t, d), DP over the
    ranks of the same (t, s), scalars over the world."""

    def __init__(self, plan, cell, rank, dp_group, device):
        self.plan, self.cell, self.rank, self.dp_group, self.device = plan, cell, rank, dp_group, device
        L = plan.layout
        self.t, self.d, self.s = L.coords(rank)
        self.prev = L.rank(self.t, self.d, self.s - 1) if self.s > 0 else None
        self.next = L.rank(self.t, self.d, self.s + 1) if self.s < L.pp - 1 else None
        self.counting = self.t == 0 and self.d == 0
        self.pending = []  # sends not yet issued: (tensor, dst, key)

    def _send(self, x, dst, boundary, direction, variant):
        if self.counting:
            self.plan.count_transfer(boundary, direction, x, variant)
        self.pending.append((x, dst, _send_key(boundary, direction), variant))

    def _flush(self, like=None, src=None, variant=None):
        """Issues the pending sends, the last one in one batch with the receive (if any)."""
        plan = self.plan
        sends, self.pending = self.pending, []
        last = sends.pop() if sends and like is not None else None
        for x, dst, key, v in sends:
            td.sendrecv(x, dst, variant=v, feedback=plan.pp_feedback, key=key)
        if like is None:
            return None
        if last is None:
            return td.sendrecv(like=like, src=src, variant=variant)
        x, dst, key, v = last
        return td.sendrecv(x, dst, like, src, variant=v, feedback=plan.pp_feedback, key=key)

    def step(self, x, y, lr, a, act_shape, dtype):
        plan, cell, L = self.plan, self.cell, self.plan.layout
        mbs = plan.micro_batches(x, y, self.d)
        v = plan.pp_variant
        stash, loss_sum = {}, 0.0
        for kind, i in schedule_1f1b(L.pp, self.s, plan.m):
            xb, yb = mbs[i]
            if kind == "F":
                inp = xb
                if not cell.first:
                    like = torch.empty((xb.shape[1], xb.shape[0]) + act_shape, dtype=dtype, device=self.device)
                    inp = self._flush(like, self.prev, v).requires_grad_(True)
                out = cell.forward(inp, yb)
                if cell.last:
                    loss_sum += float(out)
                else:
                    self._send(out.detach(), self.next, self.s, "fwd", v)
                stash[i] = (inp, out)
            else:
                inp, out = stash.pop(i)
                if cell.last:
                    (out / plan.m).backward()
                else:
                    torch.autograd.backward(out, self._flush(out, self.next, v))
                if not cell.first:
                    self._send(inp.grad, self.prev, self.s - 1, "bwd", v)
        self._flush()
        if cell.tp is not None and a.subspace:
            T.allreduce_partial_grads(cell.model, cell.tp, "subspace_partial_grad")
        opt = cell.opts[0]
        g = opt.grads()
        if L.dp > 1 and self.counting:
            plan.count_dp("grads", "reduce_scatter", g, plan.dp_variant)
        shard = td.reduce_scatter(g, plan.dp_variant, self.dp_group, feedback=plan.dp_feedback,
                                  key=("dp", self.s, self.t)) * (1.0 / L.dp)
        sh, rep = _reduce_scatter_terms(plan, cell, 0, shard)
        mine = torch.tensor([sh, rep, loss_sum if self.t == 0 else 0.0], dtype=torch.float64, device=self.device)
        terms = self.all_terms(mine)
        total_sq = sum(t[0] + t[1] for t in terms)
        loss = sum(t[2] for t in terms) / (plan.m * L.dp)
        gnorm, factor = _clip_factor(total_sq, a.clip)
        opt.step(shard.mul_(factor) if factor != 1.0 else shard, lr, a.weight_decay)
        compressed = plan.dp_weight_variant is not None
        send = opt.outgoing(compressed)
        if L.dp > 1 and self.counting:
            plan.count_dp("weights", "all_gather", send, plan.dp_weight_variant)
        got = td.all_gather(send, plan.dp_weight_variant, self.dp_group, feedback=plan.dp_feedback,
                            key=("dpw", self.s, self.t))
        opt.load(got, compressed)
        for p in cell.model.parameters():
            p.grad = None
        return loss, gnorm

    def all_terms(self, mine):
        """Every rank's scalars, in global rank order (the same list, and sums, on every rank)."""
        import torch.distributed as dist
        parts = [torch.empty_like(mine) for _ in range(self.plan.layout.world)]
        dist.all_gather(parts, mine)
        return [tuple(float(v) for v in p.cpu()) for p in parts]

    @torch.no_grad()
    def evaluate(self, x, y, act_shape, dtype):
        """Validation loss of the full batch through the pipeline (plain transfers), on every rank."""
        cell = self.cell
        inp = x
        if not cell.first:
            like = torch.empty((x.shape[1], x.shape[0]) + act_shape, dtype=dtype, device=self.device)
            inp = td.sendrecv(like=like, src=self.prev)
        out = cell.forward(inp, y)
        if not cell.last:
            td.sendrecv(out, self.next)
        loss = float(out) if cell.last and self.t == 0 and self.d == 0 else 0.0
        terms = self.all_terms(torch.tensor([0.0, 0.0, loss], dtype=torch.float64, device=self.device))
        return sum(t[2] for t in terms)


# ---- the trainer's 3D run (python -m taco.train with --pp/--dp or --pp-sim/--dp-sim) --------------------

def run(rank, a, corpus_train, corpus_val, corpus_info, init_file, world):
    """One 3D training process (rank `rank` of `world`), or the whole simulated run (world 1)."""
    import datetime
    import json
    import os

    import numpy as np
    import torch.distributed as dist

    from .cli import Metrics, comp_suspended, make_compression
    from .config import ModelConfig
    from .data import ByteCorpus
    from .loop import finish, pick_device, record_validation, run_steps, say_on
    from .model import Transformer

    if a.threads:
        torch.set_num_threads(a.threads)
    device = pick_device(a, rank)
    L = Layout(max(a.tp, a.tp_sim, 1), a.dp, a.pp)
    rv = a.route_variants
    plan = Plan(L, a.micro_batches, rv["pp"], rv["dp"], rv["dp-weights"])
    cfg = ModelConfig(arch=a.arch, seq=a.seq, layers=a.layers, hidden=a.hidden, heads=a.heads, kv_heads=a.kv_heads,
                      ffn=a.ffn, compute_dtype=a.dtype, subspace=a.subspace)

    def build(s, d, tp, comp):
        torch.manual_seed(a.seed)
        model = make_stage(Transformer(cfg, tp, seed=a.seed), s, L.pp).to(device)
        return Cell(s, d, model, tp, comp, L)

    if world > 1:
        if init_file is None:
            dist.init_process_group(a.backend, timeout=datetime.timedelta(seconds=300))
        else:
            dist.init_process_group(a.backend, init_method=f"file://{init_file}", rank=rank, world_size=world,
                                    timeout=datetime.timedelta(seconds=300))
        t, d, s = L.coords(rank)
        tp_group = dp_group = None
        for s2 in range(L.pp):  # every rank creates every group, in one order
            for d2 in range(L.dp):
                g = dist.new_group([L.rank(t2, d2, s2) for t2 in range(L.tp)])
                if (d2, s2) == (d, s):
                    tp_group = g
            for t2 in range(L.tp):
                g = dist.new_group([L.rank(t2, d2, s2) for d2 in range(L.dp)])
                if (t2, s2) == (t, s):
                    dp_group = g
        comp = make_compression(a)
        tp = T.TP.process(tp_group, comp) if L.tp > 1 else None
        pipe = ProcessPipe(plan, build(s, d, tp, comp), rank, dp_group, device)
        comps = [comp]
        main_cells = [pipe.cell]
    else:
        def sim_cell(s, d):  # each cell its own TP compression state, as each process has
            comp = make_compression(a)
            return build(s, d, T.TP.simulated(L.tp, comp) if L.tp > 1 else None, comp)

        cells = [[sim_cell(s, d) for d in range(L.dp)] for s in range(L.pp)]
        comps = [row[0].comp for row in cells]  # replica 0's stages
        main_cells = [row[0] for row in cells]
    metrics = Metrics(os.path.join(a.out, "metrics.jsonl"), rank == 0)
    say = say_on(rank == 0)
    act_shape = (cfg.hidden,)
    dtype = getattr(torch, a.dtype)
    rng = np.random.default_rng(a.seed + 1)  # the global batch order: identical on every rank
    log = {"val": [], "captures": [], "final_step": None}

    def batch(data, r):
        x, y = ByteCorpus.batch(data, r, a.batch, a.seq)
        return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)

    def evaluate(step):
        r = np.random.default_rng(a.seed + 2 + (1 << 20))  # the same held-out batches as without 3D
        losses = []
        with _all_suspended(comp_suspended, comps):
            for c in main_cells:
                c.model.eval()
            for _ in range(a.eval_batches):
                x, y = batch(corpus_val, r)
                losses.append(pipe.evaluate(x, y, act_shape, dtype) if world > 1 else sim_eval(cells, x, y))
            for c in main_cells:
                c.model.train()
        return record_validation(log, metrics, say, step, losses)

    nparams = _param_count(main_cells, L, world)
    say(f"train: {cfg.name()} tp{L.tp} pp{L.pp} dp{L.dp}{'-sim' if world == 1 else ''} x{plan.m} micro-batches, "
        f"{nparams:,} parameters, device {device}, dtype {a.dtype}, routes {json.dumps(describe(a, comps[0]))}")

    def train_step(step, x, y, lr, last):
        for c in comps:
            c.step = step
        if world > 1:
            return pipe.step(x, y, lr, a, act_shape, dtype)
        return sim_step(plan, cells, x, y, lr, a)

    def after_step(step, loss_value, last):
        for smp in comps[0].samples:  # the first stage's TP samples (global rank 0)
            metrics.write(dict(type="error", **smp))
        for c in comps:
            c.samples.clear()

    done = run_steps(a, device, world, metrics, say, lambda: batch(corpus_train, rng), train_step, evaluate,
                     after_step=after_step)
    log.update(final_step=done["final_step"], train_seconds=done["train_seconds"],
               final_train_loss=done["final_train_loss"])
    log["final_val_loss"] = evaluate(done["final_step"])
    log["params"] = nparams
    log["median_step_s"] = done["median_step_s"]
    counts = _counts(comps, plan.routes)
    if world > 1:  # one replica's view: the TP rank 0, DP rank 0 ranks of every stage
        every = [None] * world
        dist.all_gather_object(every, counts)
        counts = _merge([c for r, c in enumerate(every) if L.coords(r)[:2] == (0, 0)])
    log.update(_traffic(counts))
    log["compression"] = describe(a, comps[0])
    log["parallel"] = {"tp": L.tp, "pp": L.pp, "dp": L.dp, "micro_batches": plan.m,
                       "rank_order": "rank = t + TP * (d + DP * s): TP fastest, then DP, then PP",
                       "stage_layers": [list(stage_layers(a.layers, L.pp, s2)) for s2 in range(L.pp)]}
    log["final_params_sha256"] = _params_digest(main_cells, L, world)
    finish(metrics, world)
    return log


@contextlib.contextmanager
def _all_suspended(suspend, comps):
    """Validation suspends every cell's TP compression."""
    with contextlib.ExitStack() as stack:
        for c in comps:
            stack.enter_context(suspend(c))
        yield


def describe(a, comp):
    return {"tp": comp.describe(), "pp": a.compress_pp, "dp": a.compress_dp, "dp_weights": a.compress_dp_weights}


def _counts(comps, routes):
    """This process's counters, as plain dicts keyed by (route, site, direction, collective)."""
    fired, elements, wire = collections.Counter(), collections.Counter(), collections.Counter()
    for c in comps:
        for (site, direction, kind), n in c.fired.items():
            fired[("tp", site, direction, kind)] += n
            elements[("tp", site, direction, kind)] += 0
        for (site, direction), n in c.elements.items():
            elements[("tp", site, direction, "")] += n
            wire[("tp", site, direction, "")] += c.wire_bytes[(site, direction)]
    fired.update(routes.fired)
    elements.update(routes.elements)
    wire.update(routes.wire_bytes)
    return {"fired": dict(fired), "elements": dict(elements), "wire_bytes": dict(wire)}


def _merge(parts):
    out = {"fired": collections.Counter(), "elements": collections.Counter(), "wire_bytes": collections.Counter()}
    for p in parts:
        for k in out:
            out[k].update(p[k])
    return out


def _traffic(counts):
    """train_log.json's fired, traffic and per-route totals (bytes per element per route)."""
    fired = [{"route": r, "site": s, "direction": d, "collective": k, "calls": n}
             for (r, s, d, k), n in sorted(counts["fired"].items())]
    per = collections.defaultdict(lambda: [0, 0])
    traffic = []
    for key in sorted(k for k in counts["elements"] if counts["elements"][k] or counts["wire_bytes"].get(k)):
        r, s, d, _ = key
        e, w = counts["elements"][key], counts["wire_bytes"].get(key, 0)
        traffic.append({"route": r, "site": s, "direction": d, "elements": e, "wire_bytes": w,
                        "bytes_per_element": w / max(1, e)})
        per[r][0] += e
        per[r][1] += w
    routes = {r: {"elements": e, "wire_bytes": w, "bytes_per_element": w / max(1, e)} for r, (e, w) in per.items()}
    return {"fired": fired, "traffic": traffic, "routes": routes}


def _param_count(cells, L, world):
    """Parameters of the whole model: every stage, every TP shard once."""
    import torch.distributed as dist
    n = sum(T.param_count(c.model, c.tp) if c.tp is not None else sum(p.numel() for p in c.model.parameters())
            for c in cells)
    if world == 1:
        return n
    every = [None] * world  # one replica's stages: the TP rank 0, DP rank 0 ranks
    dist.all_gather_object(every, n)
    return sum(every[L.rank(0, 0, s)] for s in range(L.pp))


def _params_digest(cells, L, world):
    """sha256 of replica 0's final parameters, stage by stage and TP rank by TP rank (the same
    bits in the simulated and the process form; the tests compare it)."""
    import hashlib

    import torch.distributed as dist
    h = hashlib.sha256()
    if world == 1:
        for c in cells:
            for q in range(len(c.opts)):
                h.update(c.opts[q].full.cpu().numpy().tobytes())
        return h.hexdigest()
    t, d, s = L.coords(dist.get_rank())
    every = [None] * world
    dist.all_gather_object(every, cells[0].opts[0].full.cpu().numpy().tobytes())
    for s2 in range(L.pp):
        for t2 in range(L.tp):
            h.update(every[L.rank(t2, 0, s2)])
    return h.hexdigest()
