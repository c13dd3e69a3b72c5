"""Codec kernel throughput against message size, with the same-run copy bandwidth as roofline.

usage: python3 analysis/fig_codec_throughput.py RESULTS_DIR OUT_DIR

Reads every `taco bench --json FILE` output at the top of RESULTS_DIR (recognised by its
keys "meta", "copy", "results" with "op"; any file name). Writes, per benchmark file
(NAME = codec_throughput, or codec_throughput_<file stem> when there are several):
  NAME.{png,pdf,json}  one panel per op (encode, decode, decode_reduce, ...): logical GB/s
      (bytes read + written / median time, 1 GB = 1e9 B) against the input size (size_bytes,
      else numel x dtype size), one colour per variant, solid = fused kernel, dashed =
      unfused; the black line is the device-to-device copy measured in the same run (the
      achievable ceiling).
When a file holds both cold (L2 flushed) and warm (batch) rows, only the cold rows (and the
cold copy) are drawn; several launch configurations of one kernel give the best per size.
Skips (exit 0) when there is no benchmark JSON; exits 2 with one line when one is malformed.
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

OP_ORDER = ["encode", "decode", "decode_reduce", "decode_reduce_encode"]
OP_TITLE = {"encode": "encode (compress)", "decode": "decode (decompress)",
            "decode_reduce": "decode + reduce", "decode_reduce_encode": "decode + reduce + encode"}


def _op_key(op):
    return (OP_ORDER.index(op) if op in OP_ORDER else len(OP_ORDER), op)


def meta_summary(meta: dict) -> str:
    parts = []
    for k in ("gpu", "sm", "cuda_runtime", "driver_version", "taco_version", "git_commit"):
        if k in meta and meta[k] not in (None, ""):
            parts.append(f"{k}={meta[k]}")
    return ", ".join(parts)


def make_one(path: str, doc: dict, name: str,
             facts: results.VariantTable) -> figkit.FigureOut:
    rows = doc["results"]
    cold_vals = {r.get("cold") for r in rows if "cold" in r}
    cold_only = cold_vals == {True, False}
    if cold_only:
        rows = [r for r in rows if r.get("cold") is True]
    ops = sorted({r["op"] for r in rows}, key=_op_key)
    dtypes = sorted({r["dtype"].lower() for r in rows})
    # (op, variant, impl, dtype) -> size -> config -> [gbps]; several launch configurations
    # of a fused kernel are reduced to the best one per size.
    lines: dict[tuple, dict[float, dict[str, list[float]]]] = {}
    order: list[tuple] = []
    for r in rows:
        key = (r["op"], r["variant"], r["impl"], r["dtype"].lower())
        if key not in lines:
            lines[key] = {}
            order.append(key)
        size = r.get("size_bytes")
        if isinstance(size, bool) or not isinstance(size, (int, float)) or size <= 0:
            size = r["numel"] * results.DTYPE_BYTES[r["dtype"].lower()]
        cfg = str(r.get("config") or "")
        lines[key].setdefault(float(size), {}).setdefault(cfg, []).append(float(r["gbps"]))
    n_configs = max(len(c) for d in lines.values() for c in d.values())
    variants = list(dict.fromkeys(k[1] for k in order))
    impls = list(dict.fromkeys(k[2] for k in order))
    nops = len(ops)
    fig, axes = style.figure(style.COLUMN_WIDTH, 0.9 + 1.65 * nops, nops, 1, sharex=True,
                             sharey=True)
    gpu = doc["meta"].get("gpu") or "unknown GPU"
    out = figkit.FigureOut(name=name, fig=fig, title=f"Codec throughput on {gpu}",
                           caption="", inputs=[path])
    # The copy roofline in the same mode as the codec rows drawn (cold unless all are warm).
    mode = cold_vals.pop() if len(cold_vals) == 1 else True
    copy_rows = [c for c in doc.get("copy", []) if c.get("cold", mode) is mode]
    copy_by_size: dict[float, list[float]] = {}
    for c in copy_rows:
        copy_by_size.setdefault(float(c["bytes"]), []).append(float(c["tbps"]) * 1000.0)
    copy = sorted((b, float(np.median(v))) for b, v in copy_by_size.items())
    all_x, all_y = [], []
    for i, op in enumerate(ops):
        ax = axes[i][0]
        ax.set_title(OP_TITLE.get(op, op))
        if copy:
            cx, cy = zip(*copy)
            ax.plot(cx, cy, color="black", lw=1.4, zorder=4)
            out.add_series(ax, "copy", len(cx), kind="roofline")
            all_x += list(cx)
            all_y += list(cy)
        for key in order:
            if key[0] != op:
                continue
            _op, v, impl, dt = key
            pts, best_cfg = [], {}
            for size, by_cfg in sorted(lines[key].items()):
                cfg, val = max(((c, float(np.median(g))) for c, g in by_cfg.items()),
                               key=lambda cv: cv[1])
                pts.append((size, val))
                best_cfg[size] = cfg
            xs, ys = zip(*pts)
            ls = style.IMPL_LINESTYLES.get(impl, "-.")
            ax.plot(xs, ys, color=style.variant_color(v, facts.get(v)), ls=ls, marker="o",
                    ms=2.8, lw=1.1, zorder=3)
            label = f"{v} {impl}" + (f" {dt}" if len(dtypes) > 1 else "")
            pct = [100 * y / np.interp(math.log2(x), [math.log2(c[0]) for c in copy],
                                       [c[1] for c in copy]) for x, y in pts] if copy else []
            out.add_series(ax, label, len(xs), variant=v, impl=impl, dtype=dt, op=op,
                           max_gbps=max(ys), max_pct_copy=(max(pct) if pct else None),
                           configs=sorted(set(best_cfg.values()) - {""}))
            all_x += list(xs)
            all_y += list(ys)
        ax.set_ylabel("throughput (GB/s)")
    ymin, ymax = min(y for y in all_y if y > 0), max(all_y)
    for i in range(nops):
        ax = axes[i][0]
        if ymax / ymin > 8:
            ax.set_yscale("log")
            ax.set_ylim(ymin / 1.5, ymax * 1.5)
            style.plain_log_ticks(ax, ymin / 1.5, ymax * 1.5)
        else:
            ax.set_ylim(0, ymax * 1.1)
    style.bytes_axis(axes[-1][0], all_x)
    axes[-1][0].set_xlabel(f"input size ({'/'.join(dtypes)} bytes)")
    handles = [Line2D([], [], color="black", lw=1.4)]
    labels = ["D2D copy, same run"]
    handles += [Line2D([], [], color=style.variant_color(v, facts.get(v)), lw=1.1, marker="o",
                       ms=2.8) for v in variants]
    labels += variants
    handles += [Line2D([], [], color="#444444", ls=style.IMPL_LINESTYLES.get(m, "-."), lw=1.1)
                for m in impls]
    labels += impls
    style.legend_below(fig, handles, labels, ncol=3)
    out.caption = (
        "Throughput of the codec kernels against the size of the input tensor: logical bytes "
        "(read plus written) per median kernel time, 1 GB = 1e9 B. Solid lines are the fused "
        "kernels, dashed the unfused ones; the black line is the device-to-device copy "
        "bandwidth measured in the same run, the practical ceiling for a memory-bound kernel. "
        + ("Cold (L2 flushed) measurements only. " if cold_only else "")
        + (f"Fused lines take the best of up to {n_configs} launch configurations per size. "
           if n_configs > 1 else "")
        + f"Source: {os.path.basename(path)} ({meta_summary(doc['meta'])}).")
    out.extra["meta"] = doc["meta"]
    out.extra["cold_only"] = cold_only
    return out


def make(rd: results.ResultsDir) -> list[figkit.FigureOut]:
    runs = rd.bench_runs()
    facts = rd.variants()   # a study next to the benchmark describes the variants it ran too
    return figkit.per_run(runs, "codec_throughput",
                          lambda path, doc, name: make_one(path, doc, name, facts))


if __name__ == "__main__":
    sys.exit(figkit.main(make, __doc__))
