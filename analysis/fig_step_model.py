"""When does compressing TP communication pay? The step-time model's predictions (and its check).

usage: python3 analysis/fig_step_model.py RESULTS_DIR OUT_DIR

Reads every `taco model --json FILE` output at the top of RESULTS_DIR (recognised by its
"schema": "taco.model/1"; any file name). Writes, per file (NAME = step_model, or
step_model_<file stem> when there are several):
  NAME.{png,pdf,json}  one column per model; top: predicted speed-up of each compressed
      configuration over plain NCCL (bars per scenario: e.g. taco on TP only, taco on TP + PP +
      DP, the fastest codec per site, the no-cost bound), with 1x and the paper's 1.87x marked;
      bottom: where the plain step's time goes (compute, TP communication, codec, PP transfers,
      pipeline bubble, DP communication, optimizer) as shares of the step.
  model_validation[_<stem>].{png,pdf,json}  when the file holds a validation (taco model
      --validate): predicted against measured time per configuration, log-log, one marker per
      kind and transport, with the 10% band.
Skips (exit 0) when there is no model JSON; exits 2 with one line when one is malformed.
"""
from __future__ import annotations

import math
import os
import sys

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

import figkit
import results
import style

PAPER_CLAIM = 1.87   # TACO's reported end-to-end speed-up (arXiv 2604.24088, abstract)
PARTS = ["compute", "tp_comm", "codec", "pp_comm", "pp_bubble", "dp_comm", "optimizer"]
PART_LABEL = {"compute": "compute", "tp_comm": "TP communication", "codec": "exposed codec",
              "pp_comm": "PP transfers", "pp_bubble": "pipeline bubble",
              "dp_comm": "DP communication", "optimizer": "optimizer"}
# Parts in greys, warm colours, greens and purple; configurations in blues: no colour means two
# things in one figure.
PART_COLOR = {"compute": "#bdbdbd", "tp_comm": "#e6550d", "codec": "#fdae6b",
              "pp_comm": "#31a354", "pp_bubble": "#a1d99b", "dp_comm": "#756bb1",
              "optimizer": "#636363"}
CONFIG_LABEL = {"compressed": "compressed (as given)", "taco_tp": "taco on TP",
                "taco_3d": "taco on TP + PP + DP", "best": "fastest codec per site",
                "bound": "no-cost codec (bound)"}
CONFIG_COLOR = {"compressed": "#3182bd", "taco_tp": "#9ecae1", "taco_3d": "#4292c6",
                "best": "#08306b", "bound": "#ffffff"}
CONFIG_HATCH = {"bound": "////"}


def _configs(preds):
    """Result names other than plain, in a fixed order (known ones first)."""
    names = list(dict.fromkeys(k for p in preds for k in p["results"] if k != "plain"))
    order = [k for k in CONFIG_LABEL if k in names]
    return order + [k for k in names if k not in order]


