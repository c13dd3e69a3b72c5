"""Magnitude histograms of the TP collective inputs against the FP8 ranges.

usage: python3 analysis/fig_histograms.py RESULTS_DIR OUT_DIR

Reads RESULTS_DIR/histograms.csv (taco study --out) and writes into OUT_DIR:
  hist_scaled.{png,pdf,json}  one panel per (site, direction): the distribution of
      |x|*448/absmax under per-tensor scaling (scope "tensor") and per-group scaling (scope
      "groupN"), as the fraction of all elements per log2 bin, with the FP8 E4M3 and E5M2
      normal (dark) and subnormal (light) ranges drawn as bars at the top of each panel.
  hist_raw.{png,pdf,json}     the unscaled log2|x| distribution (scope "raw"), one line per
      (site, direction).
Skips (exit 0) when histograms.csv is absent; exits 2 with one line when it is malformed.
"""
from __future__ import annotations

import math
import sys

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory

import figkit
import results
import style

_LOG2_E4M3_SUB = -9      # smallest E4M3 subnormal 2^-9
_LOG2_E4M3_NORMAL = -6   # smallest E4M3 normal 2^-6
_LOG2_X_FLOOR = -40      # scaled panels start here at the lowest (far below E5M2's 2^-16)


def scope_label(scope: str) -> str:
    if scope == "tensor":
        return "per-tensor scale"
    if scope == "raw":
        return "unscaled"
    if scope.startswith("group") and scope[5:].isdigit():
        return f"per-group scale (G={scope[5:]})"
    return scope


def _scope_key(scope: str):
    if scope == "tensor":
        return (0, 0)
    if scope.startswith("group") and scope[5:].isdigit():
        return (1, int(scope[5:]))
    return (2, scope)


class Hist:
    """One (site, direction, scope) histogram: bin edges (log2), counts, zeros."""

    def __init__(self, sub: results.Table, where: str):
        lo, hi, cnt = sub["bin_lo_log2"], sub["bin_hi_log2"], sub["count"]
        zero_rows = np.isnan(lo) & np.isnan(hi)
        if np.any(np.isnan(lo) != np.isnan(hi)):
            raise results.InputInvalid(f"{where}: a bin has only one of bin_lo_log2, bin_hi_log2")
        if np.any(cnt < 0) or np.any(cnt != np.floor(cnt)):
            raise results.InputInvalid(f"{where}: count must be a non-negative integer")
        if np.count_nonzero(zero_rows) > 1:
            raise results.InputInvalid(f"{where}: more than one zeros row")
        self.zeros = float(cnt[zero_rows].sum())
        lo, hi, cnt = lo[~zero_rows], hi[~zero_rows], cnt[~zero_rows]
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise results.InputInvalid(f"{where}: a bin edge is not finite")
        if np.any(hi <= lo):
            raise results.InputInvalid(f"{where}: a bin has bin_hi_log2 <= bin_lo_log2")
        order = np.argsort(lo)
        self.lo, self.hi, self.count = lo[order], hi[order], cnt[order]
        if np.any(self.lo[1:] < self.hi[:-1]):
            raise results.InputInvalid(f"{where}: bins overlap")
        self.nonzero = float(self.count.sum())
        self.total = self.nonzero + self.zeros
        if self.total <= 0:
            raise results.InputInvalid(f"{where}: all counts are zero")

    def stairs(self):
        """Contiguous edges and fraction-of-all-elements values (gaps filled with NaN)."""
        edges, vals = [self.lo[0]], []
        for lo, hi, c in zip(self.lo, self.hi, self.count):
            if lo > edges[-1]:
                vals.append(math.nan)
                edges.append(lo)
            vals.append(c / self.total if c > 0 else math.nan)
            edges.append(hi)
        return np.asarray(edges), np.asarray(vals)

    def frac_below(self, log2_t: float) -> float:
        """Fraction of nonzero elements with log2|x| < t (a straddling bin prorated in log2)."""
        if self.nonzero == 0:
            return 0.0
        below = 0.0
        for lo, hi, c in zip(self.lo, self.hi, self.count):
            if hi <= log2_t:
                below += c
            elif lo < log2_t:
                below += c * (log2_t - lo) / (hi - lo)
        return below / self.nonzero


def load(rd: results.ResultsDir):
    t = rd.histograms()
    hists = {}
    for (site, direction, scope), sub in t.groupby("site", "direction", "scope").items():
        hists[(site, direction, scope)] = Hist(sub, f"{t.source} ({site}, {direction}, {scope})")
    return t, hists


