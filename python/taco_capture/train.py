"""Train a small byte-level GPT from scratch at TP=N and capture the tensors its TP collectives
carry at chosen steps, as taco traces.

Two ways to run TP (the same model, weights and data either way):
  --mode dist      one process per TP rank (torch.multiprocessing), torch.distributed with gloo
                   (CPU, or several ranks sharing one GPU) or nccl (one GPU per rank);
                   tp.ColumnParallelLinear / RowParallelLinear; one trace file per rank and step.
  --mode emulate   one process, the unsplit model; emulate.Emulator computes every rank's
                   partials at capture steps; one trace file per step holding all ranks.

Examples:
  # 2 ranks on the CPU, a tiny model, a few steps
  python -m taco_capture.train --mode dist --tp 2 --device cpu --layers 2 --hidden 64 --heads 4 \\
      --seq 64 --batch 4 --steps 30 --capture-steps 0,29 --out /tmp/cap
  # one GPU, TP=2 emulated, 3 minutes
  python -m taco_capture.train --mode emulate --tp 2 --device cuda --dtype bfloat16 \\
      --layers 6 --hidden 512 --heads 8 --seq 512 --batch 16 --time-limit 180 --out /tmp/cap

Outputs in --out: trace.rank<r>.step<NNNNNN>.h5 (dist) or trace.step<NNNNNN>.h5 (emulate),
sp.*.h5 for the sequence-parallel capture (--sp-final), and train_log.json (config, loss curve,
captures, environment).
"""
import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time

import numpy as np

from .errors import CaptureInputError, run_cli


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m taco_capture.train", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=("dist", "emulate"), default="dist")
    p.add_argument("--tp", type=int, default=2, help="TP degree (default 2)")
    p.add_argument("--backend", choices=("gloo", "nccl"), default="gloo", help="dist mode (default gloo)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default=None,
                   help="activation dtype (default bfloat16 on cuda, float32 on cpu)")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--ffn", type=int, default=0, help="MLP width (default 4 x hidden)")
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=16, help="sequences per step (all TP ranks see the same)")
    p.add_argument("--steps", type=int, default=100000, help="at most this many steps (default: time-limited)")
    p.add_argument("--time-limit", type=float, default=0.0, help="stop training after this many seconds (0 = none)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--min-lr-frac", type=float, default=0.1)
    p.add_argument("--decay-steps", type=int, default=0, help="cosine decay length (default --steps, or an "
                   "estimate from --time-limit)")
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--data", action="append", default=None,
                   help="root directory of text files (repeatable; default: this Python's library dirs)")
    p.add_argument("--data-bytes", type=int, default=64 << 20)
    p.add_argument("--capture-steps", default="", help="comma-separated steps to capture (0 = first)")
    p.add_argument("--capture-fracs", default="", help="also capture the first step after these fractions "
                   "of --time-limit, e.g. 0.5")
    p.add_argument("--capture-last", action="store_true", help="also capture the last step")
    p.add_argument("--capture-layers", default="", help="comma-separated layers (default all)")
    p.add_argument("--capture-batch", type=int, default=0, help="keep the first N sequences of each captured "
                   "tensor (default all)")
    p.add_argument("--sp-final", action="store_true", help="after training, one more forward/backward on the "
                   "last batch with sequence parallel on (no update), captured")
    p.add_argument("--gzip", type=int, default=4, help="gzip level of the traces (default 4)")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--eval-batches", type=int, default=8)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)

    def ints(text, what):
        try:
            return sorted({int(x) for x in text.split(",") if x.strip()})
        except ValueError:
            raise CaptureInputError(f"{what} must be comma-separated integers, got {text!r}") from None

    a.capture_steps = ints(a.capture_steps, "--capture-steps")
    a.capture_layers = ints(a.capture_layers, "--capture-layers") or None
    try:
        a.capture_fracs = sorted(float(x) for x in a.capture_fracs.split(",") if x.strip())
    except ValueError:
        raise CaptureInputError(f"--capture-fracs must be comma-separated numbers, got {a.capture_fracs!r}") from None
    if a.tp < 1:
        raise CaptureInputError(f"--tp must be >= 1, got {a.tp}")
    if a.hidden % a.heads or a.heads % a.tp:
        raise CaptureInputError(f"--hidden {a.hidden} / --heads {a.heads} / --tp {a.tp}: heads must divide hidden "
                                "and TP must divide heads")
    if a.sp_final and a.seq % a.tp:
        raise CaptureInputError(f"--sp-final needs --seq {a.seq} divisible by --tp {a.tp}")
    if a.capture_layers and max(a.capture_layers) >= a.layers:
        raise CaptureInputError(f"--capture-layers {a.capture_layers} has a layer >= --layers {a.layers}")
    if a.capture_fracs and a.time_limit <= 0:
        raise CaptureInputError("--capture-fracs needs --time-limit")
    if a.steps < 1 or a.batch < 1 or a.seq < 2 or a.layers < 1:
        raise CaptureInputError("--steps, --batch, --layers must be >= 1 and --seq >= 2")
    if not os.path.isdir(a.out):
        raise CaptureInputError(f"--out {a.out} is not a directory")
    if any(a.capture_fracs) and not all(0 <= f <= 1 for f in a.capture_fracs):
        raise CaptureInputError("--capture-fracs must lie in [0, 1]")
    return a


