"""Training with compression in the loop: loss curves, the final validation loss against the
baseline of the same seed, and the error each TP collective delivered during training.

usage: python3 analysis/fig_training.py RESULTS_DIR OUT_DIR

Reads every training summary at the top of RESULTS_DIR (training_summary.json from
`python -m taco.train.sweep`, recognised by its "schema"). Writes, per summary (NAME = training, or
training_<file stem> when there are several):
  NAME.{png,pdf,json}  left: validation loss against training tokens, the median over seeds per
      variant with the band between the seeds' lowest and highest (the baseline "none" in black);
      middle: each variant's final validation loss against the baseline of the same seed, in %
      (one dot per seed, the bar at the mean, the whisker one standard deviation over seeds),
      with the grey band = the spread of the baseline's seeds and the dashed lines = the null
      pair (the same configuration run twice: the run-to-run floor); right: the relative L2 error of each compressed collective against the exact sum
      (median over layers, sampled during training) per site and direction, for the variant with
      the most samples of each family.
Skips (exit 0) when there is no summary; exits 2 with one line when one is malformed.
"""
from __future__ import annotations

import os
import sys

import numpy as np

import figkit
import results
import style


def _curves(runs):
    """{variant: (tokens, median, lo, hi)} of the validation curves over seeds."""
    out = {}
    for v in dict.fromkeys(r["variant"] for r in runs):
        curves = [np.array(r["val_curve"], dtype=float) for r in runs if r["variant"] == v and r["val_curve"]]
        if not curves:
            continue
        n = min(len(c) for c in curves)
        stack = np.stack([c[:n, 2] for c in curves])
        out[v] = (curves[0][:n, 1], np.median(stack, 0), stack.min(0), stack.max(0))
    return out