def draw_fp8_ranges(ax, xmax: float) -> None:
    """E4M3 and E5M2 ranges as two bars at the top of the axes (x in data, y in axes units),
    normal range dark, subnormal range light. The y range leaves room so they cover no data."""
    tr = blended_transform_factory(ax.transData, ax.transAxes)
    for (name, (sub, norm, top)), y in zip(style.FP8_RANGES.items(), (0.91, 0.82)):
        h = 0.075
        ax.broken_barh([(sub, norm - sub)], (y, h), transform=tr, facecolor="#c9c9c9",
                       edgecolor="none", zorder=1)
        right = min(top, xmax)
        ax.broken_barh([(norm, right - norm)], (y, h), transform=tr, facecolor="#5a5a5a",
                       edgecolor="none", zorder=1)
        label = name if top <= xmax else f"{name} (to {top:g})"
        mid = math.sqrt(norm * right)
        ax.text(mid, y + h / 2, label, transform=tr, ha="center", va="center", fontsize=5.5,
                color="white", zorder=2)


def make_scaled(rd, t, hists) -> figkit.FigureOut | None:
    pairs = sorted({(s, d) for (s, d, sc) in hists if sc != "raw"}, key=lambda p: style.site_key(*p))
    if not pairs:
        return None
    scopes = sorted({sc for (_s, _d, sc) in hists if sc != "raw"}, key=_scope_key)
    n = len(pairs)
    ncols = min(n, 4)
    nrows = math.ceil(n / ncols)
    width = style.COLUMN_WIDTH if n <= 2 else style.FULL_WIDTH
    fig, axes = style.figure(width, 0.4 + 1.75 * nrows, nrows, ncols, sharey=True)
    out = figkit.FigureOut(
        name="hist_scaled", fig=fig, title="Magnitudes that FP8 sees, per site",
        caption="", inputs=[rd.path + "/histograms.csv"])
    drawn = [hists[(s, d, sc)] for (s, d) in pairs for sc in scopes
             if (s, d, sc) in hists and hists[(s, d, sc)].lo.size]
    if not drawn:
        return None                      # every scaled histogram holds zeros only
    lo_all = min(h.lo.min() for h in drawn)
    hi_all = max(h.hi.max() for h in drawn)
    xlo = 2.0 ** max(min(math.floor(lo_all), -17), _LOG2_X_FLOOR)
    xhi = 2.0 ** max(math.ceil(hi_all), 10)
    ymin, ymax = math.inf, 0.0
    table_rows = []
    for i, (site, direction) in enumerate(pairs):
        ax = axes[i // ncols][i % ncols]
        ax.set_title(style.site_label(site, direction))
        for scope in scopes:
            h = hists.get((site, direction, scope))
            if h is None:
                continue
            if h.lo.size == 0:           # zeros only: nothing to draw, the table says so
                out.add_series(ax, scope_label(scope), 0, scope=scope, site=site,
                               direction=direction, zero_frac=1.0)
                table_rows.append([style.site_label(site, direction), scope_label(scope),
                                   "100%", "", "", ""])
                continue
            edges, vals = h.stairs()
            ax.stairs(vals, 2.0 ** edges, baseline=None, color=style.scope_color(scope),
                      lw=1.1, label=scope_label(scope))
            ok = vals[np.isfinite(vals)]
            if ok.size:
                ymin, ymax = min(ymin, ok.min()), max(ymax, ok.max())
            below_sub = h.frac_below(_LOG2_E4M3_SUB)
            below_norm = h.frac_below(_LOG2_E4M3_NORMAL)
            out.add_series(ax, scope_label(scope), int(np.isfinite(vals).sum()), scope=scope,
                           site=site, direction=direction,
                           frac_left_of_axis=h.frac_below(math.log2(xlo)),
                           frac_below_e4m3_subnormal=below_sub,
                           frac_below_e4m3_normal=below_norm, zero_frac=h.zeros / h.total)
            table_rows.append([style.site_label(site, direction), scope_label(scope),
                               f"{100 * h.zeros / h.total:.3g}%", f"{100 * below_sub:.3g}%",
                               f"{100 * below_norm:.3g}%",
                               f"{100 * h.frac_below(math.log2(xlo)):.3g}%"])
        ax.axvline(style.E4M3_MIN_SUBNORMAL, color="#333333", lw=0.6, ls=":", zorder=1)
        style.log2_axis(ax, xlo, xhi, max_ticks=6 if ncols > 2 else 8)
        if i + ncols >= n:    # bottom panel of its column
            ax.set_xlabel("|x| · 448 / absmax" if ncols > 1 else
                          "|x| · 448 / absmax (scaled magnitude)")
        if i % ncols == 0:
            ax.set_ylabel("fraction of elements")
    for j in range(n, nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    # Log y with headroom: data in the lower ~75% of each panel, FP8 bars above it.
    ylo = ymin / 2
    span = math.log10(ymax) - math.log10(ylo)
    ytop = 10 ** (math.log10(ymax) + span * 0.40)
    for i in range(n):
        ax = axes[i // ncols][i % ncols]
        ax.set_yscale("log")
        ax.set_ylim(ylo, ytop)
        style.decade_ticks(ax, ylo, 1.0)
        draw_fp8_ranges(ax, xhi)
    handles = [Line2D([], [], color=style.scope_color(s), lw=1.1) for s in scopes]
    labels = [scope_label(s) for s in scopes]
    handles += [Patch(facecolor="#5a5a5a"), Patch(facecolor="#c9c9c9"),
                Line2D([], [], color="#333333", lw=0.6, ls=":")]
    labels += ["FP8 normal range", "FP8 subnormal range", "$2^{-9}$ (E4M3 min. subnormal)"]
    style.legend_below(fig, handles, labels, ncol=3 if width > 4 else 2)
    out.caption = (
        "Distribution of |x| after scaling the absolute maximum to 448, per TP collective site "
        "and direction: per-tensor scaling (one scale per tensor) against per-group scaling "
        "(one scale per group of G contiguous elements). The y axis is the fraction of all "
        "elements (zeros included) per log2 bin. Bars at the top mark the FP8 E4M3 "
        "(normal 2^-6..448, subnormal down to 2^-9) and E5M2 (normal 2^-14..57344, subnormal "
        "down to 2^-16) ranges; mass left of the dotted line at 2^-9 is flushed to zero or "
        "badly rounded by E4M3. Magnitudes below 2^-40, if any, lie left of the axis (their "
        "share is in the table). Source: histograms.csv, summed over layers, ranks and steps.")
    out.extra["table"] = {
        "columns": ["site", "scope", "zeros", "nonzero below 2^-9", "nonzero below 2^-6",
                    "nonzero left of the axis"],
        "rows": table_rows}
    out.extra["x_range_log2"] = [math.log2(xlo), math.log2(xhi)]
    return out


def make_raw(rd, t, hists) -> figkit.FigureOut | None:
    pairs = sorted({(s, d) for (s, d, sc) in hists if sc == "raw"}, key=lambda p: style.site_key(*p))
    if not pairs:
        return None
    fig, axes = style.figure(style.COLUMN_WIDTH, 2.6)
    ax = axes[0][0]
    out = figkit.FigureOut(name="hist_raw", fig=fig, title="Unscaled magnitudes, per site",
                           caption="", inputs=[rd.path + "/histograms.csv"])
    lo_all, hi_all, ymin, ymax = math.inf, -math.inf, math.inf, 0.0
    handles, labels = [], []
    for site, direction in pairs:
        h = hists[(site, direction, "raw")]
        if h.lo.size == 0:               # zeros only
            continue
        edges, vals = h.stairs()
        ls = "-" if direction != "bwd" else "--"
        ax.stairs(vals, 2.0 ** edges, baseline=None, color=style.site_color(site), ls=ls, lw=1.1)
        handles.append(Line2D([], [], color=style.site_color(site), ls=ls, lw=1.1))
        labels.append(style.site_label(site, direction))
        out.add_series(ax, labels[-1], int(np.isfinite(vals).sum()), site=site,
                       direction=direction, zero_frac=h.zeros / h.total,
                       log2_range=[float(h.lo.min()), float(h.hi.max())])
        lo_all, hi_all = min(lo_all, h.lo.min()), max(hi_all, h.hi.max())
        ok = vals[np.isfinite(vals)]
        if ok.size:
            ymin, ymax = min(ymin, ok.min()), max(ymax, ok.max())
    if not handles:
        import matplotlib.pyplot as plt
        plt.close(fig)
        return None
    style.log2_axis(ax, 2.0 ** math.floor(lo_all), 2.0 ** math.ceil(hi_all), max_ticks=8)
    ax.set_yscale("log")
    ax.set_ylim(ymin / 2, ymax * 2)
    style.decade_ticks(ax, ymin / 2, ymax * 2)
    ax.set_xlabel("|x| (unscaled)")
    ax.set_ylabel("fraction of elements")
    style.legend_below(fig, handles, labels, ncol=2)
    out.caption = (
        "Distribution of the unscaled magnitudes |x| of the TP collective inputs, per site and "
        "direction (solid forward, dashed backward), as the fraction of all elements per log2 "
        "bin; zeros are not drawn (their share is in the sidecar). The width of each curve in "
        "binades is the dynamic range a single scale has to cover. Source: histograms.csv "
        "(scope raw).")
    return out


def make(rd: results.ResultsDir) -> list[figkit.FigureOut]:
    t, hists = load(rd)
    outs = [o for o in (make_scaled(rd, t, hists), make_raw(rd, t, hists)) if o is not None]
    if not outs:
        raise results.InputMissing("histograms.csv has no usable scope")
    return outs


if __name__ == "__main__":
    sys.exit(figkit.main(make, __doc__))
