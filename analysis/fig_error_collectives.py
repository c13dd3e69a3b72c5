"""Error of compressed collectives against the number of requantizations and the TP degree.

usage: python3 analysis/fig_error_collectives.py RESULTS_DIR OUT_DIR

Reads RESULTS_DIR/collectives.csv (taco study): simulated compressed collectives compared
with the exact fp32 result. Writes:
  error_collectives.{png,pdf,json}  two panels sharing the error axis:
    (a) median relative L2 error against the number of times an element is quantized on its
        way (one-shot 1, two-shot 2, ring N-1+1), one line per variant, with a sqrt(q) guide
        (the growth expected when the requantization errors are independent);
    (b) median relative L2 error against the TP degree, one line per (variant, algorithm):
        colour = variant, marker = algorithm. Only when the study simulated two TP degrees
        or more (`--tp 2,4,8`); with one, panel (a) stands alone and the caption says so.
  Medians, as `taco study` prints them; a zero error (bf16 one-shot is exact) sits on the
  bottom edge as a downward triangle.
Skips (exit 0) when collectives.csv is absent; exits 2 with one line when it is malformed.
"""
from __future__ import annotations

import math
import sys

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

import figkit
import results
import style

ALG_LINESTYLE = {"one_shot": ":", "two_shot": "--", "ring": "-"}


def int_axis(ax, values, base=2):
    vals = sorted(set(values))
    ax.set_xscale("log", base=base)
    ax.xaxis.set_major_locator(FixedLocator(vals))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(vals[0] / 1.25, vals[-1] * 1.25)


