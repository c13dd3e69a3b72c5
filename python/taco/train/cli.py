"""Train a Llama- or GPT-2-style byte-level model with tensor parallelism (TP) and every TP
collective compressed in the loop; optionally capture the tensors those collectives carry as taco
traces.

Three ways to run TP, one model code (taco.tp), the same numerics:
  --tp-sim N       all N ranks in this process (one GPU or the CPU), taco.dist.SimGroup
  --tp N           N processes started here (torch.distributed: gloo on the CPU, nccl with N GPUs)
  torchrun ...     one process per rank started by torchrun (--tp defaults to the world size)

Compression: --compress VARIANT for every site (none = plain collectives), or --config
selection.json from `taco study --select` (a codec per site and direction); --compress-bwd VARIANT
overrides the backward direction of either; --algo picks the all-reduce algorithm as in `taco comm`.
`ef:<variant>` keeps one error-feedback residual per stream (layer, site, direction, rank).
`[ef:]powersgd:r<R>[:fp32]` is a low-rank all-reduce (PowerSGD: two factor messages of
(tokens + hidden) x R values, error feedback with ef:; taco.lowrank), not with --sp.

Protocol: a seed fixes the initial weights and the data order; the train/validation split of the
corpus does not depend on it (--data-seed), so runs with different codecs and the same seed are
paired. Validation every --eval-every steps on fixed held-out batches, with the TP collectives
uncompressed (the trained weights are compared, not the link). Every --sample-every steps each
compressed collective's error against the exact float64 sum is recorded.

Data: byte-level text from files on disk, by default the Python sources of this interpreter's
library (real text that exists on every machine with Python; nothing is downloaded).

Examples:
  # CPU, 2 simulated ranks, a tiny Llama, TACO on every TP collective
  python -m taco.train --tp-sim 2 --layers 2 --hidden 64 --heads 4 --seq 64 --batch 4 --steps 30 \\
      --compress taco --out /tmp/run
  # low-rank forward all-reduces (rank 8), INT4 backward gradients
  python -m taco.train --tp-sim 2 --layers 2 --hidden 64 --heads 4 --seq 64 --batch 4 --steps 30 \\
      --compress powersgd:r8 --compress-bwd int4-g32-had --out /tmp/run
  # one GPU, 4 simulated ranks, per-site codecs from a study
  python -m taco.train --tp-sim 4 --device cuda --config r/selection.json --steps 2000 --out /tmp/run
  # 2 GPUs, real NCCL TP
  torchrun --nproc_per_node 2 -m taco.train --device cuda --compress fp8-g128 --out /tmp/run

Outputs in --out: train_log.json (config, data, compression, collectives fired per site and
direction, bytes, final losses, environment), metrics.jsonl (one JSON object per line: "step",
"val", "error" records), and trace.rank<r>.step<NNNNNN>.h5 / trace.step<NNNNNN>.h5 for captures.
"""
import argparse
import contextlib
import json
import math
import os
import platform
import sys
import tempfile
import time

import numpy as np

from ..errors import TacoInputError, run_cli


