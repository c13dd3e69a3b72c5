"""Compression error against the group size G, for variants that differ only in G.

usage: python3 analysis/fig_error_groupsize.py RESULTS_DIR OUT_DIR

Reads RESULTS_DIR/results.csv (or the rows of results.json) and the "variant_facts" of
results.json from taco study. Variants of one group_series (the same codec up to the group
size, named by taco after the first preset of the sweep: taco-g32 .. taco-g512 -> taco,
e4m3:gG:dual -> taco-noh, fp8-g32 and e4m3:g512 -> fp8-g128) that differ in group_size form one
series, labelled with that name. Writes:
  error_groupsize.{png,pdf,json}  one panel per (site, direction): median relative L2 error
      against G (log2 axis), one line per series; each point is drawn in its variant's colour.
Skips (exit 0) when there is no results file or no two variants differ only in G; exits 2
with one line when the input is malformed.
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


def find_series(t: results.Table, facts: results.VariantTable) -> list[dict]:
    """[{label, members: {G: variant}, color}] for every group_series with >= 2 distinct group
    sizes, in order of first appearance."""
    by_series: dict[str, dict[int, str]] = {}
    for v in t.unique("variant"):
        f = facts.get(v)
        if f["group_series"] is None or f["group_size"] is None:
            continue
        by_series.setdefault(f["group_series"], {}).setdefault(f["group_size"], v)  # first per G wins
    return [{"label": name, "members": dict(sorted(members.items())),
             "color": style.series_color(facts.get(next(iter(members.values()))))}
            for name, members in by_series.items() if len(members) >= 2]


def make(rd: results.ResultsDir) -> list[figkit.FigureOut]:
    t = rd.results()
    facts = rd.study_variants(t)
    series = find_series(t, facts)
    if not series:
        raise results.InputMissing("no two variants differ only in group size")
    pairs = sorted({(s, d) for s, d in zip(t["site"], t["direction"])},
                   key=lambda p: style.site_key(*p))
    n = len(pairs)
    ncols = min(n, 4)
    nrows = math.ceil(n / ncols)
    width = style.COLUMN_WIDTH if n <= 2 else style.FULL_WIDTH
    fig, axes = style.figure(width, 0.5 + 1.7 * nrows, nrows, ncols, sharey=True, sharex=True)
    out = figkit.FigureOut(name="error_groupsize", fig=fig,
                           title="Relative L2 error against group size", caption="",
                           inputs=list(dict.fromkeys([rd.path + "/" + t.source, facts.source])))
    all_g = sorted({g for s in series for g in s["members"]})
    ymin, ymax = math.inf, 0.0
    med = {}
    for (site, direction, v), sub in t.groupby("site", "direction", "variant").items():
        r = results.finite(sub["rel_l2"])
        if r.size:
            med[(site, direction, v)] = float(np.median(r))
    for i, (site, direction) in enumerate(pairs):
        ax = axes[i // ncols][i % ncols]
        ax.set_title(style.site_label(site, direction))
        for s in series:
            xs, ys, vs = [], [], []
            for g, v in s["members"].items():
                y = med.get((site, direction, v))
                if y is None or y <= 0:
                    continue
                xs.append(g)
                ys.append(y)
                vs.append(v)
            if not xs:
                continue
            line_c = s["color"]
            ax.plot(xs, ys, color=line_c, lw=1.0, zorder=2)
            ax.scatter(xs, ys, c=[style.variant_color(v, facts.get(v)) for v in vs], s=14, zorder=3,
                       edgecolors="white", linewidths=0.4)
            out.add_series(ax, s["label"], len(xs), group_sizes=xs, variants=vs, rel_l2=ys)
            ymin, ymax = min(ymin, min(ys)), max(ymax, max(ys))
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(all_g))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlim(all_g[0] / 1.3, all_g[-1] * 1.3)
        if i + ncols >= n:
            ax.set_xlabel("group size G (elements)")
        if i % ncols == 0:
            ax.set_ylabel("relative L2 error (median)")
    for j in range(n, nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    if ymax > 0:
        axes[0][0].set_yscale("log")
        axes[0][0].set_ylim(ymin / 1.5, ymax * 1.5)
    handles = [Line2D([], [], color=s["color"], marker="o", ms=3.5)
               for s in series]
    labels = [f"{s['label']} ({', '.join(s['members'].values())})" if len(series) < 4 else
              s["label"] for s in series]
    style.legend_below(fig, handles, labels, ncol=1 if width < 4 else 2)
    out.caption = (
        "Median relative L2 error over the tensors of each site against the group size G "
        "(elements sharing one scale), for each family of variants that differ only in G. "
        "Points are drawn in the colour of their variant, lines in the colour of the family. "
        "Smaller groups adapt the scale to local magnitudes but cost more scale bytes per "
        f"element (see the error-per-variant figure). Source: {t.source}.")
    out.extra["series"] = [{"label": s["label"], "members": {str(g): v for g, v in
                                                              s["members"].items()}}
                           for s in series]
    return [out]


if __name__ == "__main__":
    sys.exit(figkit.main(make, __doc__))