def environment(device):
    import torch

    env = {"python": platform.python_version(), "torch": torch.__version__, "host": platform.node(),
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
        env["cuda"] = torch.version.cuda
        env["gpu_count"] = torch.cuda.device_count()
    return env


def lr_at(step, a, decay_steps):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    t = min(1.0, (step - a.warmup) / max(1, decay_steps - a.warmup))
    return a.lr * (a.min_lr_frac + (1 - a.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * t)))


def make_optimizer(model, a):
    import torch

    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                              {"params": other, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.95), eps=1e-8)


def worker(rank, a, corpus_train, corpus_val, corpus_info, init_file, log_dir):
    """One training process: rank `rank` of TP=a.tp (dist), or the only process (emulate)."""
    import torch
    import torch.distributed as dist

    from . import model as M
    from . import tp as T
    from .emulate import Emulator
    from .recorder import Recorder, write_records

    torch.manual_seed(a.seed)
    device = torch.device("cuda", rank % torch.cuda.device_count()) if a.device == "cuda" else torch.device("cpu")
    if a.device == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = False
    cfg = M.GPTConfig(seq=a.seq, layers=a.layers, hidden=a.hidden, heads=a.heads, ffn=a.ffn,
                      compute_dtype=a.dtype)
    model_name = f"{cfg.name()} tp{a.tp} taco_capture-{a.mode}"
    recorder = Recorder(model_name, layers=a.capture_layers, keep_batch=a.capture_batch or None, batch_dim=1,
                        extra={"mode": a.mode, "compute_dtype": a.dtype, "layout": "seq,batch,hidden"})

    full = M.GPT(cfg)                      # same seed everywhere: identical unsplit initial weights
    tp = None
    if a.mode == "dist":
        import datetime
        dist.init_process_group(a.backend, init_method=f"file://{init_file}", rank=rank, world_size=a.tp,
                                timeout=datetime.timedelta(seconds=120))
        tp = T.TPGroup(recorder=recorder)
        model = M.GPT(cfg, tp=tp)
        M.load_from_full(model, full)
        del full
        emulator = None
    else:
        model = full
        emulator = Emulator(model, M.DEFAULT_RULES, a.tp, recorder, sequence_parallel=False, seq_dim=0)
    model.to(device)
    opt = make_optimizer(model, a)
    rng = np.random.default_rng(a.seed + 1)          # identical batches on every rank
    eval_rng_seed = a.seed + 2
    is_main = rank == 0
    log = {"steps": [], "val": [], "captures": []}

    def log_print(*args):
        if is_main:
            print(*args, flush=True)

    def sync_flags(flags):
        """Rank 0's decisions, the same on every rank."""
        t = torch.tensor(flags if is_main else [0.0] * len(flags), dtype=torch.float32, device=device)
        if tp is not None:
            t = tp.all_reduce(t)
        return [float(x) for x in t]

    @torch.no_grad()
    def evaluate():
        model.eval()
        r = np.random.default_rng(eval_rng_seed)
        losses = []
        for _ in range(a.eval_batches):
            x, y = corpus_val_batch(r)
            losses.append(float(model(x, y)[1].detach()))
        model.train()
        return float(np.mean(losses))

    def to_dev(x):
        return torch.from_numpy(x).to(device)

    def corpus_val_batch(r):
        x, y = _batch(corpus_val, r)
        return to_dev(x), to_dev(y)

    def _batch(data, r):
        from .data import ByteCorpus
        return ByteCorpus.batch(data, r, a.batch, a.seq)

    def trace_path(prefix, step):
        who = f".rank{rank}" if a.mode == "dist" else ""
        return os.path.join(a.out, f"{prefix}{who}.step{step:06d}.h5")

    provenance = {"generator": "taco_capture.train", "command": " ".join([sys.executable, "-m", "taco_capture.train"]
                                                                         + a.argv),
                  "seed": str(a.seed), "source": f"trained from scratch on {corpus_info['files_used']} files "
                  f"({corpus_info['train_bytes']} bytes) under {', '.join(corpus_info['roots'])}",
                  "model_config": json.dumps(cfg.as_dict()), "tp_mode": a.mode}

    def write_capture(prefix, step, loss_value):
        recs = recorder.take()
        if not recs:
            return
        path = trace_path(prefix, step)
        prov = dict(provenance, step=str(step), train_loss=f"{loss_value:.6f}")
        n = write_records(path, recs, provenance=prov, compression_level=a.gzip)
        log["captures"].append({"file": os.path.basename(path), "step": step, "tensors": n,
                                "bytes": os.path.getsize(path), "rank": rank if a.mode == "dist" else -1})
        log_print(f"capture: step {step} -> {os.path.basename(path)} ({n} tensors on rank {rank}, "
                  f"{os.path.getsize(path) / 2**20:.2f} MiB)")

    def train_step(x, y, capture):
        if capture:
            recorder.start(step)
        _, loss = model(x, y)
        loss.backward()
        if capture:
            recorder.stop()
        if tp is not None and model.sp:
            T.allreduce_sp_partial_grads(model, tp)
        gnorm = float(T.grad_norm(model, tp))
        return loss, gnorm

    t0 = time.time()
    est_total = a.steps
    decay_steps = a.decay_steps or a.steps
    fracs_pending = list(a.capture_fracs)
    step_times = []
    last_x = last_y = None
    step = 0
    log_print(f"train: {model_name}, {sum(p.numel() for p in model.parameters())} parameters per rank, "
              f"device {device}, dtype {a.dtype}, mode {a.mode}, backend {a.backend if a.mode == 'dist' else '-'}")
    while True:
        elapsed = time.time() - t0
        per_step = float(np.median(step_times[-20:])) if step_times else 0.0
        last = step == a.steps - 1 or (a.time_limit > 0 and elapsed + 1.5 * per_step >= a.time_limit)
        cap = step in a.capture_steps or (last and a.capture_last)
        if fracs_pending and a.time_limit > 0 and elapsed >= fracs_pending[0] * a.time_limit:
            fracs_pending.pop(0)
            cap = True
        if a.time_limit > 0 and step == 20 and not a.decay_steps and per_step > 0:
            # cosine decay over the steps the time limit allows, estimated from the first steps
            est_total = min(a.steps, int(a.time_limit / per_step))
            decay_steps = max(a.warmup + 1, est_total)
        last_f, cap_f, decay_f = sync_flags([float(last), float(cap), float(decay_steps)])
        last, cap, decay_steps = last_f > 0.5, cap_f > 0.5, int(decay_f)

        ts = time.time()
        lr = lr_at(step, a, decay_steps)
        for g in opt.param_groups:
            g["lr"] = lr
        xb, yb = _batch(corpus_train, rng)
        x, y = to_dev(xb), to_dev(yb)
        opt.zero_grad(set_to_none=True)
        loss, gnorm = train_step(x, y, cap)
        if a.clip > 0 and math.isfinite(gnorm) and gnorm > a.clip:
            for p in model.parameters():
                if p.grad is not None:
                    p.grad.mul_(a.clip / gnorm)
        opt.step()
        loss_value = float(loss.detach())
        if device.type == "cuda":
            torch.cuda.synchronize()
        step_times.append(time.time() - ts)
        if not math.isfinite(loss_value):
            raise RuntimeError(f"loss is {loss_value} at step {step}")
        if cap:
            write_capture("trace", step, loss_value)
            log["val"].append({"step": step, "val_loss": evaluate()})
            log_print(f"eval: step {step} val_loss {log['val'][-1]['val_loss']:.4f}")
        if step % a.log_every == 0 or last:
            tok_s = a.batch * a.seq / max(step_times[-1], 1e-9)
            log["steps"].append({"step": step, "loss": loss_value, "lr": lr, "grad_norm": gnorm,
                                 "elapsed_s": round(time.time() - t0, 3), "tokens_per_s": round(tok_s, 1)})
            log_print(f"step {step:6d} loss {loss_value:.4f} lr {lr:.2e} gnorm {gnorm:.3f} "
                      f"{tok_s:,.0f} tok/s  t={time.time() - t0:.1f}s")
        last_x, last_y = x, y
        if last:
            break
        step += 1

    log["final_step"] = step
    log["train_seconds"] = round(time.time() - t0, 3)
    if not log["val"] or log["val"][-1]["step"] != step:
        log["val"].append({"step": step, "val_loss": evaluate()})
        log_print(f"eval: step {step} val_loss {log['val'][-1]['val_loss']:.4f}")

    if a.sp_final:
        # One more forward/backward with sequence parallel on (all-gather / reduce-scatter), on
        # the last batch with the weights after the last update, i.e. those of step + 1; no update.
        step += 1
        recorder.extra["sp_pass"] = f"batch of step {step - 1}, weights after its update, no update"
        if a.mode == "dist":
            model.set_sequence_parallel(True)
        else:
            emulator.sp = True
        opt.zero_grad(set_to_none=True)
        recorder.start(step)
        _, loss = model(last_x, last_y)
        loss.backward()
        recorder.stop()
        opt.zero_grad(set_to_none=True)
        write_capture("sp", step, float(loss.detach()))
        recorder.extra.pop("sp_pass")
        if a.mode == "dist":
            model.set_sequence_parallel(False)
        else:
            emulator.sp = False

    if tp is not None:
        dist.barrier()
        dist.destroy_process_group()
    with open(os.path.join(log_dir, f"log.rank{rank}.json"), "w") as f:
        json.dump(log, f)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parse_args(argv)
    a.argv = argv
    import torch
    import torch.multiprocessing as mp

    from .data import ByteCorpus, default_roots

    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    if a.device == "cuda" and not torch.cuda.is_available():
        raise CaptureInputError("--device cuda but torch sees no GPU")
    if a.dtype is None:
        a.dtype = "bfloat16" if a.device == "cuda" else "float32"
    if a.mode == "dist" and a.backend == "nccl" and (a.device != "cuda" or torch.cuda.device_count() < a.tp):
        raise CaptureInputError(f"--backend nccl needs {a.tp} GPUs (one per rank); use gloo to share one")
    roots = a.data or default_roots()
    corpus = ByteCorpus(roots, a.data_bytes, seed=a.seed)
    info = corpus.describe()
    print(f"data: {info['files_used']} of {info['files_found']} files, {info['train_bytes']} train + "
          f"{info['val_bytes']} val bytes, sha256 {info['sha256'][:16]}", flush=True)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    t0 = time.time()
    logs = {}
    with tempfile.TemporaryDirectory(prefix="taco_capture_") as tmp:
        init_file = os.path.join(tmp, "store")
        args = (a, corpus.train, corpus.val, info, init_file, tmp)
        if a.mode == "dist":
            mp.spawn(worker, args=args, nprocs=a.tp, join=True)
        else:
            worker(0, *args)
        for rank in range(a.tp if a.mode == "dist" else 1):
            with open(os.path.join(tmp, f"log.rank{rank}.json")) as f:
                logs[rank] = json.load(f)
    main_log = logs[0]
    captures = sorted((c for lg in logs.values() for c in lg["captures"]), key=lambda c: c["file"])
    out = {"mode": a.mode, "tp": a.tp, "backend": a.backend if a.mode == "dist" else None,
           "device": a.device, "dtype": a.dtype,
           "config": dict({k: getattr(a, k) for k in ("layers", "hidden", "heads", "seq", "batch", "lr", "warmup",
                                                       "weight_decay", "clip", "seed", "steps", "time_limit",
                                                       "capture_batch", "capture_layers")},
                          ffn=a.ffn or 4 * a.hidden),
           "command": " ".join([sys.executable, "-m", "taco_capture.train"] + argv),
           "environment": environment(a.device), "data": info, "wall_seconds": round(time.time() - t0, 2),
           "final_step": main_log["final_step"], "train_seconds": main_log["train_seconds"],
           "loss_curve": main_log["steps"], "val_curve": main_log["val"], "captures": captures}
    path = os.path.join(a.out, "train_log.json")
    with open(path + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    os.replace(path + ".tmp", path)
    first, lastl = main_log["steps"][0]["loss"], main_log["steps"][-1]["loss"]
    print(f"done: {main_log['final_step'] + 1} steps in {main_log['train_seconds']:.1f}s, loss {first:.3f} -> "
          f"{lastl:.3f}, val {main_log['val'][-1]['val_loss']:.3f}; {len(captures)} trace files; {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
