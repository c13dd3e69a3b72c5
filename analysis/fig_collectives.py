"""Collective bus bandwidth and speed-up of compression against message size, per transport.

usage: python3 analysis/fig_collectives.py RESULTS_DIR OUT_DIR

Reads every `taco comm --json FILE` output at the top of RESULTS_DIR (recognised by its keys
"meta" and "results" with "collective"; any file name). Writes, per file (NAME =
comm_busbw, or comm_busbw_<file stem> when there are several):
  NAME.{png,pdf,json}  one column per (collective, ranks); top: bus bandwidth (nccl-tests
      formulas on the uncompressed size, 1 GB = 1e9 B) against the per-rank buffer size, one
      colour per transport, dashed = plain NCCL (codec "none"), solid = compressed; bottom:
      speed-up of the compressed collective over plain NCCL on the same transport, with the
      crossover size (speed-up = 1) marked by a diamond and given in the legend.
Speed-ups come from the "speedup" field, or from busbw ratios when it is null.
Skips (exit 0) when there is no comm JSON; exits 2 with one line when one is malformed.
"""
from __future__ import annotations

import math
import os
import sys

import numpy as np
from matplotlib.lines import Line2D

import figkit
import results
import style

PLAIN = {"none", "nccl", "bf16", ""}


def crossover(sizes, speedups):
    """Smallest size above which the speed-up stays >= 1, interpolated linearly in
    (log2 size, log2 speed-up) between the last point below 1 and the next one.
    Returns (size or None, reason)."""
    pts = [(s, v) for s, v in zip(sizes, speedups) if v > 0 and math.isfinite(v)]
    pts.sort()
    below = [i for i, (_s, v) in enumerate(pts) if v < 1.0]
    if not pts:
        return None, "no data"
    if not below:
        return None, "faster at every size"
    k = below[-1]
    if k == len(pts) - 1:
        return None, "slower up to the largest size"
    (s0, v0), (s1, v1) = pts[k], pts[k + 1]
    x0, x1, y0, y1 = math.log2(s0), math.log2(s1), math.log2(v0), math.log2(v1)
    x = x0 + (0.0 - y0) * (x1 - x0) / (y1 - y0)
    return 2.0 ** x, "crosses"


def _series(rows):
    """{(transport, codec, algorithm): {size: (busbw, speedup)}} keeping the order seen."""
    out: dict[tuple, dict[float, list]] = {}
    for r in rows:
        key = (r["transport"], r["codec"], r["algorithm"])
        sp = r.get("speedup")
        out.setdefault(key, {}).setdefault(float(r["size"]), []).append(
            (float(r["busbw"]), math.nan if sp is None else float(sp)))
    return {k: {s: (float(np.median([b for b, _ in v])), float(np.median([p for _, p in v])))
                for s, v in d.items()} for k, d in out.items()}


