"""Error against wire bytes for every codec family, per TP collective site, with the Pareto front.

usage: python3 analysis/fig_pareto.py RESULTS_DIR OUT_DIR

Reads RESULTS_DIR/pareto.csv (every `taco study` writes it; `--pareto` adds a sweep over all
families: quantizers, TACO, TAH-Quant, subspace, low-rank, tensor-train, TopK, RandK, error
feedback) and writes:
  pareto_sites.{png,pdf,json}  one panel per (site, direction): each variant's median relative
      L2 error against its wire bytes per element, marker by family, colour by variant, every
      point named; the variants the study marked on_front joined by a line.
Points with zero error (lossless bf16) sit on the bottom edge of the log axis as a downward
triangle; a non-finite error (a codec that failed) cannot be drawn and the caption counts it.
Skips (exit 0) when pareto.csv is absent; exits 2 with one line when it is malformed.
"""
from __future__ import annotations

import math
import sys

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.text import Text

import figkit
import results
import style

# Marker per family (pareto.csv `family`); anything else gets "*".
FAMILY_MARKERS = {"quant": "o", "tahquant": "P", "subspace": "s", "lowrank": "D", "tt": "^",
                  "topk": "v", "randk": "<", "ef": ">", "aqsgd": "X"}


def family_marker(family: str) -> str:
    return FAMILY_MARKERS.get(family, "*")


# Where a name may go relative to its point (offset in points, horizontal alignment), in order
# of preference.
_NAME_SPOTS = [((3, 2), "left"), ((3, -8), "left"), ((-3, 2), "right"), ((-3, -8), "right")] + \
    [((dx, dy), ha) for dy in (9, -15, 16, -22, 23, 30) for dx, ha in ((3, "left"), (-3, "right"))]


def name_points(ax, xs, ys, names) -> None:
    """Names the points, each at the first spot where its text stays inside the axes and clear
    of the names already placed (the first spot when none is). Needs a drawn figure."""
    renderer = ax.figure.canvas.get_renderer()
    box = ax.get_window_extent(renderer)
    placed = []
    for x, y, v in zip(xs, ys, names):
        t = None
        for (dx, dy), ha in _NAME_SPOTS:
            if t is not None:
                t.remove()
            # Every name has a thin leader line to its point: in a cluster, the line says which.
            lead = dict(arrowstyle="-", lw=0.3, color="0.5", shrinkA=0, shrinkB=2)
            t = ax.annotate(v, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha,
                            fontsize=5.5, clip_on=True, in_layout=False, arrowprops=lead)
            t.update_positions(renderer)
            e = Text.get_window_extent(t, renderer)   # the words only, not the leader line
            inside = e.x0 >= box.x0 and e.x1 <= box.x1 and e.y0 >= box.y0 and e.y1 <= box.y1
            if inside and not any(e.overlaps(p) for p in placed):
                break
        else:
            t.remove()
            (dx, dy), ha = _NAME_SPOTS[0]
            t = ax.annotate(v, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha,
                            fontsize=5.5, clip_on=True, in_layout=False)
        t.update_positions(renderer)
        placed.append(Text.get_window_extent(t, renderer))