def torchrun_world():
    """The world size when torchrun started this process (one process per TP rank), else 0."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1:
        return int(os.environ["WORLD_SIZE"])
    return 0


def parse_args(argv, world=0):
    p = argparse.ArgumentParser(prog="python -m taco.train", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    g = p.add_argument_group("model")
    g.add_argument("--arch", choices=("llama", "gpt2"), default="llama")
    g.add_argument("--layers", type=int, default=4)
    g.add_argument("--hidden", type=int, default=256)
    g.add_argument("--heads", type=int, default=8)
    g.add_argument("--kv-heads", type=int, default=0, help="llama: key/value heads (default = heads)")
    g.add_argument("--ffn", type=int, default=0, help="MLP width (default: gpt2 4 x hidden, llama ~8/3 x hidden)")
    g.add_argument("--seq", type=int, default=256)
    g.add_argument("--batch", type=int, default=16, help="sequences per step (every TP rank sees the same)")
    g.add_argument("--dtype", choices=("float32", "bfloat16"), default=None,
                   help="activation dtype (default bfloat16 on cuda, float32 on cpu)")
    g = p.add_argument_group("tensor parallelism")
    g.add_argument("--tp", type=int, default=0, help="TP processes (default: torchrun's world size, else 1)")
    g.add_argument("--tp-sim", type=int, default=0, help="simulate N TP ranks in this process")
    g.add_argument("--sp", action="store_true", help="sequence parallelism (all-gather / reduce-scatter pairs)")
    g.add_argument("--subspace", type=int, default=None, metavar="K",
                   help="confine the residual stream's updates to a fixed K-dim basis: TP collectives carry K "
                        "coordinates per token (Protocol Models; docs/training.md)")
    g.add_argument("--backend", choices=("gloo", "nccl"), default=None, help="default nccl on cuda, gloo on cpu")
    g.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    g = p.add_argument_group("compression")
    g.add_argument("--compress", default="none", help="codec for every TP collective (default none)")
    g.add_argument("--config", default=None, help="selection.json from taco study --select: a codec per site")
    g.add_argument("--compress-bwd", default=None, metavar="VARIANT",
                   help="variant for the backward direction of every site, over --compress or --config "
                        "(e.g. a quantizer under powersgd:r8; none = plain)")
    g.add_argument("--algo", default="auto", help="all-reduce algorithm: auto, one_shot, two_shot, ring")
    g.add_argument("--sample-every", type=int, default=0, help="record each collective's error every N steps")
    g = p.add_argument_group("optimisation")
    g.add_argument("--steps", type=int, default=1000)
    g.add_argument("--time-limit", type=float, default=0.0, help="stop after this many seconds (0 = none)")
    g.add_argument("--lr", type=float, default=1e-3)
    g.add_argument("--warmup", type=int, default=50)
    g.add_argument("--min-lr-frac", type=float, default=0.1)
    g.add_argument("--weight-decay", type=float, default=0.1)
    g.add_argument("--clip", type=float, default=1.0)
    g.add_argument("--seed", type=int, default=1, help="initial weights and data order")
    g = p.add_argument_group("data and evaluation")
    g.add_argument("--data", action="append", default=None,
                   help="root directory of text files (repeatable; default: this Python's library dirs)")
    g.add_argument("--data-bytes", type=int, default=64 << 20)
    g.add_argument("--data-seed", type=int, default=0, help="which files, and the train/validation split")
    g.add_argument("--eval-every", type=int, default=100)
    g.add_argument("--eval-batches", type=int, default=8)
    g.add_argument("--log-every", type=int, default=10)
    g = p.add_argument_group("capture")
    g.add_argument("--capture-steps", default="", help="comma-separated steps to capture (0 = first)")
    g.add_argument("--capture-last", action="store_true", help="also capture the last step")
    g.add_argument("--capture-layers", default="", help="comma-separated layers (default all)")
    g.add_argument("--capture-batch", type=int, default=0, help="keep the first N sequences of each tensor")
    g.add_argument("--gzip", type=int, default=4, help="gzip level of the traces (default 4)")
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads per process (0: torch's default)")
    from .parallel_args import add_arguments, check_args, is_3d
    add_arguments(p)
    a = p.parse_args(argv)

    def ints(text, what):
        try:
            return sorted({int(x) for x in text.split(",") if x.strip()})
        except ValueError:
            raise TacoInputError(f"{what} must be comma-separated integers, got {text!r}") from None

    a.capture_steps = ints(a.capture_steps, "--capture-steps")
    a.capture_layers = ints(a.capture_layers, "--capture-layers") or None
    for name in ("steps", "batch", "layers", "hidden", "heads", "eval_batches", "log_every"):
        if getattr(a, name) < 1:
            raise TacoInputError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(a, name)}")
    if a.seq < 2:
        raise TacoInputError(f"--seq must be >= 2, got {a.seq}")
    for name in ("tp", "tp_sim", "kv_heads", "ffn", "eval_every", "sample_every", "warmup", "threads"):
        if getattr(a, name) < 0:
            raise TacoInputError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(a, name)}")
    a.procs = 0  # processes a 3D run starts (0: not a 3D run)
    if is_3d(a):
        a.procs = check_args(a, world)  # sets --tp from torchrun's world size
        world = 0
    if world:
        if a.tp not in (0, world):
            raise TacoInputError(f"--tp {a.tp} but torchrun started {world} processes")
        a.tp = world
    a.tp = max(a.tp, 1)
    if a.tp > 1 and a.tp_sim > 1:
        raise TacoInputError("--tp and --tp-sim are exclusive: real processes or simulated ranks")
    if a.seed < 0 or a.data_seed < 0:
        raise TacoInputError("--seed and --data-seed must be >= 0")
    if a.capture_layers and max(a.capture_layers) >= a.layers:
        raise TacoInputError(f"--capture-layers {a.capture_layers} has a layer >= --layers {a.layers}")
    if a.config and a.compress != "none":
        raise TacoInputError("give --compress or --config, not both")
    n = max(a.tp, a.tp_sim, 1)
    if a.sp and n == 1:
        raise TacoInputError("--sp needs --tp or --tp-sim of 2 or more")
    if a.sp and a.seq % n:
        raise TacoInputError(f"--sp needs --seq {a.seq} divisible by the TP degree {n}")
    if a.subspace is not None:
        if a.sp:
            raise TacoInputError("--subspace runs without --sp (the sequence-parallel all-gather is not confined)")
        from ..tp import check_subspace
        try:
            check_subspace(a.hidden, a.subspace)
        except TacoInputError as ex:
            raise TacoInputError(f"--subspace: {ex}") from None
    a.subspace = a.subspace or 0
    from .config import ModelConfig
    try:
        ModelConfig(arch=a.arch, seq=a.seq, layers=a.layers, hidden=a.hidden, heads=a.heads, kv_heads=a.kv_heads,
                    ffn=a.ffn, subspace=a.subspace).check_tp(n)
    except ValueError as ex:
        raise TacoInputError(str(ex)) from None
    return a


def environment(device):
    import torch

    env = {"python": platform.python_version(), "torch": torch.__version__, "host": platform.node(),
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        from .. import _C
        env["taco"] = f"{_C.version} ({_C.git_commit})"
    except ImportError:
        env["taco"] = "python only (taco._C not built)"
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
        env["cuda"] = torch.version.cuda
        env["gpu_count"] = torch.cuda.device_count()
        try:
            env["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
        except Exception:  # noqa: BLE001 - informational
            env["nccl"] = None
    return env


def run_name(a):
    """What a run compares against the baseline: the TP codec (or config), its backward override,
    the 3D routes' codecs and its subspace if any (the sweep's candidate names:
    VARIANT[@bwd=V][@pp=V][@dp=V][@dpw=V][@subspace=K], in that order)."""
    name = a.compress if not a.config else f"config:{a.config}"  # the sweep's candidate, as given
    if a.compress_bwd is not None:
        name += f"@bwd={a.compress_bwd}"
    for key, v in (("pp", a.compress_pp), ("dp", a.compress_dp), ("dpw", a.compress_dp_weights)):
        if v not in (None, "none"):
            name += f"@{key}={v}"
    return f"{name}@subspace={a.subspace}" if a.subspace else name


def make_compression(a):
    from ..tp import Compression

    if a.config:
        comp = Compression.from_selection(a.config, algo=a.algo, sample_every=a.sample_every)
    else:
        comp = Compression(a.compress, algo=a.algo, sample_every=a.sample_every)
    if a.compress_bwd is not None:
        try:
            comp.set_direction("bwd", a.compress_bwd)
        except TacoInputError as ex:
            raise TacoInputError(f"--compress-bwd: {ex}") from None
    specs = comp.lowrank_specs()
    if a.sp and specs:
        raise TacoInputError("powersgd is a low-rank all-reduce: --sp sends all-gathers and reduce-scatters "
                             "(give them a codec)")
    for spec in sorted(specs, key=str):  # every TP message is [batch x seq tokens, hidden (or K)]
        spec.check_shape(a.batch * a.seq, a.subspace or a.hidden)
    return comp


def wire_bytes_per_element(comp):
    """Wire bytes over the elements of the full-width tensors they stand for, over every site and
    direction so far (None before the first collective)."""
    el = sum(comp.elements.values())
    return sum(comp.wire_bytes.values()) / el if el else None


def make_optimizer(model, a):
    import torch

    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                              {"params": other, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.95), eps=1e-8)


class Metrics:
    """metrics.jsonl, written by rank 0 (every rank holds the same values)."""

    def __init__(self, path, on):
        self.f = open(path, "w") if on else None

    def write(self, rec):
        if self.f:
            self.f.write(json.dumps(rec) + "\n")
            self.f.flush()

    def close(self):
        if self.f:
            self.f.close()


def worker(rank, a, corpus_train, corpus_val, corpus_info, init_file, world):
    """One training process: rank `rank` of `world` TP processes, or the only one."""
    import torch
    import torch.distributed as dist

    from .. import tp as T
    from ..capture.recorder import Recorder, write_records
    from .config import ModelConfig
    from .data import ByteCorpus
    from .loop import finish, pick_device, record_validation, run_steps, say_on
    from .model import Transformer

    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    device = pick_device(a, rank)
    cfg = ModelConfig(arch=a.arch, seq=a.seq, layers=a.layers, hidden=a.hidden, heads=a.heads, kv_heads=a.kv_heads,
                      ffn=a.ffn, compute_dtype=a.dtype, subspace=a.subspace)
    comp = make_compression(a)
    if world > 1:
        import datetime
        if init_file is None:
            dist.init_process_group(a.backend, timeout=datetime.timedelta(seconds=300))
        else:
            dist.init_process_group(a.backend, init_method=f"file://{init_file}", rank=rank, world_size=world,
                                    timeout=datetime.timedelta(seconds=300))
        tp = T.TP.process(None, comp)
    elif a.tp_sim > 1:
        tp = T.TP.simulated(a.tp_sim, comp)
    else:
        tp = None
    n = 1 if tp is None else tp.size
    model = Transformer(cfg, tp, sequence_parallel=a.sp, seed=a.seed).to(device)
    opt = make_optimizer(model, a)
    metrics = Metrics(os.path.join(a.out, "metrics.jsonl"), rank == 0)
    say = say_on(rank == 0)
    model_name = f"{cfg.name()} tp{n}" + ("-sim" if a.tp_sim > 1 else "")
    recorder = None
    if a.capture_steps or a.capture_last:
        recorder = Recorder(model_name, layers=a.capture_layers, keep_batch=a.capture_batch or None, batch_dim=1,
                            extra={"mode": "sim" if a.tp_sim > 1 else "dist", "compute_dtype": a.dtype,
                                   "layout": "seq,batch,hidden", "compress": json.dumps(comp.describe())})
        comp.recorder = recorder
    rng = np.random.default_rng(a.seed + 1)  # the data order: identical on every rank
    log = {"val": [], "captures": [], "final_step": None}

    def batch(data, r):
        x, y = ByteCorpus.batch(data, r, a.batch, a.seq)
        return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)

    @torch.no_grad()
    def evaluate(step):
        model.eval()
        r = np.random.default_rng(a.seed + 2 + (1 << 20))  # fixed held-out batches
        with comp_suspended(comp):
            losses = [float(model(*batch(corpus_val, r))[1]) for _ in range(a.eval_batches)]
        model.train()
        return record_validation(log, metrics, say, step, losses)

    def capturing(step, last):
        return recorder is not None and (step in a.capture_steps or (last and a.capture_last))

    def train_step(step, x, y, lr, last):
        for grp in opt.param_groups:
            grp["lr"] = lr
        opt.zero_grad(set_to_none=True)
        comp.step = step
        cap = capturing(step, last)
        if cap:
            recorder.start(step)
        _, loss = model(x, y)
        loss.backward()
        if cap:
            recorder.stop()
        if tp is not None:
            if a.sp:
                T.allreduce_sp_partial_grads(model, tp)
            if a.subspace:
                T.allreduce_partial_grads(model, tp, "subspace_partial_grad")
            gnorm = float(T.grad_norm(model, tp))
        else:
            gnorm = float(torch.stack([p.grad.float().pow(2).sum() for p in model.parameters()
                                       if p.grad is not None]).sum().sqrt())
        if a.clip > 0 and math.isfinite(gnorm) and gnorm > a.clip:
            for p in model.parameters():
                if p.grad is not None:
                    p.grad.mul_(a.clip / gnorm)
        opt.step()
        return float(loss.detach()), gnorm

    def after_step(step, loss_value, last):
        for smp in comp.samples:
            metrics.write(dict(type="error", **smp))
        comp.samples.clear()
        if capturing(step, last):
            write_capture(step, loss_value)

    def write_capture(step, loss_value):
        recs = recorder.take()
        if not recs:
            return
        who = f".rank{rank}" if world > 1 else ""
        path = os.path.join(a.out, f"trace{who}.step{step:06d}.h5")
        prov = {"generator": "taco.train", "command": " ".join([sys.executable, "-m", "taco.train"] + a.argv),
                "seed": str(a.seed), "step": str(step), "train_loss": f"{loss_value:.6f}",
                "source": f"trained from scratch on {corpus_info['files_used']} files "
                          f"({corpus_info['train_bytes']} bytes) under {', '.join(corpus_info['roots'])}",
                "model_config": json.dumps(cfg.as_dict()), "tp_mode": "sim" if a.tp_sim > 1 else "dist"}
        count = write_records(path, recs, provenance=prov, compression_level=a.gzip)
        log["captures"].append({"file": os.path.basename(path), "step": step, "tensors": count, "rank": rank})
        say(f"capture: step {step} -> {os.path.basename(path)} ({count} tensors)")

    from ..tp import param_count
    nparams = param_count(model, tp) if tp is not None else sum(p.numel() for p in model.parameters())
    say(f"train: {model_name}, {nparams:,} parameters, device {device}, dtype {a.dtype}, "
        f"compression {json.dumps(comp.describe())}")
    done = run_steps(a, device, world, metrics, say, lambda: batch(corpus_train, rng), train_step, evaluate,
                     after_step=after_step, step_fields=lambda: {"wire_bytes_per_element": wire_bytes_per_element(comp)})
    log.update(final_step=done["final_step"], train_seconds=done["train_seconds"],
               final_train_loss=done["final_train_loss"])
    log["final_val_loss"] = evaluate(done["final_step"])
    log["params"] = nparams
    log["median_step_s"] = done["median_step_s"]
    log["fired"] = [{"site": s, "direction": d, "collective": c, "calls": k} for (s, d, c), k in sorted(comp.fired.items())]
    log["traffic"] = [{"site": s, "direction": d, "elements": comp.elements[(s, d)],
                       "wire_elements": comp.wire_elements[(s, d)], "wire_bytes": comp.wire_bytes[(s, d)],
                       "bytes_per_element": comp.wire_bytes[(s, d)] / max(1, comp.elements[(s, d)])}
                      for (s, d) in sorted(comp.elements)]
    log["wire_bytes_per_element"] = wire_bytes_per_element(comp)
    log["compression"] = comp.describe()
    finish(metrics, world)
    return log


@contextlib.contextmanager
def comp_suspended(comp):
    """Validation runs the TP collectives uncompressed and leaves the error-feedback state alone."""
    counters = (comp.fired, comp.elements, comp.wire_elements, comp.wire_bytes)
    saved = (comp.default, comp.per_site, comp.recorder, comp.sample_every) + tuple(dict(c) for c in counters)
    comp.default, comp.per_site, comp.recorder, comp.sample_every = None, {}, None, 0
    try:
        yield
    finally:
        comp.default, comp.per_site, comp.recorder, comp.sample_every = saved[:4]
        for counter, old in zip(counters, saved[4:]):
            counter.clear()
            counter.update(old)


def run_rank(rank, a, train, val, info, init_file, world):
    """One rank's training: the TP trainer, or the 3D one (taco.train.parallel)."""
    if a.procs:
        from .parallel import run
        return run(rank, a, train, val, info, init_file, world)
    return worker(rank, a, train, val, info, init_file, world)