def make_one(path: str, doc: dict, name: str) -> figkit.FigureOut:
    rows = doc["results"]
    groups = list(dict.fromkeys((r["collective"], int(r["nranks"])) for r in rows))
    ncols = len(groups)
    width = style.COLUMN_WIDTH if ncols == 1 else style.FULL_WIDTH
    fig, axes = style.figure(width, 4.2, 2, ncols, sharex="col")
    nranks_meta = doc["meta"].get("gpu") or ""
    out = figkit.FigureOut(name=name, fig=fig, title="Compressed collectives: bandwidth and "
                           "speed-up", caption="", inputs=[path])
    transports = list(dict.fromkeys(r["transport"] for r in rows))
    combos = list(dict.fromkeys((r["codec"], r["algorithm"]) for r in rows
                                if r["codec"].lower() not in PLAIN))
    markers = ["o", "s", "^", "D", "v", "P"]
    combo_marker = {c: markers[i % len(markers)] for i, c in enumerate(combos)}
    crossings = []
    all_sizes = []
    for j, (coll, nr) in enumerate(groups):
        axb, axs = axes[0][j], axes[1][j]
        title = f"{coll.replace('_', '-')}, {nr} ranks"
        axb.set_title(title)
        axs.set_title(f"{title}: speed-up")
        sub = [r for r in rows if r["collective"] == coll and int(r["nranks"]) == nr]
        series = _series(sub)
        plain = {k[0]: v for k, v in series.items() if k[1].lower() in PLAIN}
        bw_all, sp_all = [], []
        for (tr, codec, alg), pts in series.items():
            sizes = sorted(pts)
            bw = [pts[s][0] for s in sizes]
            color = style.transport_color(tr)
            all_sizes += sizes
            bw_all += bw
            if codec.lower() in PLAIN:
                axb.plot(sizes, bw, color=color, ls="--", marker="o", mfc="white", ms=3, lw=1.0)
                out.add_series(axb, f"{tr} NCCL", len(sizes), transport=tr, codec=codec)
                continue
            m = combo_marker[(codec, alg)]
            axb.plot(sizes, bw, color=color, ls="-", marker=m, ms=3, lw=1.1)
            out.add_series(axb, f"{tr} {codec} {alg}", len(sizes), transport=tr, codec=codec,
                           algorithm=alg)
            sp = []
            for s in sizes:
                v = pts[s][1]
                if not math.isfinite(v) and tr in plain and s in plain[tr] and plain[tr][s][0] > 0:
                    v = pts[s][0] / plain[tr][s][0]
                sp.append(v)
            ok = [(s, v) for s, v in zip(sizes, sp) if math.isfinite(v) and v > 0]
            if not ok:
                continue
            xs, ys = zip(*ok)
            axs.plot(xs, ys, color=color, ls="-", marker=m, ms=3, lw=1.1)
            sp_all += list(ys)
            cx, why = crossover(xs, ys)
            if cx is not None:
                axs.plot([cx], [1.0], marker="D", ms=5, color=color, mec="black", mew=0.6,
                         ls="none", zorder=5)
                # Below-right of the diamond: the rising line that crosses here is above 1
                # to the right and left of the diamond below 1, so this corner is free of it.
                axs.annotate(style.format_bytes(cx), (cx, 1.0), xytext=(3, -4),
                             textcoords="offset points", ha="left", va="top", fontsize=6,
                             color=color, zorder=6)
            crossings.append({"collective": coll, "nranks": nr, "transport": tr, "codec": codec,
                              "algorithm": alg, "crossover_bytes": cx, "status": why})
            out.add_series(axs, f"{tr} {codec} {alg} speed-up", len(xs), transport=tr,
                           codec=codec, algorithm=alg, crossover_bytes=cx, crossover=why)
        axs.axhline(1.0, color="#333333", lw=0.7, ls=":", zorder=1)
        if bw_all:
            lo, hi = min(b for b in bw_all if b > 0), max(bw_all)
            axb.set_yscale("log")
            axb.set_ylim(lo / 1.6, hi * 1.6)
            style.plain_log_ticks(axb, lo / 1.6, hi * 1.6)
        if sp_all:
            lo, hi = min(min(sp_all), 1.0), max(max(sp_all), 1.0)
            axs.set_yscale("log")
            axs.set_ylim(lo / 1.3, hi * 1.3)
            style.plain_log_ticks(axs, lo / 1.3, hi * 1.3)
        if j == 0:
            axb.set_ylabel("bus bandwidth (GB/s)")
            axs.set_ylabel("speed-up over NCCL (×)")
        axs.set_xlabel("message size per rank")
    for j in range(ncols):
        style.bytes_axis(axes[1][j], all_sizes, max_ticks=5 if ncols > 1 else 6)
    # Legend: transports (colour, with their crossover), line kinds, codec markers.
    handles, labels = [], []
    for tr in transports:
        cs = [c for c in crossings if c["transport"] == tr]
        note = ""
        if len({c["crossover_bytes"] for c in cs}) == 1:     # the same everywhere
            c = cs[0]
            note = (f": break-even at {style.format_bytes(c['crossover_bytes'])}"
                    if c["crossover_bytes"] is not None else f": {c['status']}")
        handles.append(Line2D([], [], color=style.transport_color(tr), lw=1.6))
        labels.append(tr + note)
    handles.append(Line2D([], [], color="#444444", ls="--", marker="o", mfc="white", ms=3))
    labels.append("plain NCCL (uncompressed)")
    for c in combos:
        handles.append(Line2D([], [], color="#444444", ls="-", marker=combo_marker[c], ms=3))
        labels.append(f"{c[0]} ({c[1].replace('_', '-')})")
    handles.append(Line2D([], [], color="#777777", marker="D", mec="black", mew=0.6, ls="none",
                          ms=5))
    labels.append("break-even size (speed-up = 1)")
    style.legend_below(fig, handles, labels, ncol=2 if width < 4 else 3)
    summary = "; ".join(
        f"{c['collective']} {c['transport']} {c['codec']}: "
        + (style.format_bytes(c["crossover_bytes"]) if c["crossover_bytes"] is not None
           else c["status"]) for c in crossings)
    out.caption = (
        "Top: bus bandwidth of each collective against the per-rank buffer size, computed "
        "with the nccl-tests factors on the uncompressed size (so compressed and plain runs "
        "compare directly; 1 GB = 1e9 B); dashed lines are plain NCCL, solid lines the "
        "compressed collective, one colour per transport. Bottom: speed-up of the compressed "
        "collective over plain NCCL on the same transport; the diamond marks the break-even "
        "size, interpolated in log-log between the last size below 1 and the next. "
        f"Break-even sizes: {summary or 'none'}. Source: {os.path.basename(path)}"
        + (f" ({nranks_meta})." if nranks_meta else "."))
    out.extra["crossovers"] = crossings
    out.extra["meta"] = doc["meta"]
    return out


def make(rd: results.ResultsDir) -> list[figkit.FigureOut]:
    return figkit.per_run(rd.comm_runs(), "comm_busbw", make_one)


if __name__ == "__main__":
    sys.exit(figkit.main(make, __doc__))