def make(rd: results.ResultsDir) -> list[figkit.FigureOut]:
    t = rd.pareto()
    facts = rd.variants()
    colors = {v: style.variant_color(v, facts.get(v)) for v in t.unique("variant")}
    pairs = sorted({(s, d) for s, d in zip(t["site"], t["direction"])},
                   key=lambda p: style.site_key(*p))
    ncols = 2 if len(pairs) > 1 else 1
    nrows = math.ceil(len(pairs) / ncols)
    width = style.FULL_WIDTH if ncols == 2 else style.COLUMN_WIDTH
    fig, axes = style.figure(width, 2.1 * nrows + 0.6, nrows, ncols)
    out = figkit.FigureOut(name="pareto_sites", fig=fig,
                           title="Error against wire bytes per site, every codec family",
                           caption="", inputs=[rd.path + "/" + t.source])
    families_seen: list[str] = []
    labels: list = []   # (axes, x, y, names) of the front points, named once the layout is done
    not_drawn = 0
    zeros_total: list[str] = []
    groups = t.groupby("site", "direction")
    for k, (site, direction) in enumerate(pairs):
        ax = axes[k // ncols][k % ncols]
        ax.set_title(style.site_label(site, direction))
        sub = groups[(site, direction)]
        b, r, front = sub["bytes_per_elem"], sub["rel_l2"], sub["on_front"] == 1
        drawable = np.isfinite(b) & np.isfinite(r) & (r > 0)
        exact = np.isfinite(b) & (r == 0)
        not_drawn += int(np.count_nonzero(~drawable & ~exact))
        floor = style.zero_floor(r[drawable])
        zero_names = list(sub["variant"][exact])
        if zero_names:
            style.mark_zeros(ax, b[exact], floor, [colors[v] for v in zero_names])
            zeros_total.extend(zero_names)
            out.add_series(ax, "zero error", len(zero_names), variants=zero_names,
                           bytes_per_elem=[float(x) for x in b[exact]])
        for (fam,), fs in sub.groupby("family").items():
            ok = np.isfinite(fs["bytes_per_elem"]) & np.isfinite(fs["rel_l2"]) & (fs["rel_l2"] > 0)
            if not np.any(ok):
                continue
            if fam not in families_seen:
                families_seen.append(fam)
            names = list(fs["variant"][ok])
            ax.scatter(fs["bytes_per_elem"][ok], fs["rel_l2"][ok], s=14, marker=family_marker(fam),
                       c=[colors[v] for v in names], edgecolors="none", zorder=3)
            out.add_series(ax, fam, int(np.count_nonzero(ok)), variants=names,
                           bytes_per_elem=[float(x) for x in fs["bytes_per_elem"][ok]],
                           rel_l2=[float(x) for x in fs["rel_l2"][ok]])
        on = front & drawable
        order = np.argsort(b[on], kind="stable")
        fb, fr, fv = b[on][order], r[on][order], list(sub["variant"][on][order])
        if fb.size:
            ax.plot(fb, fr, color="black", lw=0.7, zorder=2)
            out.add_series(ax, "Pareto front", int(fb.size), variants=fv,
                           bytes_per_elem=[float(x) for x in fb], rel_l2=[float(x) for x in fr])
        # Every point is named (the front's first, so they get the best spots), exact ones too.
        off = drawable & ~front
        labels.append((ax, list(fb) + list(b[off]) + list(b[exact]),
                       list(fr) + list(r[off]) + [floor] * len(zero_names),
                       fv + list(sub["variant"][off]) + [f"{v} (0)" for v in zero_names]))
        ax.set_yscale("log")
        ax.set_ylim(bottom=floor)
        ax.set_xlabel("wire bytes per element (bf16 = 2)")
        ax.set_ylabel("relative L2 error (median)")
    for k in range(len(pairs), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    if not families_seen and not zeros_total:
        figkit.close([out])
        raise results.InputMissing(f"{t.source} has no point with a finite, positive error")
    handles = [Line2D([], [], color="0.3", marker=family_marker(f), ls="none", ms=4)
               for f in families_seen]
    labels_ = [f"family {f}" for f in families_seen]
    # The colour of every variant too (a second way to tell points of a cluster apart), unless
    # a sweep makes the list longer than the figure.
    variants = list(dict.fromkeys(t["variant"]))
    if len(variants) <= 16:
        handles += [Line2D([], [], color=colors[v], marker="s", ls="none", ms=4) for v in variants]
        labels_ += variants
    style.legend_below(fig, handles, labels_, ncol=5)
    fig.canvas.draw()   # settle the layout: the names are placed in display space
    for ax, fb, fr, fv in labels:
        name_points(ax, fb, fr, fv)
    skipped = (f" {not_drawn} point(s) with a non-finite error (a codec that failed) are not drawn."
               if not_drawn else "")
    exact = (" ▼ on the bottom edge: zero error (exact), named 'variant (0)'."
             if zeros_total else "")
    out.caption = (
        "Each codec variant's median relative L2 error ‖x−x̂‖₂/‖x‖₂ over the tensors of a site "
        "(the statistic `taco study` prints and ranks by) against its mean wire bytes per element "
        "(payload plus scales and factors; bf16 is 2), as `taco study` wrote them to pareto.csv. "
        "Marker: codec family; colour and name: variant. The line joins the variants no other "
        f"variant beats on both axes (the study's on_front flag). Log error axis.{exact}{skipped} "
        f"Source: {t.source}.")
    out.extra = {"sites": [list(p) for p in pairs], "not_drawn": not_drawn, "zero_error": len(zeros_total)}
    return [out]


if __name__ == "__main__":
    sys.exit(figkit.main(make, __doc__))
