"""Training runs with compression in the loop, paired by seed, and their summary.

    python -m taco.train.sweep --out runs --variants none,taco,fp8-g128 --seeds 1,2,3 \\
        --baseline-seeds 1,2,3 --null-pair --parallel 4 -- --tp-sim 4 --device cuda --steps 2000 ...
    python -m taco.train.sweep --summarize runs          # the summary again, from the runs on disk

A candidate is a codec, VARIANT (or config:PATH, a codec per site and direction from a
selection.json: `--config PATH`), with another codec on the backward direction, VARIANT@bwd=V2
(`--compress-bwd V2`), with codecs on the 3D routes, VARIANT@pp=V3@dp=V4@dpw=V5 (`--compress-pp`,
`--compress-dp`, `--compress-dp-weights`; the trainer args then name --pp-sim/--dp-sim or --pp/--dp,
and every candidate shares that layout), and/or on a subspace-confined model, VARIANT@subspace=K
(`--compress VARIANT --subspace K`; none@subspace=K sends the K coordinates in plain bf16). Each
run is `python -m taco.train <trainer args> --compress V [--compress-bwd V2] [--subspace K] --seed S --out
OUT/<candidate>/seed<S>` (candidate "none" = the uncompressed baseline), at most --parallel at a
time (several small runs share one GPU better than one). `--null-pair` runs the baseline's first
seed a second time (OUT/none/seed<S>-repeat): the run-to-run floor of the machine. Then
OUT/training_summary.json and a table:

`--summarize DIR --at-step N` compares the validation loss at step N instead of the final one, so
runs cut short (a time limit) are compared where all of them got to.

  band       the spread of the baseline's final validation loss over its seeds (max - min, in % of
             the mean): the noise a single run cannot beat
  null pair  the same configuration twice (--null-pair), in %: the floor below which no
             difference means anything
  diff       each compressed run against the baseline of the same seed (same initial weights,
             same data order), in % of the baseline's final validation loss; mean, standard
             deviation over seeds (n - 1) and worst
  verdict    "within noise" when the mean paired diff is within one standard deviation of 0 or
             within the null pair; near-lossless (worst <= +0.5%) or within +1% on every seed;
             the goal (3+ seeds, mean <= +1%, no seed above +1.5%)
  bytes/el   wire bytes per element of the full-width TP tensors (bf16 plain: 2; a subspace's
             K coordinates count against the hidden-wide rows they stand for); 3D runs: over
             every route together, and each route's below the table
  reach      the first validation step at which a candidate's loss is at or below its paired
             baseline's final validation loss (- when it never gets there); the summary also
             holds the reverse, baseline_equivalent_step: where the paired baseline's
             validation curve (linear between validations) reached the candidate's final loss

The summary also holds every run's validation curve, a thinned training-loss curve and the
sampled collective errors per site, which `taco report` draws (analysis/fig_training.py).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

from ..errors import TacoInputError, run_cli

SCHEMA = "taco.training_summary/1"


# VARIANT@key=value -> trainer flag; the trainer names its run with the keys in this order.
CANDIDATE_OPTIONS = {"bwd": "--compress-bwd", "pp": "--compress-pp", "dp": "--compress-dp",
                     "dpw": "--compress-dp-weights", "subspace": "--subspace"}


def candidate_args(candidate):
    """The trainer arguments of a candidate name: VARIANT[@bwd=V2][@pp=V3][@dp=V4][@dpw=V5][@subspace=K]
    -> [--compress V, --compress-bwd V2, --compress-pp V3, --compress-dp V4, --compress-dp-weights V5,
    --subspace K] (the trainer's run name, so runs and candidates match); VARIANT config:PATH gives
    --config PATH instead of --compress."""
    variant, *opts = candidate.split("@")
    if not variant:
        raise TacoInputError(f"candidate {candidate!r}: no codec before '@' (use none@... for plain)")
    if variant.startswith("config:"):  # a codec per site and direction: a selection.json
        if not variant[len("config:"):]:
            raise TacoInputError(f"candidate {candidate!r}: config: needs a selection.json path")
        args = ["--config", variant[len("config:"):]]
    else:
        args = ["--compress", variant]
    for opt in opts:
        key, eq, value = opt.partition("=")
        if key not in CANDIDATE_OPTIONS or not eq or not value:
            raise TacoInputError(f"candidate {candidate!r}: unknown option {opt!r} "
                                 f"(VARIANT@{'|'.join(k + '=N' for k in CANDIDATE_OPTIONS)})")
        args += [CANDIDATE_OPTIONS[key], value]
    return args


def run_dir(out, variant, seed, repeat=False):
    safe = variant.replace(":", "_").replace("/", "_").replace("=", "-")
    return os.path.join(out, safe, f"seed{seed}" + ("-repeat" if repeat else ""))


def launch(out, jobs, trainer_args, parallel):
    """Runs the jobs [(candidate, seed, repeat)], at most `parallel` at once; returns
    {(candidate, seed, repeat): exit code}."""
    pending, running, done = list(jobs), [], {}
    while pending or running:
        while pending and len(running) < parallel:
            variant, seed, repeat = job = pending.pop(0)
            d = run_dir(out, variant, seed, repeat)
            os.makedirs(d, exist_ok=True)
            cmd = [sys.executable, "-m", "taco.train", *trainer_args, *candidate_args(variant), "--seed", str(seed),
                   "--out", d]
            with open(os.path.join(d, "run.json"), "w") as f:  # what ran, even if it never finishes
                json.dump({"variant": variant, "seed": seed, "repeat": repeat, "command": cmd}, f)
            log = open(os.path.join(d, "train.out"), "w")
            running.append((job, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log, time.time()))
            print(f"sweep: started {variant} seed {seed}" + (" (repeat)" if repeat else ""), flush=True)
        time.sleep(0.5)
        for item in list(running):
            key, proc, log, t0 = item
            if proc.poll() is not None:
                log.close()
                running.remove(item)
                done[key] = proc.returncode
                print(f"sweep: {key[0]} seed {key[1]} exit {proc.returncode} after {time.time() - t0:.0f}s", flush=True)
    return done


def load_run(d):
    """(train_log or None for an unfinished run, metrics records, run.json or None)."""
    log = None
    if os.path.isfile(os.path.join(d, "train_log.json")):
        with open(os.path.join(d, "train_log.json")) as f:
            log = json.load(f)
    recs = []
    if os.path.isfile(os.path.join(d, "metrics.jsonl")):
        with open(os.path.join(d, "metrics.jsonl")) as f:
            for line in f:
                if line.strip():
                    recs.append(json.loads(line))
    meta = None
    if os.path.isfile(os.path.join(d, "run.json")):
        with open(os.path.join(d, "run.json")) as f:
            meta = json.load(f)
    return log, recs, meta


def _identity(d, log, meta):
    """(variant, seed, repeat) of a run: its log, its run.json, else its directory names."""
    parent, leaf = os.path.split(os.path.normpath(d))
    repeat = leaf.endswith("-repeat")
    if log is not None:
        return log["variant"], log["seed"], repeat
    if meta is not None:
        return meta["variant"], meta["seed"], repeat
    return os.path.basename(parent), int(leaf.replace("seed", "").replace("-repeat", "")), repeat


def summarize(out, at_step=None):
    """The runs under `out`, compared on their final validation loss, or (at_step) on the
    validation at that step, which unfinished runs can have too."""
    runs = []
    for variant_dir in sorted(os.listdir(out)):
        vd = os.path.join(out, variant_dir)
        if not os.path.isdir(vd):
            continue
        for seed_dir in sorted(os.listdir(vd)):
            d = os.path.join(vd, seed_dir)
            if not os.path.isdir(d):
                continue
            log, recs, meta = load_run(d)
            vals = [r for r in recs if r["type"] == "val"]
            if at_step is None and log is None:
                continue
            if at_step is not None:
                hit = [v for v in vals if v["step"] == at_step]
                if not hit:
                    continue
                final = hit[0]["val_loss"]
                vals = [v for v in vals if v["step"] <= at_step]
            else:
                final = log["final_val_loss"]
            variant, seed, repeat = _identity(d, log, meta)
            steps = [r for r in recs if r["type"] == "step"]
            tokens_per_step = steps[0]["tokens"] // (steps[0]["step"] + 1) if steps else 0
            if at_step is not None:
                steps = [r for r in steps if r["step"] <= at_step]
            thin = max(1, len(steps) // 200)
            errors = {}
            for r in recs:
                if r["type"] == "error" and (at_step is None or r["step"] <= at_step):
                    errors.setdefault(f"{r['site']}.{r['direction']}", {}).setdefault(r["step"], []).append(r["rel_l2"])
            traffic = (log or {}).get("traffic", [])
            el = sum(t["elements"] for t in traffic)
            runs.append({
                "variant": variant, "seed": seed, "repeat": repeat, "dir": os.path.relpath(d, out),
                "finished": log is not None,
                "final_val_loss": final, "final_step": at_step if at_step is not None else log["final_step"],
                "tokens": (at_step + 1) * tokens_per_step if at_step is not None else log["tokens"],
                "params": (log or {}).get("params"), "tp": (log or {}).get("tp"), "mode": (log or {}).get("mode"),
                "median_step_s": (log or {}).get("median_step_s"), "wall_seconds": (log or {}).get("wall_seconds"),
                "route_bytes_per_element": {r: v["bytes_per_element"] for r, v in ((log or {}).get("routes") or {}).items()},
                "bytes_per_element": (sum(t["wire_bytes"] for t in traffic) / el) if el else
                next((r["wire_bytes_per_element"] for r in reversed(steps) if "wire_bytes_per_element" in r), None),
                "val_curve": [[v["step"], (v["step"] + 1) * tokens_per_step, v["val_loss"]] for v in vals],
                "train_curve": [[r["step"], r["tokens"], r["loss"]] for r in steps[::thin]],
                "errors": {k: [[st, sorted(v)[len(v) // 2]] for st, v in sorted(by_step.items())]
                           for k, by_step in sorted(errors.items())},
                "config": (log or {}).get("config", {}), "environment": (log or {}).get("environment"),
                "command": (log or {}).get("command") or (meta or {}).get("command"),
            })
    if not runs:
        if at_step is None:
            last = last_common_val_step(out)
            hint = f"; every run has a validation at step {last}: try --at-step {last}" if last else ""
            raise TacoInputError(f"{out}: no finished runs (train_log.json) under it{hint}")
        raise TacoInputError(f"{out}: no run has a validation at step {at_step}")
    base_runs = {r["seed"]: r for r in runs if r["variant"] == "none" and not r["repeat"]}
    base = {seed: r["final_val_loss"] for seed, r in base_runs.items()}
    band = None
    if len(base) >= 2:
        vals = list(base.values())
        band = (max(vals) - min(vals)) / (sum(vals) / len(vals)) * 100
    null_pair = None
    for r in runs:
        if r["repeat"] and r["variant"] == "none" and r["seed"] in base:
            null_pair = {"seed": r["seed"], "diff_pct": (r["final_val_loss"] - base[r["seed"]]) / base[r["seed"]] * 100}
    floor = abs(null_pair["diff_pct"]) if null_pair else 0.0
    table = []
    for variant in sorted({r["variant"] for r in runs}, key=lambda v: (v != "none", v)):
        rs = sorted((r for r in runs if r["variant"] == variant and not r["repeat"]), key=lambda r: r["seed"])
        diffs = [(r["final_val_loss"] - base[r["seed"]]) / base[r["seed"]] * 100 for r in rs if r["seed"] in base]
        row = {"variant": variant, "seeds": [r["seed"] for r in rs],
               "final_val_loss": [r["final_val_loss"] for r in rs],
               "bytes_per_element": rs[0]["bytes_per_element"] if rs[0]["bytes_per_element"] is not None
               else wire_bytes_per_element(variant, rs[0]),
               "paired_diff_pct": diffs if variant != "none" else None,
               "route_bytes_per_element": rs[0]["route_bytes_per_element"]}
        if variant != "none" and diffs:
            worst = max(diffs)
            mean = sum(diffs) / len(diffs)
            std = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)) if len(diffs) >= 2 else None
            row.update(mean_diff_pct=mean, std_diff_pct=std, worst_diff_pct=worst,
                       within_band=band is not None and all(abs(d) <= band for d in diffs),
                       within_noise=len(diffs) >= 2 and (abs(mean) <= std or abs(mean) <= floor),
                       near_lossless=len(diffs) >= 2 and worst <= 0.5, within_1pct=len(diffs) >= 2 and worst <= 1.0,
                       meets_goal=len(diffs) >= 3 and mean <= 1.0 and worst <= 1.5,
                       reach_step=[_reach_step(r, base[r["seed"]]) for r in rs if r["seed"] in base],
                       baseline_equivalent_step=[_reach_step(base_runs[r["seed"]], r["final_val_loss"], True)
                                                 for r in rs if r["seed"] in base])
        table.append(row)
    def fewest(flag):
        inside = [t for t in table if t.get(flag) and t["bytes_per_element"] is not None]
        best = min(inside, key=lambda t: t["bytes_per_element"]) if inside else None
        return best and {"variant": best["variant"], "bytes_per_element": best["bytes_per_element"]}

    return {"schema": SCHEMA, "compared_at": "final" if at_step is None else f"step {at_step}",
            "baseline_band_pct": band, "baseline_seeds": sorted(base), "null_pair": null_pair,
            "fewest_bytes_within_1pct": fewest("within_1pct"), "fewest_bytes_meeting_goal": fewest("meets_goal"),
            "table": table, "runs": runs}


def _reach_step(run, target, interpolate=False):
    """The first validation step at which the run's loss is at or below target, or None; with
    `interpolate`, linear between the validations around it (a fractional step)."""
    prev = None
    for step, _, loss in run["val_curve"]:
        if loss <= target:
            if interpolate and prev is not None and prev[1] > loss:
                return prev[0] + (step - prev[0]) * (prev[1] - target) / (prev[1] - loss)
            return step
        prev = (step, loss)
    return None


def last_common_val_step(out):
    """The last validation step that every run under `out` reached (finished or not), or None."""
    reached = []
    for variant_dir in sorted(os.listdir(out)):
        vd = os.path.join(out, variant_dir)
        for seed_dir in sorted(os.listdir(vd)) if os.path.isdir(vd) else []:
            d = os.path.join(vd, seed_dir)
            if os.path.isdir(d):
                reached.append({r["step"] for r in load_run(d)[1] if r["type"] == "val"})
    common = set.intersection(*reached) if reached else set()
    return max(common) if common else None


def _hidden_of(run):
    """The model's hidden width: the train log's config, else the run's command (--hidden)."""
    hidden = (run.get("config") or {}).get("hidden")
    cmd = run.get("command") or []
    if not hidden and "--hidden" in cmd[:-1]:
        hidden = int(cmd[cmd.index("--hidden") + 1])
    return hidden


def wire_bytes_per_element(variant, run):
    """The codec's wire bytes per element for an unfinished run (no traffic counters): the wire of
    one [1, hidden x 1024] block, none: bf16's 2; a subspace's K coordinates stand for hidden."""
    codec, _, sub = variant.partition("@subspace=")
    ratio = 1.0
    if sub:
        hidden = _hidden_of(run)
        if not hidden:
            return None
        ratio = int(sub) / hidden
    if codec == "none":
        return 2.0 * ratio
    try:
        import taco.codec as tc
        n = 1 << 20
        return tc.wire_bytes(codec, (1, n)) / n * ratio
    except (ImportError, ValueError):
        return None


def print_table(s):
    band = s["baseline_band_pct"]
    print(f"compared at: {s.get('compared_at', 'final')} validation loss")
    print(f"baseline seeds {s['baseline_seeds']}: band {band:.3f}%" if band is not None else
          "baseline: fewer than 2 seeds, no band")
    null = s.get("null_pair")
    print(f"null pair (baseline seed {null['seed']} twice): {null['diff_pct']:+.3f}%" if null else
          "null pair: not run (--null-pair)")
    w = max([26] + [len(t["variant"]) + 1 for t in s["table"]])  # long 3D candidate names stay aligned
    print(f"{'candidate':<{w}} {'bytes/el':>8} {'seeds':>5} {'final val loss':>22} {'mean diff':>10} {'std':>7} "
          f"{'worst':>8} {'reach':>11} {'base-eq':>14}  verdict")
    for t in s["table"]:
        vals = " ".join(f"{v:.4f}" for v in t["final_val_loss"])
        bpe = f"{t['bytes_per_element']:.4f}" if t["bytes_per_element"] is not None else "-"
        if t["variant"] == "none":
            print(f"{'none (baseline)':<{w}} {bpe:>8} {len(t['seeds']):>5} {vals:>22}")
            continue
        if "mean_diff_pct" not in t:
            print(f"{t['variant']:<{w}} {bpe:>8} {len(t['seeds']):>5} {vals:>22}   (no paired baseline)")
            continue
        std = f"{t['std_diff_pct']:.3f}" if t["std_diff_pct"] is not None else "-"
        reach = ",".join("-" if r is None else str(r) for r in t["reach_step"])
        beq = ",".join("-" if r is None else f"{r:.0f}" for r in t["baseline_equivalent_step"])
        verdict = "within noise" if t["within_noise"] else f"{t['mean_diff_pct']:+.2f}% on average"
        verdict += "; near-lossless (<= +0.5%)" if t["near_lossless"] else (
            "; within +1%" if t["within_1pct"] else "")
        verdict += "; meets the goal" if t["meets_goal"] else ""
        print(f"{t['variant']:<{w}} {bpe:>8} {len(t['seeds']):>5} {vals:>22} {t['mean_diff_pct']:>+9.3f}% {std:>7} "
              f"{t['worst_diff_pct']:>+7.3f}% {reach:>11} {beq:>14}  {verdict}")
    routed = [t for t in s["table"] if len(t.get("route_bytes_per_element") or {}) > 1]
    if routed:
        print("wire bytes per element by route (tp, pp, dp: one replica's sends):")
        for t in routed:
            print(f"  {t['variant']:<{w - 2}} " + "  ".join(f"{r} {b:.4f}" for r, b in
                                                       sorted(t["route_bytes_per_element"].items())))
    f = s["fewest_bytes_within_1pct"]
    if f:
        print(f"fewest wire bytes per element within +1% on every seed: {f['variant']} ({f['bytes_per_element']:.4f})")
    f = s.get("fewest_bytes_meeting_goal")
    if f:
        print(f"fewest wire bytes per element with mean <= +1% and no seed above +1.5% (3+ seeds): "
              f"{f['variant']} ({f['bytes_per_element']:.4f})")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    trainer = []
    if "--" in argv:
        i = argv.index("--")
        argv, trainer = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(prog="python -m taco.train.sweep", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--out", help="directory of the runs")
    p.add_argument("--variants", default="none,taco")
    p.add_argument("--seeds", default="1,2", help="seeds of the compressed runs")
    p.add_argument("--baseline-seeds", default="1,2,3", help="seeds of the baseline (variant none)")
    p.add_argument("--null-pair", action="store_true",
                   help="run the first baseline seed twice: the run-to-run floor")
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("--summarize", metavar="DIR", help="only summarize the runs in DIR")
    p.add_argument("--at-step", type=int, default=None,
                   help="with --summarize: compare the validation at this step (unfinished runs too)")
    a = p.parse_args(argv)
    if a.summarize:
        s = summarize(a.summarize, a.at_step)
        print_table(s)
        write_summary(a.summarize, s)
        return 0
    if not a.out:
        raise TacoInputError("--out is required (or --summarize DIR)")
    for bad in ("--out", "--seed", "--compress", "--compress-bwd", "--config", "--subspace"):
        if bad in trainer:
            raise TacoInputError(f"the sweep sets {bad} of each run; leave it out of the trainer arguments")
    try:
        seeds = [int(x) for x in a.seeds.split(",") if x]
        bseeds = [int(x) for x in a.baseline_seeds.split(",") if x]
    except ValueError:
        raise TacoInputError("--seeds and --baseline-seeds are comma-separated integers") from None
    if a.parallel < 1:
        raise TacoInputError("--parallel must be >= 1")
    variants = [v for v in a.variants.split(",") if v]
    for v in variants:
        candidate_args(v)  # a bad candidate: one line before anything runs
    jobs = [(v, s, False) for v in variants for s in (bseeds if v == "none" else seeds)]
    if a.null_pair:
        if "none" not in variants or not bseeds:
            raise TacoInputError("--null-pair repeats a baseline seed: give the variant none and --baseline-seeds")
        # beside the baseline, not last: a set cut short by a time limit still has its floor
        jobs.insert(jobs.index(("none", bseeds[-1], False)) + 1, ("none", bseeds[0], True))
    os.makedirs(a.out, exist_ok=True)
    done = launch(a.out, jobs, trainer, a.parallel)
    failed = [k for k, rc in done.items() if rc != 0]
    s = summarize(a.out)
    print_table(s)
    write_summary(a.out, s)
    if failed:
        print(f"sweep: {len(failed)} run(s) failed: {failed} (see their train.out)", file=sys.stderr)
        return 1
    return 0


def write_summary(out, s):
    path = os.path.join(out, "training_summary.json")
    with open(path + ".tmp", "w") as f:
        json.dump(s, f, indent=1, allow_nan=False, default=lambda o: None if isinstance(o, float) and math.isnan(o) else o)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(run_cli(main))
