"""Where the Hadamard transform helps and where it hurts: error ratio with / without it.

usage: python3 analysis/fig_hadamard.py RESULTS_DIR OUT_DIR

Reads RESULTS_DIR/results.csv (or the rows of results.json) and the "variant_facts" of
results.json from taco study. Every variant with a transform (has_transform) is paired with an
H-free partner: its twin (the same codec without the transform, as taco names it: taco ->
taco-noh, taco-g32 -> taco-noh-g32, fp8-g128-had -> fp8-g128) when the study ran it, else a
variant without a transform and the same family, elem_format, granularity and group_size, one
with the same scale_format first, then the first listed. Without taco-noh, taco pairs with
fp8-g128 (TACO's adaptive scale cancels in exact arithmetic, methods.md 1.4). Writes:
  hadamard_effect.{png,pdf,json}  heat map, rows = (site, direction), columns = pairs,
      cell = median rel_l2 with H / median rel_l2 without H over the site's tensors (the ratio
      `taco study` prints and --select reports), diverging colours centred at 1 (blue: H
      helps, red: H hurts), values annotated.
Skips (exit 0) when there is no results file or no pair; exits 2 with one line when the
input is malformed.
"""
from __future__ import annotations

import math
import sys

import numpy as np
from matplotlib.colors import LogNorm

import figkit
import results
import style

TENSOR_KEY = ("file", "tensor", "layer", "site", "direction", "tp_rank", "step")


def _variant_attrs(t: results.Table) -> dict[str, dict]:
    out = {}
    for v in t.unique("variant"):
        i = int(np.flatnonzero(t["variant"] == v)[0])
        out[v] = {c: t[c][i] for c in ("family", "elem_format", "scale_format", "granularity",
                                       "group_size")}
    return out


def _same_g(a, b) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def find_pairs(t: results.Table, facts: results.VariantTable) -> list[tuple[str, str]]:
    """[(with_H, without_H)] in the order the H variants first appear."""
    attrs = _variant_attrs(t)
    plain = [v for v in attrs if not facts.get(v)["has_transform"]]
    pairs = []
    for v, a in attrs.items():
        f = facts.get(v)
        if not f["has_transform"]:
            continue
        twins = [w for w in plain if facts.get(w)["canonical"] == f["twin"]]
        if f["twin"] is not None and twins:
            pairs.append((v, twins[0]))
            continue
        # No twin in the study: a codec of the same geometry (TACO's adaptive scale cancels in
        # exact arithmetic, so taco-gG against fp8-gG still shows what H does), the same scale
        # format first, then order of appearance.
        base = [w for w in plain
                if all(attrs[w][c] == a[c] for c in ("family", "elem_format", "granularity"))
                and _same_g(attrs[w]["group_size"], a["group_size"])]
        if base:
            pairs.append((v, max(base, key=lambda w: (attrs[w]["scale_format"] == a["scale_format"],
                                                      -plain.index(w)))))
    return pairs


def ratios(t: results.Table, with_h: str, without_h: str) -> dict[tuple, list[tuple[float, float]]]:
    """{(site, direction): [(rel_l2 with H, rel_l2 without H) per tensor]} over tensors that both
    variants saw."""
    def index(v):
        sub = t.where(t["variant"] == v)
        return {tuple(sub[c][i] for c in TENSOR_KEY): sub["rel_l2"][i] for i in range(len(sub))}
    a, b = index(with_h), index(without_h)
    out: dict[tuple, list[float]] = {}
    for key, ra in a.items():
        rb = b.get(key)
        if rb is None or not (math.isfinite(ra) and math.isfinite(rb)) or ra <= 0 or rb <= 0:
            continue
        site, direction = key[3], key[4]
        out.setdefault((site, direction), []).append((ra, rb))
    return out