def make_predictions(path: str, doc: dict, name: str) -> figkit.FigureOut:
    preds = doc["predictions"]
    models = list(dict.fromkeys(p["model"]["name"] for p in preds))
    configs = _configs(preds)
    ncols = len(models)
    fig, axes = style.figure(style.FULL_WIDTH if ncols > 1 else style.COLUMN_WIDTH, 4.6, 2, ncols,
                             sharey="row")
    out = figkit.FigureOut(name=name, fig=fig, title="When compression pays: predicted step-time "
                           "speed-up", caption="", inputs=[path])
    placeholder = any(not p.get("compute_measured", False) for p in preds)
    top_all, crossings = [], []
    for j, model in enumerate(models):
        mine = [p for p in preds if p["model"]["name"] == model]
        labels = [p["label"].split(" ", 1)[-1] if p["label"].startswith(model) else p["label"]
                  for p in mine]
        x = np.arange(len(mine))
        ax, axb = axes[0][j], axes[1][j]
        ax.set_title(f"{model}: speed-up over plain")
        axb.set_title(f"{model}: plain step")
        width = 0.8 / max(1, len(configs))
        for k, cfg in enumerate(configs):
            vals = [float(p["speedup"].get(cfg, math.nan)) for p in mine]
            xs = x - 0.4 + width * (k + 0.5)
            ax.bar(xs, vals, width=width * 0.92, color=CONFIG_COLOR.get(cfg, "#bbbbbb"),
                   edgecolor="#555555", linewidth=0.3, hatch=CONFIG_HATCH.get(cfg))
            top_all += [v for v in vals if math.isfinite(v)]
            out.add_series(ax, CONFIG_LABEL.get(cfg, cfg), len(vals), model=model, config=cfg,
                           scenarios=labels, speedup=vals)
        ax.axhline(1.0, color="#333333", lw=0.7, ls=":")
        ax.axhline(PAPER_CLAIM, color="#b2182b", lw=0.8, ls="--")
        for p, lab in zip(mine, labels):
            for cfg in configs:
                v = float(p["speedup"].get(cfg, math.nan))
                if math.isfinite(v) and v >= PAPER_CLAIM:
                    crossings.append(f"{model} {lab} ({CONFIG_LABEL.get(cfg, cfg)})")
        ax.set_xticks(x)
        ax.set_xticklabels([])
        bottoms = np.zeros(len(mine))
        for part in PARTS:
            share = np.array([p["results"]["plain"]["parts_ms"][part] /
                              p["results"]["plain"]["step_ms"] for p in mine])
            axb.bar(x, share, bottom=bottoms, width=0.7, color=PART_COLOR[part],
                    edgecolor="#555555", linewidth=0.3)
            bottoms += share
            out.add_series(axb, PART_LABEL[part], len(mine), model=model, part=part,
                           scenarios=labels, share=[float(v) for v in share])
        axb.set_ylim(0, 1.0)
        axb.set_xticks(x)
        axb.set_xticklabels(labels, rotation=35, ha="right", fontsize=6)
        axb.set_xlabel("scenario (links of TP, PP, DP)")
        if j == 0:
            ax.set_ylabel("speed-up over plain (×)")
            axb.set_ylabel("share of step time (fraction)")
    hi = max(top_all + [PAPER_CLAIM]) * 1.08
    for j in range(ncols):
        axes[0][j].set_ylim(0, hi)
    handles = [Patch(facecolor=CONFIG_COLOR.get(c, "#bbbbbb"), edgecolor="#555555", lw=0.3,
                     hatch=CONFIG_HATCH.get(c)) for c in configs]
    labels_l = [CONFIG_LABEL.get(c, c) for c in configs]
    handles += [Line2D([], [], color="#b2182b", ls="--", lw=0.8)]
    labels_l += [f"paper's {PAPER_CLAIM}x"]
    handles += [Patch(facecolor=PART_COLOR[p], edgecolor="#555555", lw=0.3) for p in PARTS]
    labels_l += [PART_LABEL[p] for p in PARTS]
    style.legend_below(fig, handles, labels_l, ncol=4)
    meta = doc.get("meta", {})
    out.caption = (
        "Predicted by taco model (docs/step-model.md) from the link tiers of "
        f"{os.path.basename(str(meta.get('links', 'configs/links.json')))}, the codec kernels of "
        f"{os.path.basename(str(meta.get('bench') or '-'))} and the overlap fitted to the measured "
        "compressed all-reduces. Top: step-time speed-up of each compressed configuration over "
        "plain NCCL (dotted: 1x, below it compression loses; dashed: the paper's 1.87x). Bottom: "
        "shares of the plain step. "
        + ("Compute is a PLACEHOLDER (GEMM and attention FLOPs at a stated share of a measured "
           "bf16 rate) until the layer benchmark's H200 record is given. " if placeholder else
           "Compute from the layer benchmark record. ")
        + ("Configurations at or above 1.87x: " + "; ".join(crossings) + "."
           if crossings else "No configuration reaches 1.87x.")
        + f" Source: {os.path.basename(path)}.")
    out.extra["placeholder_compute"] = placeholder
    out.extra["reach_paper_claim"] = crossings
    out.extra["meta"] = {k: meta.get(k) for k in ("mode", "links", "bench", "layer", "taco_version",
                                                   "git_commit", "date")}
    return out


