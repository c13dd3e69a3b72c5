"""The run loop both trainers share (taco.train.cli's TP run, taco.train.parallel's 3D run): the
rank's device, the step loop with its stopping rule, step timing, the stop on a non-finite loss,
the step records and periodic validation, and the end of a process group. What a step computes is
the trainer's."""
import math
import os
import time

import numpy as np
import torch
import torch.distributed as dist



def lr_at(step, a):
    """Linear warm-up over --warmup steps, then cosine decay to --min-lr-frac of --lr at --steps."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    t = min(1.0, (step - a.warmup) / max(1, a.steps - a.warmup))
    return a.lr * (a.min_lr_frac + (1 - a.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * t)))


def pick_device(a, rank):
    """The rank's device: its local GPU under --device cuda (TF32 off, so that runs compare bit
    for bit), else the CPU."""
    if a.device != "cuda":
        return torch.device("cpu")
    local = int(os.environ.get("LOCAL_RANK", rank))
    device = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(device)
    torch.backends.cuda.matmul.allow_tf32 = False
    return device


def say_on(is_main):
    """print() on the main rank only (flushed: the output is read live)."""
    def say(*args):
        if is_main:
            print(*args, flush=True)
    return say


def record_validation(log, metrics, say, step, losses):
    """The validation loss of `step` (the mean over the held-out batches): logged, recorded, returned."""
    v = float(np.mean(losses))
    log["val"].append({"step": step, "val_loss": v})
    metrics.write({"type": "val", "step": step, "val_loss": v})
    say(f"eval: step {step} val_loss {v:.4f}")
    return v


def run_steps(a, device, world, metrics, say, next_batch, train_step, evaluate, *, after_step=None,
              step_fields=None):
    """Steps until --steps, or until --time-limit would be passed by one more (1.5 median steps;
    rank 0 decides and every rank follows). Each step: lr = lr_at(step), (x, y) = next_batch(),
    (loss, grad_norm) = train_step(step, x, y, lr, last), timed to the device's completion; a
    non-finite loss is recorded and stops the run; after_step(step, loss, last) runs next; every
    --log-every steps a step record (plus step_fields()), every --eval-every a validation.
    Returns final_step, train_seconds, final_train_loss and median_step_s."""
    t0, step_times, step, loss_value = time.time(), [], 0, float("nan")
    while True:
        per_step = float(np.median(step_times[-20:])) if step_times else 0.0
        last = step == a.steps - 1 or (a.time_limit > 0 and time.time() - t0 + 1.5 * per_step >= a.time_limit)
        if world > 1 and a.time_limit > 0:  # rank 0 decides, every rank follows
            flag = torch.tensor([float(last)], device=device)
            dist.broadcast(flag, 0)
            last = bool(flag.item() > 0.5)
        ts = time.time()
        lr = lr_at(step, a)
        x, y = next_batch()
        loss_value, gnorm = train_step(step, x, y, lr, last)
        if device.type == "cuda":
            torch.cuda.synchronize()
        step_times.append(time.time() - ts)
        if not math.isfinite(loss_value):
            metrics.write({"type": "step", "step": step, "loss": loss_value})
            raise RuntimeError(f"loss is {loss_value} at step {step}")
        if after_step is not None:
            after_step(step, loss_value, last)
        if step % a.log_every == 0 or last:
            tok_s = a.batch * a.seq / max(step_times[-1], 1e-9)
            metrics.write({"type": "step", "step": step, "loss": loss_value, "lr": lr, "grad_norm": gnorm,
                           "tokens": (step + 1) * a.batch * a.seq, "elapsed_s": round(time.time() - t0, 3),
                           "tokens_per_s": round(tok_s, 1), **(step_fields() if step_fields else {})})
            say(f"step {step:6d} loss {loss_value:.4f} lr {lr:.2e} gnorm {gnorm:.3f} {tok_s:,.0f} tok/s "
                f"t={time.time() - t0:.1f}s")
        if a.eval_every and step % a.eval_every == 0 and step > 0 and not last:
            evaluate(step)
        if last:
            break
        step += 1
    return {"final_step": step, "train_seconds": round(time.time() - t0, 3), "final_train_loss": loss_value,
            "median_step_s": float(np.median(step_times))}


def finish(metrics, world):
    """Closes the metrics; with a process group, every rank past its last collective, then the
    group's end (under gloo, a rank that destroys the group while a peer is still in one can
    leave that peer hanging)."""
    metrics.close()
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
