"""Compression error of every variant, per TP collective site, and error against wire bytes.

usage: python3 analysis/fig_error_variants.py RESULTS_DIR OUT_DIR

Reads RESULTS_DIR/results.csv (or the rows of results.json) from taco study and writes:
  error_variants.{png,pdf,json}  grouped bars: one group per (site, direction), one bar per
      variant; bar = median relative L2 error over the tensors of that site (layers, ranks,
      steps), whisker = min..max. Legend labels carry each variant's wire bytes per element.
  error_tradeoff.{png,pdf,json}  rate-distortion view: median relative L2 error against wire
      bytes per element, one point per variant, whisker = range of the per-site medians.
Skips (exit 0) when no results file exists; exits 2 with one line when it is malformed.
"""
from __future__ import annotations

import sys

import numpy as np
from matplotlib.patches import Patch
from matplotlib.lines import Line2D

import figkit
import results
import style


def bytes_label(b: float) -> str:
    """1.0625 -> '1.0625 B/elem', 1.03125 -> '1.0312 B/elem', 1.0000153 -> '1 B/elem': as the
    terminal prints bytes/elem (style.bytes_text)."""
    return f"{style.bytes_text(b)} B/elem"


def variant_bytes(t: results.Table) -> dict[str, float]:
    """Mean wire bytes per element of each variant over its tensors (the terminal's statistic)."""
    out = {}
    for (v,), sub in t.groupby("variant").items():
        b = results.finite(sub["bytes_per_elem"])
        if b.size == 0:
            raise results.InputInvalid(f"{t.source}: variant {v} has no bytes_per_elem")
        out[v] = float(np.mean(b))
    return out


def per_site_stats(t: results.Table):
    """{(site, direction): {variant: (median, min, max, n)}} over finite rel_l2 values."""
    stats: dict = {}
    for (site, direction, v), sub in t.groupby("site", "direction", "variant").items():
        r = results.finite(sub["rel_l2"])
        if r.size == 0:
            continue
        if np.any(r < 0):
            raise results.InputInvalid(f"{t.source}: negative rel_l2 for {v} at {site}")
        stats.setdefault((site, direction), {})[v] = (float(np.median(r)), float(r.min()),
                                                      float(r.max()), int(r.size))
    return stats


def make_bars(rd, t, variants, colors, nbytes, stats) -> figkit.FigureOut:
    pairs = sorted(stats, key=lambda p: style.site_key(*p))
    nv = len(variants)
    width = style.COLUMN_WIDTH if nv * len(pairs) <= 20 else style.FULL_WIDTH
    fig, axes = style.figure(width, 2.6 if width < 4 else 2.9)
    ax = axes[0][0]
    out = figkit.FigureOut(name="error_variants", fig=fig,
                           title="Relative L2 error per variant and site", caption="",
                           inputs=[rd.path + "/" + t.source])
    floor = style.zero_floor([s[k] for d in stats.values() for s in d.values() for k in (0, 1)])
    bar_w = 0.8 / nv
    zeros = 0
    for j, v in enumerate(variants):
        xs, hs, lo, hi, zx = [], [], [], [], []
        for i, p in enumerate(pairs):
            s = stats[p].get(v)
            if s is None:
                continue
            x = i - 0.4 + bar_w * (j + 0.5)
            med, mn, mx, _n = s
            if med == 0:  # exact: a marker on the floor, not a bar of height zero
                zx.append(x)
                continue
            xs.append(x)
            hs.append(med)
            lo.append(med - max(mn, floor))
            hi.append(mx - med)
        c = colors[v]
        if xs:
            ax.bar(xs, np.asarray(hs) - floor, bar_w * 0.92, bottom=floor, color=c,
                   edgecolor="none", label=v)
            ax.errorbar(xs, hs, yerr=[lo, hi], fmt="none", ecolor="#222222", elinewidth=0.5,
                        capsize=0)
        style.mark_zeros(ax, zx, floor, [c] * len(zx))
        zeros += len(zx)
        if not xs and not zx:
            continue
        out.add_series(ax, v, len(xs) + len(zx), bytes_per_elem=nbytes[v],
                       medians={style.site_label(*p): stats[p][v][0] for p in pairs
                                if v in stats[p]})
    ax.set_yscale("log")
    ax.set_ylim(bottom=floor)
    ax.set_xticks(range(len(pairs)))
    ax.set_xticklabels([f"{s}\n({d})" for s, d in pairs])
    ax.set_xlim(-0.5, len(pairs) - 0.5)
    ax.grid(axis="x", visible=False)
    ax.set_ylabel("median rel. L2 error ‖x−x̂‖/‖x‖")
    ax.set_xlabel("TP collective site (direction)")
    handles = [Patch(facecolor=colors[v]) for v in variants]
    labels = [f"{v} ({bytes_label(nbytes[v])})" for v in variants]
    style.legend_below(fig, handles, labels, ncol=3 if width < 4 else 4)
    out.caption = (
        "Relative L2 error ‖x−x̂‖₂/‖x‖₂ of each compression variant on the TP collective "
        "inputs, grouped by site and direction. Bars are the median over the tensors of a site "
        "(layers, ranks and steps), the statistic `taco study` prints and ranks by; whiskers "
        "span min to max. The legend gives each variant's mean wire bytes per element "
        "(payload plus scales; bf16 is 2), as the terminal prints them. Log scale"
        + (f"; ▼ on the bottom edge: zero error (exact), {zeros} site(s)" if zeros else "")
        + f". Source: {t.source}.")
    out.extra["zero_error"] = zeros
    return out


