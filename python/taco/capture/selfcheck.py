"""Checks the capture end to end on a tiny model, on the CPU, and writes everything it compared.

One fixed batch, one forward and backward (step 0), TP=N, with and without sequence parallel:
  OUT/reference.npz            the unsplit model's tensors at each TP layer (float32):
                               row.<layer>.<site>.out      output without bias   [tokens, h]
                               row.<layer>.<site>.gout     output gradient       [tokens, h]
                               col.<layer>.<site>.in       input                 [tokens, h]
                               col.<layer>.<site>.gin      input gradient        [tokens, h]
  OUT/emulate.h5, emulate_sp.h5            single-process emulation of the unsplit model
  OUT/sim.h5, sim_sp.h5                    the TP model with N simulated ranks (taco.tp)
  OUT/dist.rank<r>.h5, dist_sp.rank<r>.h5  N processes, torch.distributed gloo (taco.tp)
Tokens are in [seq, batch] order, as the traces store them.

Then it prints, per file, the largest relative L2 error of (a) the sum over ranks of each
captured partial against the unsplit tensor, (b) the concatenated sequence shards against the
unsplit tensor (SP all-gather), (c) dist against emulation and against the simulated ranks; and
exits 1 if one exceeds --tol.

  python -m taco.capture.selfcheck --out /tmp/selfcheck
"""
import argparse
import glob
import os
import sys
import tempfile

import numpy as np

from ..errors import CaptureInputError, run_cli
from .trace_writer import read_trace


def _cfg(a):
    from ..train.model import ModelConfig
    return ModelConfig(arch=a.arch, seq=a.seq, layers=a.layers, hidden=a.hidden, heads=a.heads,
                       kv_heads=a.kv_heads, compute_dtype="float32")


def _batch(a):
    rng = np.random.default_rng(a.seed)
    win = rng.integers(0, 256, size=(a.batch, a.seq + 1), dtype=np.int64)
    return win[:, :-1], win[:, 1:]


def _flat(t):
    return t.detach().reshape(-1, t.shape[-1]).float().numpy().copy()


def run_reference_and_emulation(a):
    import re

    import torch

    from ..train.model import Transformer, emulate_rules
    from .emulate import Emulator, Rule
    from .recorder import Recorder, write_records

    cfg = _cfg(a)
    model = Transformer(cfg, seed=a.seed)
    x, y = (torch.from_numpy(v) for v in _batch(a))
    ref = {}
    hooks = []
    for name, mod in model.named_modules():
        for pattern, kind, site, _ in emulate_rules(cfg):
            m = re.search(pattern, name)
            if not m:
                continue
            layer = int(m.group("layer"))

            def fwd(module, inputs, output, kind=kind, site=site, layer=layer):
                xin = inputs[0]
                if kind == "row":
                    out = output - module.bias if module.bias is not None else output
                    ref[f"row.{layer}.{site}.out"] = _flat(out)
                    output.register_hook(lambda g: ref.__setitem__(f"row.{layer}.{site}.gout", _flat(g)))
                else:
                    ref[f"col.{layer}.{site}.in"] = _flat(xin)
                    xin.register_hook(lambda g: ref.__setitem__(f"col.{layer}.{site}.gin", _flat(g)))
            hooks.append(mod.register_forward_hook(fwd))
    _, loss = model(x, y)
    loss.backward()
    for h in hooks:
        h.remove()
    np.savez(os.path.join(a.out, "reference.npz"), **ref)

    rules = [Rule(*r) for r in emulate_rules(cfg)]
    for sp, fname in ((False, "emulate.h5"), (True, "emulate_sp.h5")):
        model.zero_grad(set_to_none=True)
        rec = Recorder("selfcheck", extra={"mode": "emulate"})
        emu = Emulator(model, rules, a.tp, rec, sequence_parallel=sp, seq_dim=0)
        rec.start(0)
        _, loss = model(x, y)
        loss.backward()
        rec.stop()
        emu.detach()
        write_records(os.path.join(a.out, fname), rec.take(), provenance={"generator": "taco.capture.selfcheck"})
    return float(loss)


def tp_pass(a, tp, sp, path):
    """One forward and backward of the TP model on the fixed batch, its collectives captured."""
    import torch

    from ..tp import Compression
    from ..train.model import Transformer
    from .recorder import Recorder, write_records

    rec = Recorder("selfcheck", extra={"mode": "sim" if tp.simulated_ranks else "dist"})
    tp.compression = Compression(None)
    tp.compression.recorder = rec
    model = Transformer(_cfg(a), tp, sequence_parallel=sp, seed=a.seed)
    x, y = (torch.from_numpy(v) for v in _batch(a))
    rec.start(0)
    _, loss = model(x, y)
    loss.backward()
    rec.stop()
    write_records(path, rec.take(), provenance={"generator": "taco.capture.selfcheck"})