def make(rd: results.ResultsDir) -> list[figkit.FigureOut]:
    t = rd.results()
    facts = rd.study_variants(t)
    pairs = find_pairs(t, facts)
    if not pairs:
        raise results.InputMissing("no variant with a transform has an H-free partner")
    per_pair = {p: ratios(t, *p) for p in pairs}
    pairs = [p for p in pairs if per_pair[p]]
    if not pairs:
        raise results.InputMissing("no tensor was measured both with and without H")
    sites = sorted({s for p in pairs for s in per_pair[p]}, key=lambda s: style.site_key(*s))
    grid = np.full((len(sites), len(pairs)), np.nan)
    counts = np.zeros_like(grid, dtype=int)
    for j, p in enumerate(pairs):
        for i, s in enumerate(sites):
            r = per_pair[p].get(s)
            if r:
                grid[i, j] = float(np.median([a for a, _ in r]) / np.median([b for _, b in r]))
                counts[i, j] = len(r)
    finite_vals = grid[np.isfinite(grid)]
    span = max(float(np.max(np.abs(np.log2(finite_vals)))), math.log2(1.25))
    vmin, vmax = 2.0 ** -span, 2.0 ** span
    width = style.COLUMN_WIDTH if len(pairs) <= 4 else style.FULL_WIDTH
    cell_h = 0.28
    fig, axes = style.figure(width, 1.2 + cell_h * len(sites))
    ax = axes[0][0]
    out = figkit.FigureOut(name="hadamard_effect", fig=fig,
                           title="Effect of the Hadamard transform on the error", caption="",
                           inputs=list(dict.fromkeys([rd.path + "/" + t.source, facts.source])))
    cmap = "RdBu_r"
    im = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, norm=LogNorm(vmin=vmin, vmax=vmax),
                   aspect="auto")
    norm = im.norm
    for i in range(len(sites)):
        for j in range(len(pairs)):
            v = grid[i, j]
            if not math.isfinite(v):
                ax.text(j, i, "–", ha="center", va="center", fontsize=7, color="#777777")
                continue
            dark = abs(norm(v) - 0.5) > 0.3
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if dark else "black")
    ax.set_xticks(range(len(pairs)))
    ax.set_xticklabels([f"{a} ÷ {b}" for a, b in pairs], rotation=30, ha="right",
                       rotation_mode="anchor")
    ax.set_yticks(range(len(sites)))
    ax.set_yticklabels([style.site_label(*s) for s in sites])
    ax.grid(False)
    ax.tick_params(length=0)
    ax.set_xlabel("variant with H ÷ the same codec without H")
    ax.set_ylabel("site (direction)")
    cb = fig.colorbar(im, ax=ax, shrink=0.95, pad=0.02, aspect=12)
    cb.set_label("rel. L2 ratio (<1: H helps)", fontsize=7)
    step = 1 if vmax <= 8 else 2
    cands = (0.8, 1.0, 1.25) if vmax < 2 else [2.0 ** k for k in range(-8, 9, step)]
    ticks = [x for x in cands if vmin <= x <= vmax]
    cb.set_ticks(ticks)
    cb.set_ticklabels([f"{x:g}" if x >= 1 else f"1/{1 / x:g}" for x in ticks])
    cb.ax.minorticks_off()
    figkit.mark_decor(cb.ax)
    for j, (a, b) in enumerate(pairs):
        out.add_series(ax, f"{a} / {b}", int(np.isfinite(grid[:, j]).sum()), with_h=a,
                       without_h=b, ratio={style.site_label(*s): (None if not
                                           math.isfinite(grid[i, j]) else float(grid[i, j]))
                                           for i, s in enumerate(sites)},
                       tensors=[int(c) for c in counts[:, j]])
    out.extra["colormap"] = {"name": cmap, "center": 1.0, "vmin": vmin, "vmax": vmax,
                             "scale": "log"}
    out.caption = (
        "Ratio of the relative L2 error with the Hadamard transform to the error of the same "
        "codec without it, per site (rows) and variant pair (columns): the median rel_l2 with H "
        "over the site's tensors divided by the median without H, the ratio `taco study` prints "
        "(\"Hadamard: ... ratio\") and --select reports. Values below 1 (blue) mean H lowers the error, above 1 (red) raise it; the "
        "colour scale is logarithmic and centred at 1. A per-group Hadamard spreads an outlier "
        "over its group, which helps near-zero, dense groups and can hurt groups dominated by "
        f"one large value (methods.md §1.4). Source: {t.source}.")
    return [out]


if __name__ == "__main__":
    sys.exit(figkit.main(make, __doc__))