# The trainer's route options of a candidate name (taco.train.sweep: VARIANT@pp=V@dp=V@dpw=V@bwd=V).
ROUTE_NAMES = {"bwd": "TP bwd", "pp": "PP", "dp": "DP", "dpw": "DP weights", "subspace": "subspace"}
ROUTE_COLORS = ["#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def _is_routed(variant: str) -> bool:
    return any(f"@{k}=" in variant for k in ("pp", "dp", "dpw"))


def short_name(variant: str) -> str:
    """A per-site selection names its file by its stem ('config:dir/mix.json@bwd=V' -> 'per site
    mix@bwd=V'): the path is in the summary, and a tick has no room for it."""
    if not variant.startswith("config:"):
        return variant
    path, at, rest = variant[len("config:"):].partition("@")
    stem = os.path.splitext(os.path.basename(path))[0]
    return f"per site {stem}{at}{rest}"


def _tp_label(tp: str) -> str:
    """The TP route's line: a per-site selection names its sites itself."""
    tp = short_name(tp)
    return tp if tp.startswith("per site ") else f"TP {tp}"


def route_label(variant: str) -> str:
    """A tick label: plain names as they are; a candidate with route options one route per line,
    compressed routes only ('none@pp=tahquant' -> 'PP tahquant')."""
    variant = short_name(variant)
    if "@" not in variant:
        return variant
    tp, *opts = variant.split("@")
    lines = [] if tp == "none" else [_tp_label(tp)]
    for opt in opts:
        key, _, value = opt.partition("=")
        lines.append(f"{ROUTE_NAMES.get(key, key)} {value}")
    return "\n".join(lines)


def make_one(path: str, doc: dict, name: str,
             facts: results.VariantTable) -> figkit.FigureOut:
    runs, table = doc["runs"], doc["table"]
    for r in runs:
        for key in ("variant", "seed", "val_curve", "final_val_loss"):
            if key not in r:
                raise results.InputInvalid(f"{path}: a run lacks \"{key}\"")
    fig, axes = style.figure(style.FULL_WIDTH, 2.6, 1, 3)
    ax_loss, ax_diff, ax_err = axes[0]
    r0 = runs[0]
    cfg = r0.get("config", {})
    out = figkit.FigureOut(name=name, fig=fig, title="Training with compressed TP collectives", caption="",
                           inputs=[path])
    names = list(dict.fromkeys(r["variant"] for r in runs))
    # Multi-route candidates are combinations, not codecs: no codec colour of their own, so each
    # takes the next of a few distinct colours (hashed ones can come out as near twins).
    combos = iter(ROUTE_COLORS * (1 + len(names) // len(ROUTE_COLORS)))
    colors = {v: ((0, 0, 0) if v == "none" else next(combos) if _is_routed(v)
                  else style.variant_color(v, facts.get(v))) for v in names}
    for v, (tok, med, lo, hi) in _curves(runs).items():
        ax_loss.plot(tok, med, color=colors[v], lw=1.0 if v != "none" else 1.4, label=short_name(v))
        ax_loss.fill_between(tok, lo, hi, color=colors[v], alpha=0.18, lw=0)
        out.add_series(ax_loss, v, len(tok), seeds=sum(1 for r in runs if r["variant"] == v))
    ax_loss.set_title("val. loss (median, seed band)")
    ax_loss.set_xlabel("training tokens")
    ax_loss.set_ylabel("validation loss (nats per byte)")
    finals = [r["final_val_loss"] for r in runs]
    lo = min(finals)
    ax_loss.set_ylim(lo - 0.05 * abs(lo), min(max(finals) * 1.6, max(r["val_curve"][0][2] for r in runs if r["val_curve"])))

    band = doc.get("baseline_band_pct")
    rows = [t for t in table if t["variant"] != "none" and t.get("paired_diff_pct")]
    rows.sort(key=lambda t: (t["bytes_per_element"] or 0, t["variant"]))
    if band is not None:
        ax_diff.axhspan(-band, band, color="#bbbbbb", alpha=0.45, lw=0, zorder=0)
    null = doc.get("null_pair")
    if null:
        for y in (-abs(null["diff_pct"]), abs(null["diff_pct"])):
            ax_diff.axhline(y, color="black", lw=0.6, ls="--")
    ax_diff.axhline(0, color="black", lw=0.7)
    for i, t in enumerate(rows):
        d = np.array(t["paired_diff_pct"], dtype=float)
        std = t.get("std_diff_pct")
        ax_diff.bar(i, d.mean(), color=colors.get(t["variant"], "C0"), alpha=0.6, width=0.7,
                    yerr=std if std is not None else None, error_kw={"lw": 0.7, "capsize": 1.5})
        ax_diff.plot(np.full(len(d), i), d, "o", ms=3, color="black")
        out.add_series(ax_diff, t["variant"], len(d), mean_diff_pct=float(d.mean()), worst_diff_pct=float(d.max()),
                       std_diff_pct=std, bytes_per_element=t["bytes_per_element"])
    # A candidate that breaks training (+200%) would flatten the band and the near-lossless ones:
    # linear within a few percent, logarithmic beyond.
    if rows and max(abs(x) for t in rows for x in t["paired_diff_pct"]) > 20:
        ax_diff.set_yscale("symlog", linthresh=2.0, linscale=1.5)
    ax_diff.set_xticks(range(len(rows)))
    # bytes per element null: an unfinished run whose codec the summarizing machine could not size
    # 3D candidates (VARIANT@pp=V@dp=V...) get one line per route (upright when the lines are short);
    # plain names lean
    routed = any("@" in t["variant"] for t in rows)
    labels = [(route_label(t["variant"]) if "@" in t["variant"] or not routed
               else _tp_label(t["variant"])) + "\n" +
              (f"{t['bytes_per_element']:.2f} B" if t["bytes_per_element"] is not None else "? B")
              for t in rows]
    upright = routed and max((len(line) for lab in labels for line in lab.split("\n")), default=0) * len(rows) <= 60
    ax_diff.set_xticklabels(labels, rotation=0 if upright else (25 if routed else 60),
                            fontsize=4.0 if routed else 5.5, ha="center" if upright else "right")
    at = doc.get("compared_at", "final")
    ax_diff.set_title(f"vs same-seed baseline ({at})" if at != "final" else "final vs same-seed baseline")
    ax_diff.set_ylabel("difference (%)")

    # the errors: for each (site, direction), the median over runs of each sampled step, one
    # line per variant family with samples
    drew = 0
    variants = [v for v in dict.fromkeys(r["variant"] for r in runs) if v != "none"]
    for v in variants:
        per_site = {}
        for r in runs:
            if r["variant"] != v:
                continue
            for key, pts in r.get("errors", {}).items():
                for step, val in pts:
                    per_site.setdefault(key, {}).setdefault(step, []).append(val)
        for key, by_step in sorted(per_site.items()):
            steps = sorted(by_step)
            vals = [float(np.median(by_step[s])) for s in steps]
            if not steps or min(vals) <= 0:
                continue
            site, direction = key.split(".")
            ax_err.plot(steps, vals, color=colors[v], lw=0.8, ls="-" if direction == "fwd" else "--")
            out.add_series(ax_err, f"{v} {key}", len(steps), variant=v, site=site, direction=direction,
                           median_rel_l2=float(np.median(vals)))
            drew += 1
    if drew:
        ax_err.set_yscale("log")
    else:  # e.g. the 3D trainer's runs: no per-site error samples
        ax_err.text(0.5, 0.5, "no collective errors\nsampled in these runs", transform=ax_err.transAxes,
                    ha="center", va="center", fontsize=6, color="0.4")
    ax_err.set_title("collective error during training")
    ax_err.set_xlabel("step")
    ax_err.set_ylabel("rel. L2 error (-- bwd)")
    handles, labels = ax_loss.get_legend_handles_labels()
    style.legend_below(fig, handles, labels)
    tok = r0["tokens"]
    out.caption = (f"{len(runs)} runs of {r0.get('params') or '?'}-parameter {cfg.get('arch', '?')} models, "
                   f"TP {r0.get('tp')} ({r0.get('mode')}), {tok:,} tokens each; baseline seed band "
                   f"{'%.3f%%' % band if band is not None else 'n/a'}; null pair "
                   f"{'%+.3f%%' % null['diff_pct'] if null else 'not run'}; bytes per element on the TP wire "
                   f"(of the full-width tensors) under the variant names. From {path}.")
    out.extra = {"baseline_band_pct": band, "null_pair": null,
                 "fewest_bytes_within_1pct": doc.get("fewest_bytes_within_1pct"),
                 "fewest_bytes_meeting_goal": doc.get("fewest_bytes_meeting_goal")}
    return out


def make(rd: results.ResultsDir) -> list[figkit.FigureOut]:
    runs = rd.training_runs()
    facts = rd.variants()
    return figkit.per_run(runs, "training",
                          lambda path, doc, name: make_one(path, doc, name, facts))


if __name__ == "__main__":
    sys.exit(figkit.main(make, __doc__))