def run_simulated(a):
    from ..tp import TP
    for sp, fname in ((False, "sim.h5"), (True, "sim_sp.h5")):
        tp_pass(a, TP.simulated(a.tp), sp, os.path.join(a.out, fname))


def dist_worker(rank, a, init_file):
    import torch.distributed as dist

    from ..tp import TP

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=a.tp)
    for sp, prefix in ((False, "dist"), (True, "dist_sp")):
        tp_pass(a, TP.process(None), sp, os.path.join(a.out, f"{prefix}.rank{rank}.h5"))
    dist.barrier()
    dist.destroy_process_group()


def rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def compare(out_dir, tp_size):
    """Returns {check name: worst relative L2 error} over everything the run wrote."""
    ref = dict(np.load(os.path.join(out_dir, "reference.npz")))
    worst = {}

    def note(key, value):
        worst[key] = max(worst.get(key, 0.0), value)

    def load(pattern):
        recs = {}
        for f in sorted(glob.glob(os.path.join(out_dir, pattern))):
            for attrs, x in read_trace(f):
                recs[attrs["name"]] = (attrs, x)
        return recs

    for label, pattern in (("emulate", "emulate.h5"), ("emulate_sp", "emulate_sp.h5"), ("sim", "sim.h5"),
                           ("sim_sp", "sim_sp.h5"), ("dist", "dist.rank*.h5"), ("dist_sp", "dist_sp.rank*.h5")):
        recs = load(pattern)
        if not recs:
            continue
        groups = {}
        for attrs, x in recs.values():
            k = (int(attrs["layer"]), attrs["site"], attrs["direction"], attrs["collective"])
            groups.setdefault(k, {})[int(attrs["tp_rank"])] = x
        for (layer, site, direction, coll), by_rank in groups.items():
            if sorted(by_rank) != list(range(tp_size)):
                raise AssertionError(f"{label}: {layer}/{site}/{direction}/{coll} has ranks {sorted(by_rank)}")
            parts = [by_rank[r] for r in range(tp_size)]
            if coll == "all_gather":
                whole = np.concatenate(parts, axis=0)
                key = f"col.{layer}.{site}.in" if direction == "fwd" else f"row.{layer}.{site}.gout"
                note(f"{label}: all_gather shards vs unsplit", rel(whole, ref[key]))
            else:
                total = np.sum(parts, axis=0, dtype=np.float64).astype(np.float32)
                key = f"row.{layer}.{site}.out" if direction == "fwd" else f"col.{layer}.{site}.gin"
                note(f"{label}: sum of partials vs unsplit", rel(total, ref[key]))
    for d_label, e_label in (("dist.rank*.h5", "emulate.h5"), ("dist_sp.rank*.h5", "emulate_sp.h5"),
                             ("dist.rank*.h5", "sim.h5"), ("dist_sp.rank*.h5", "sim_sp.h5")):
        d, e = load(d_label), load(e_label)
        if not d:
            continue
        if sorted(d) != sorted(e):
            raise AssertionError(f"{d_label} and {e_label} hold different tensor names")
        for name in d:
            note(f"{d_label.split('.')[0]} vs {e_label.split('.')[0]}", rel(d[name][1], e[name][1]))
    return worst


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m taco.capture.selfcheck", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--arch", choices=("llama", "gpt2"), default="gpt2")
    p.add_argument("--kv-heads", type=int, default=0)
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=8)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip-dist", action="store_true", help="emulation only (no torch.distributed run)")
    p.add_argument("--tol", type=float, default=1e-5, help="largest relative L2 error that passes")
    a = p.parse_args(argv)
    if not os.path.isdir(a.out):
        raise CaptureInputError(f"--out {a.out} is not a directory")
    if a.tp < 1 or a.heads % a.tp or a.seq % a.tp or a.hidden % a.heads:
        raise CaptureInputError("--tp must divide --heads and --seq, and --heads must divide --hidden")
    try:
        _cfg(a).check_tp(a.tp)
    except ValueError as ex:
        raise CaptureInputError(str(ex)) from None
    import torch.multiprocessing as mp

    run_reference_and_emulation(a)
    run_simulated(a)
    if not a.skip_dist:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        with tempfile.TemporaryDirectory(prefix="taco_selfcheck_") as tmp:
            mp.spawn(dist_worker, args=(a, os.path.join(tmp, "store")), nprocs=a.tp, join=True)
    worst = compare(a.out, a.tp)
    bad = 0
    for k, v in sorted(worst.items()):
        ok = v <= a.tol
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {k}: worst relative L2 error {v:.3e}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