def make_tradeoff(rd, t, variants, colors, nbytes, stats) -> figkit.FigureOut:
    fig, axes = style.figure(style.COLUMN_WIDTH, 2.8)
    ax = axes[0][0]
    out = figkit.FigureOut(name="error_tradeoff", fig=fig,
                           title="Error against wire bytes per element", caption="",
                           inputs=[rd.path + "/" + t.source])
    handles, labels = [], []
    medians = {}
    for v in variants:
        allv = results.finite(t.where(t["variant"] == v)["rel_l2"])
        if allv.size:
            medians[v] = float(np.median(allv))
    floor = style.zero_floor(list(medians.values()))
    zeros = []
    for v, y in medians.items():
        meds = [stats[p][v][0] for p in stats if v in stats[p]]
        c = colors[v]
        if y <= 0:
            style.mark_zeros(ax, [nbytes[v]], floor, [c])
            zeros.append(v)
            handles.append(Line2D([], [], color=c, marker=style.ZERO_MARKER, ls="none", ms=4, mec="black",
                                  mew=0.4))
        else:
            lo, hi = min(meds), max(meds)
            ax.errorbar([nbytes[v]], [y], yerr=[[y - max(lo, floor)], [hi - y]], fmt="o",
                        color=c, ms=4, elinewidth=0.7, capsize=1.5)
            handles.append(Line2D([], [], color=c, marker="o", ls="none", ms=4))
        labels.append(v)
        out.add_series(ax, v, 1, bytes_per_elem=nbytes[v], rel_l2=y)
    if not handles:
        plt_close = fig
        import matplotlib.pyplot as plt
        plt.close(plt_close)
        return None
    ax.set_yscale("log")
    ax.set_ylim(bottom=floor)
    xs = [nbytes[v] for v in variants]
    span = max(xs) - min(xs)
    pad = max(span * 0.08, 0.02)
    ax.set_xlim(min(xs) - pad, max(xs) + pad)
    ax.set_xlabel("wire bytes per element (bf16 = 2)")
    ax.set_ylabel("median rel. L2 error (all sites)")
    style.legend_below(fig, handles, labels, ncol=3)
    out.caption = (
        "Rate against distortion: the median relative L2 error of each variant over all "
        "tensors of every site against its mean wire bytes per element (payload plus scales). "
        "Whiskers span the lowest to the highest per-site median, the values the "
        "terminal prints per site. Lower and further left is better"
        + (f"; ▼ on the bottom edge: zero error (exact): {', '.join(zeros)}" if zeros else "")
        + f". Source: {t.source}.")
    return out


def make(rd: results.ResultsDir) -> list[figkit.FigureOut]:
    t = rd.results()
    variants = t.unique("variant")
    facts = rd.variants()
    colors = {v: style.variant_color(v, facts.get(v)) for v in variants}
    nbytes = variant_bytes(t)
    stats = per_site_stats(t)
    if not stats:
        raise results.InputMissing(f"{t.source} has no finite rel_l2 value")
    outs = [make_bars(rd, t, variants, colors, nbytes, stats)]
    tr = make_tradeoff(rd, t, variants, colors, nbytes, stats)
    if tr is not None:
        outs.append(tr)
    return outs


if __name__ == "__main__":
    sys.exit(figkit.main(make, __doc__))