def make(rd: results.ResultsDir) -> list[figkit.FigureOut]:
    t = rd.collectives()
    for col in ("quantizations", "tp_size"):
        v = t[col]
        if np.any(v < 1) or np.any(v != np.floor(v)):
            raise results.InputInvalid(f"{t.source}: column {col} must hold integers >= 1")
    t = t.where(np.isfinite(t["rel_l2"]))
    if len(t) == 0:
        raise results.InputMissing(f"{t.source} has no finite rel_l2 value")
    if np.any(t["rel_l2"] < 0):
        raise results.InputInvalid(f"{t.source}: negative rel_l2")
    variants = t.unique("variant")
    facts = rd.variants()
    colors = {v: style.variant_color(v, facts.get(v)) for v in variants}
    algorithms = t.unique("algorithm")
    degrees = sorted({int(n) for n in t["tp_size"].tolist()})
    with_n = len(degrees) > 1   # one TP degree leaves nothing to draw against N
    # Few variants: one column, panels stacked. Many: full width, side by side.
    wide = len(variants) > 6
    if not with_n:
        fig, axes = style.figure(style.FULL_WIDTH if wide else style.COLUMN_WIDTH, 2.8)
        axq, axn = axes[0][0], None
    elif wide:
        fig, axes = style.figure(style.FULL_WIDTH, 3.0, 1, 2, sharey=True)
        axq, axn = axes[0][0], axes[0][1]
    else:
        fig, axes = style.figure(style.COLUMN_WIDTH, 4.3, 2, 1, sharey=True)
        axq, axn = axes[0][0], axes[1][0]
    # Panel (b) holds one line per (variant, algorithm); with many, only the algorithms whose
    # quantization count grows with N are drawn (one-shot and two-shot are flat in N, and
    # panel (a) already has them).
    grows = [a for a in algorithms
             if len(set(t.where(t["algorithm"] == a)["quantizations"].tolist())) > 1]
    b_algorithms = algorithms
    if len(variants) * len(algorithms) > 12 and grows:
        b_algorithms = grows
    omitted = [a for a in algorithms if a not in b_algorithms]
    axq.set_title("(a) error against requantizations")
    if axn is not None:
        axn.set_title("(b) error against TP degree")
    out = figkit.FigureOut(name="error_collectives", fig=fig,
                           title="Collective error against requantizations and TP degree",
                           caption="", inputs=[rd.path + "/" + t.source])
    floor = style.zero_floor(t["rel_l2"].tolist())
    zeros = []   # (axes, x, colour) of exact medians, drawn on the floor

    def plot(ax, xs, meds, c, **kw):
        """A line through the positive medians; the zero ones as triangles on the floor."""
        pos = [(x, m) for x, m in zip(xs, meds) if m > 0]
        if pos:
            ax.plot([x for x, _ in pos], [m for _, m in pos], color=c, **kw)
        zeros.extend((ax, x, c) for x, m in zip(xs, meds) if m <= 0)

    ys_all = []
    for v in variants:
        sub = t.where(t["variant"] == v)
        qs = sorted(set(sub["quantizations"].tolist()))
        meds = [float(np.median(sub.where(sub["quantizations"] == q)["rel_l2"])) for q in qs]
        c = colors[v]
        plot(axq, qs, meds, c, marker="o", lw=1.1)
        out.add_series(axq, v, len(qs), quantizations=qs, rel_l2=meds)
        ys_all += meds
    # sqrt(q) guide through the smallest-q median of all variants pooled.
    qmin = float(np.min(t["quantizations"]))
    qmax = float(np.max(t["quantizations"]))
    base = float(np.median(t.where(t["quantizations"] == qmin)["rel_l2"]))
    if qmax > qmin and base > 0:
        qq = np.geomspace(qmin, qmax, 32)
        axq.plot(qq, base * np.sqrt(qq / qmin), color="#777777", ls="--", lw=0.8, zorder=1)
    int_axis(axq, t["quantizations"].tolist())
    axq.set_xlabel("quantizations per element q")
    axq.set_ylabel("median relative L2 error")
    for v in variants:
        for alg in b_algorithms if axn is not None else []:
            sub = t.where((t["variant"] == v) & (t["algorithm"] == alg))
            if len(sub) == 0:
                continue
            ns = sorted(set(sub["tp_size"].tolist()))
            meds = [float(np.median(sub.where(sub["tp_size"] == n)["rel_l2"])) for n in ns]
            plot(axn, ns, meds, colors[v], marker=style.algorithm_marker(alg),
                 ls=ALG_LINESTYLE.get(alg, "-."), lw=1.0, ms=3.5)
            out.add_series(axn, f"{v} / {alg}", len(ns), variant=v, algorithm=alg,
                           tp_size=ns, rel_l2=meds)
            ys_all += meds
    if axn is not None:
        int_axis(axn, t["tp_size"].tolist())
        axn.set_xlabel("TP degree N (ranks)")
        if not wide:
            axn.set_ylabel("median relative L2 error")
    pos = [y for y in ys_all if y > 0]
    if pos:
        axq.set_yscale("log")
        lo, hi = min(pos), max(pos)
        if hi / lo < 10:     # less than a decade: pad to show at least one labelled decade
            mid = math.sqrt(lo * hi)
            lo, hi = min(lo, mid / 3.3), max(hi, mid * 3.3)
        if zeros:
            lo = min(lo, floor * 1.3)
        axq.set_ylim(lo / 1.3, hi * 1.3)
        bottom = axq.get_ylim()[0]
        for ax, x, c in zeros:
            style.mark_zeros(ax, [x], bottom, [c])
    handles = [Line2D([], [], color=colors[v], lw=1.1) for v in variants]
    labels = list(variants)
    if axn is not None:
        handles += [Line2D([], [], color="#444444", marker=style.algorithm_marker(a),
                           ls=ALG_LINESTYLE.get(a, "-."), lw=1.0) for a in b_algorithms]
        labels += [a.replace("_", "-") for a in b_algorithms]
    handles.append(Line2D([], [], color="#777777", ls="--", lw=0.8))
    labels.append("∝ √q")
    style.legend_below(fig, handles, labels, ncol=6 if wide else 3)
    panel_b = (
        " (b) The same error against the TP degree, one line per variant (colour) and algorithm "
        "(marker)"
        + (f"; {', '.join(a.replace('_', '-') for a in omitted)} (flat in N) only in (a)" if omitted else "")
        + "." if axn is not None else
        f" The study simulated one TP degree (N = {degrees[0]}), so there is no panel against N "
        "(`taco study --tp 2,4,8` adds it).")
    out.caption = (
        "Error of simulated compressed collectives against the exact fp32 result (decompress, "
        "reduce, recompress at every hop). (a) Median relative L2 error against the number of "
        "quantizations each element goes through (one-shot 1, two-shot 2, ring N−1 plus one "
        "for the all-gather), one line per variant; the dashed guide grows as √q, the rate "
        "expected when successive quantization errors are independent." + panel_b
        + " Medians over layers, sites, directions and steps, as `taco study` prints them"
        + ("; ▼ on the bottom edge: zero error (exact)" if zeros else "")
        + f". Source: {t.source}.")
    out.extra["panel_b_algorithms"] = b_algorithms if axn is not None else []
    out.extra["tp_degrees"] = degrees
    return [out]


if __name__ == "__main__":
    sys.exit(figkit.main(make, __doc__))