def make_validation(path: str, doc: dict, name: str) -> figkit.FigureOut:
    val = doc["validation"]
    rows = val["rows"]
    fig, axes = style.figure(style.COLUMN_WIDTH, 3.4)
    ax = axes[0][0]
    ax.set_title("model against measurement")
    out = figkit.FigureOut(name=name, fig=fig, title="Step-time model: prediction against "
                           "measurement", caption="", inputs=[path])
    groups = list(dict.fromkeys((r["kind"], r["transport"]) for r in rows))
    kinds = list(dict.fromkeys(k for k, _t in groups))
    markers = ["o", "s", "^", "D", "v", "P", "X", "*"]
    allv, handles, labels = [], [], []
    for kind, tr in groups:
        sub = [r for r in rows if r["kind"] == kind and r["transport"] == tr]
        m = [float(r["measured_us"]) for r in sub]
        p = [float(r["predicted_us"]) for r in sub]
        allv += m + p
        color = style.transport_color(tr)
        mk = markers[kinds.index(kind) % len(markers)]
        face = "white" if "plain" in kind else color   # open markers: in-sample fits
        ax.plot(m, p, ls="none", marker=mk, ms=3.2, color=color, mfc=face, mew=0.8)
        errs = [pp / mm - 1 for pp, mm in zip(p, m)]
        within = sum(abs(e) <= 0.10 for e in errs)
        label = f"{kind}, {tr}: {within}/{len(sub)} within 10%"
        handles.append(Line2D([], [], ls="none", marker=mk, ms=3.2, color=color, mfc=face))
        labels.append(label)
        out.add_series(ax, label, len(sub), kind=kind, transport=tr, within_10pct=within,
                       max_abs_err=max(abs(e) for e in errs))
    lo, hi = min(allv) / 1.5, max(allv) * 1.5
    xs = np.geomspace(lo, hi, 50)
    ax.plot(xs, xs, color="#333333", lw=0.7)
    ax.fill_between(xs, xs * 0.9, xs * 1.1, color="#cccccc", alpha=0.5, lw=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured time (us)")
    ax.set_ylabel("predicted time (us)")
    style.legend_below(fig, handles, labels, ncol=1)
    ex = val.get("executor", {})
    out.caption = (
        "Every measured configuration of the records given to taco model --validate: predicted "
        "against measured time, log-log; the line is equality and the band +-10%. Open markers: "
        "plain collectives (their curve is fitted to these rows, so their error is in-sample); "
        "filled: compressed collectives and layer rows (predicted from the plain fit, the codec "
        f"kernels' GB/s and an overlap efficiency of {float(ex.get('overlap_efficiency', math.nan)):.2f}"
        "). The summary and the leave-one-out errors are in the JSON. "
        f"Source: {os.path.basename(path)}.")
    out.extra["summary"] = val.get("summary", [])
    out.extra["executor"] = ex
    return out


def make(rd: results.ResultsDir) -> list[figkit.FigureOut]:
    runs = rd.model_runs()
    outs = []
    with_pred = [(p, d) for p, d in runs if d["predictions"]]
    with_val = [(p, d) for p, d in runs if d.get("validation")]
    if not with_pred and not with_val:
        raise results.InputMissing("taco model JSON without predictions or validation rows")
    outs += figkit.per_run(with_pred, "step_model", make_predictions)
    outs += figkit.per_run(with_val, "model_validation", make_validation)
    return outs


if __name__ == "__main__":
    sys.exit(figkit.main(make, __doc__))