def _spawned(rank, a, train, val, info, init_file, world, tmp):
    log = run_rank(rank, a, train, val, info, init_file, world)
    with open(os.path.join(tmp, f"log.rank{rank}.json"), "w") as f:
        json.dump(log, f)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    world = torchrun_world()
    a = parse_args(argv, world)
    a.argv = argv
    import torch

    from .data import ByteCorpus, default_roots

    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    if a.device == "cuda" and not torch.cuda.is_available():
        raise TacoInputError("--device cuda but torch sees no GPU")
    if a.dtype is None:
        a.dtype = "bfloat16" if a.device == "cuda" else "float32"
    if a.backend is None:
        a.backend = "nccl" if a.device == "cuda" else "gloo"
    torchrun = world > 1
    n = max(a.tp, a.tp_sim)
    nprocs = a.procs or a.tp  # processes to run (3D: TP x DP x PP; 1 when simulated)
    make_compression(a)  # bad variants, sites, algorithms: one line before anything runs
    if nprocs > 1 and not torchrun and a.backend == "nccl" and torch.cuda.device_count() < nprocs:
        raise TacoInputError(f"{nprocs} processes with nccl need {nprocs} GPUs; simulate the ranks on one device")
    os.makedirs(a.out, exist_ok=True)
    corpus = ByteCorpus(a.data or default_roots(), a.data_bytes, seed=a.data_seed)
    info = corpus.describe()
    rank0 = int(os.environ.get("RANK", 0)) == 0
    if rank0:
        print(f"data: {info['files_used']} of {info['files_found']} files, {info['train_bytes']} train + "
              f"{info['val_bytes']} val bytes, sha256 {info['sha256'][:16]}", flush=True)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    t0 = time.time()
    if torchrun:
        log = run_rank(int(os.environ["RANK"]), a, corpus.train, corpus.val, info, None, world)
        if not rank0:
            return 0
    elif nprocs > 1:
        import torch.multiprocessing as mp
        with tempfile.TemporaryDirectory(prefix="taco_train_") as tmp:
            mp.spawn(_spawned, args=(a, corpus.train, corpus.val, info, os.path.join(tmp, "store"), nprocs, tmp),
                     nprocs=nprocs, join=True)
            with open(os.path.join(tmp, "log.rank0.json")) as f:
                log = json.load(f)
    else:
        log = run_rank(0, a, corpus.train, corpus.val, info, None, 1)
    sim = a.tp_sim > 1 or getattr(a, "sim3d", False)
    out = {"schema": "taco.train/1", "command": " ".join([sys.executable, "-m", "taco.train"] + argv),
           "mode": "sim" if sim else ("dist" if nprocs > 1 else "single"), "tp": n, "sp": a.sp,
           "pp": max(a.pp, 1), "dp": max(a.dp, 1),
           "device": a.device, "dtype": a.dtype, "backend": a.backend if nprocs > 1 else None,
           "seed": a.seed, "variant": run_name(a),
           "config": {k: getattr(a, k) for k in ("arch", "layers", "hidden", "heads", "kv_heads", "ffn", "subspace",
                                                 "seq", "batch",
                                                 "steps", "lr", "warmup", "min_lr_frac", "weight_decay", "clip",
                                                 "algo", "eval_every", "eval_batches", "sample_every", "data_seed")},
           "environment": environment(a.device), "data": info, "wall_seconds": round(time.time() - t0, 2), **log}
    out["tokens"] = (log["final_step"] + 1) * a.batch * a.seq
    path = os.path.join(a.out, "train_log.json")
    with open(path + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    os.replace(path + ".tmp", path)
    print(f"done: {log['final_step'] + 1} steps ({out['tokens']:,} tokens) in {log['train_seconds']:.1f}s, "
          f"loss {log['final_train_loss']:.4f}, val {log['final_val_loss']:.4f}; {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
