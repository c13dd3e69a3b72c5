"""One-command report: every figure the results directory can feed, and an index.html.

usage: python3 analysis/report.py RESULTS_DIR OUT_DIR [--quiet]
       (normally run through `taco report RESULTS_DIR [--out DIR]`)

Runs every figure script of analysis/ (fig_*.py, in a fixed order) on RESULTS_DIR, which
holds the outputs of `taco study --out` (results.csv/json, collectives.csv, histograms.csv,
selection.json) and any `taco bench --json` / `taco comm --json` / `taco model --json` files.
Writes
  OUT_DIR/figures/NAME.png, NAME.pdf, NAME.json   per figure (JSON: what was drawn)
  OUT_DIR/report.json                             figures, skipped ones, provenance
  OUT_DIR/index.html                              figures with captions and provenance
A figure whose input is absent is skipped and listed as such. A malformed input stops the
report: one line on stderr ("report: error: ..."), exit 2, and nothing in OUT_DIR changes.
Everything is first written to a temporary directory inside OUT_DIR and moved into place
afterwards, index.html last, so a failed report never leaves a half-written index.html.
On success the path of index.html is the only line on stdout; progress goes to stderr.
"""
from __future__ import annotations

import datetime
import glob
import html
import importlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

import matplotlib

import figkit
import results
import style

HERE = os.path.dirname(os.path.abspath(__file__))
ORDER = ["fig_histograms", "fig_error_variants", "fig_pareto", "fig_error_groupsize",
         "fig_hadamard", "fig_error_collectives", "fig_codec_throughput", "fig_collectives",
         "fig_step_model"]


def figure_modules() -> list[str]:
    found = sorted(os.path.splitext(os.path.basename(p))[0]
                   for p in glob.glob(os.path.join(HERE, "fig_*.py")))
    return [m for m in ORDER if m in found] + [m for m in found if m not in ORDER]


def _git_commit(path: str) -> str | None:
    try:
        r = subprocess.run(["git", "-C", path, "rev-parse", "--short=12", "HEAD"],
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


class Failed(Exception):
    pass


def build(results_dir: str, stage: str, log) -> dict:
    """Draws every figure into stage/figures; returns the report record. Raises
    results.InputInvalid on malformed input."""
    rd = results.ResultsDir(results_dir)
    rd.check()
    figdir = os.path.join(stage, "figures")
    os.makedirs(figdir)
    figures, skipped = [], []
    for modname in figure_modules():
        mod = importlib.import_module(modname)
        try:
            outs = mod.make(rd)
        except results.InputMissing as e:
            skipped.append({"script": modname + ".py", "reason": str(e)})
            log(f"skipped {modname}.py: {e}")
            continue
        try:
            for o in outs:
                files = figkit.save(o, figdir)
                record = figkit.describe(o)
                record["script"] = modname + ".py"
                record["files"] = {os.path.splitext(f)[1][1:]: "figures/" + os.path.basename(f)
                                   for f in files}
                figures.append(record)
                log(f"wrote figures/{o.name}.png, .pdf ({modname}.py)")
        finally:
            figkit.close(outs)
    record = {
        "results_dir": os.path.abspath(results_dir),
        "figures": figures,
        "skipped": skipped,
        "provenance": provenance(rd),
    }
    try:
        record["selection"] = rd.selection()
    except results.InputMissing:
        record["selection"] = None
    record["provenance"]["inputs_read"] = rd.provenance_of_used()
    return record


def provenance(rd: results.ResultsDir) -> dict:
    prov: dict = {"study": rd.study_provenance()}
    for kind, getter in (("bench", rd.bench_runs), ("comm", rd.comm_runs), ("model", rd.model_runs)):
        try:
            prov[kind] = [{"file": os.path.basename(p), "meta": d.get("meta", {})}
                          for p, d in getter()]
        except results.InputMissing:
            prov[kind] = []
    prov["report"] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "tool": os.environ.get("TACO_REPORT_TOOL") or "analysis/report.py",
        "analysis_dir": HERE,
        "analysis_commit": _git_commit(HERE),
        "python": platform.python_version(),
        "matplotlib": matplotlib.__version__,
    }
    return prov


# ---- HTML ---------------------------------------------------------------------------------
CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
figure { margin: 1em 0 2em 0; } figure img { display: block; border: 1px solid #eee; }
figcaption { font-size: 0.92em; max-width: 760px; margin-top: 0.5em; }
table { border-collapse: collapse; font-size: 0.88em; margin: 0.6em 0; }
td, th { border: 1px solid #ddd; padding: 2px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } code { font-size: 0.92em; } .muted { color: #777; }
"""


def _e(x) -> str:
    return html.escape("" if x is None else str(x))


def _kv_table(d: dict) -> str:
    rows = []
    for k, v in d.items():
        if isinstance(v, (dict, list)):
            v = json.dumps(v)
        rows.append(f"<tr><th>{_e(k)}</th><td><code>{_e(v)}</code></td></tr>")
    return "<table>" + "".join(rows) + "</table>"


def _table(columns, rows) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def render_html(rec: dict) -> str:
    p = rec["provenance"]
    parts = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
             f"<title>taco report: {_e(os.path.basename(rec['results_dir']))}</title>"
             f"<style>{CSS}</style></head><body>",
             f"<h1>taco report</h1><p>Results directory: <code>{_e(rec['results_dir'])}</code>"
             f"<br>Generated {_e(p['report']['date'])} by {_e(p['report']['tool'])}.</p>"]
    gpu = [b["meta"].get("gpu") for b in p.get("bench", []) + p.get("comm", [])
           if b["meta"].get("gpu")]
    study = p.get("study") or {}
    summary = [("figures", str(len(rec["figures"]))), ("skipped", str(len(rec["skipped"])))]
    if study:
        summary += [("taco version", study.get("taco_version")),
                    ("commit", study.get("git_commit"))]
    if gpu:
        summary.append(("GPU", ", ".join(dict.fromkeys(gpu))))
    parts.append(_table([k for k, _ in summary], [[v for _, v in summary]]))
    parts.append("<h2>Contents</h2><ol>")
    for f in rec["figures"]:
        parts.append(f"<li><a href=\"#{_e(f['name'])}\">{_e(f['title'])}</a></li>")
    parts.append("</ol>")
    if rec["skipped"]:
        parts.append("<p>Skipped (input not in the results directory):</p><ul>")
        for s in rec["skipped"]:
            parts.append(f"<li><code>{_e(s['script'])}</code>: {_e(s['reason'])}</li>")
        parts.append("</ul>")
    for f in rec["figures"]:
        w_px = int(round(f["size_in"][0] * 110))
        files = f["files"]
        parts.append(f"<h2 id=\"{_e(f['name'])}\">{_e(f['title'])}</h2><figure>"
                     f"<img src=\"{_e(files['png'])}\" style=\"width:{w_px}px;max-width:100%\" "
                     f"alt=\"{_e(f['title'])}\"><figcaption>{_e(f['caption'])} "
                     f"<span class=\"muted\">[<a href=\"{_e(files['pdf'])}\">PDF</a> · "
                     f"<a href=\"{_e(files['png'])}\">PNG</a> · "
                     f"<a href=\"{_e(files['json'])}\">series</a> · "
                     f"drawn by <code>analysis/{_e(f['script'])}</code>]</span>"
                     f"</figcaption></figure>")
        table = (f.get("extra") or {}).get("table")
        if table:
            parts.append(_table(table["columns"], table["rows"]))
    sel = rec.get("selection")
    if sel:
        parts.append("<h2 id=\"selection\">Selected variant per site</h2>")
        parts.append(f"<p>From <code>selection.json</code>, budget "
                     f"{_e(sel.get('budget_bytes_per_elem'))} bytes per element.</p>")
        rows = []
        for c in sel["choices"]:
            he = c.get("hadamard_effect") or {}
            rows.append([c.get("site"), c.get("direction"), c.get("variant"),
                         _fmt(c.get("rel_l2")), _fmt_bytes(c.get("bytes_per_elem")),
                         _fmt(he.get("ratio"))])
        parts.append(_table(["site", "direction", "variant", "rel_l2", "bytes/elem",
                             "H ratio (with/without)"], rows))
    parts.append("<h2 id=\"provenance\">Provenance</h2>")
    if study:
        parts.append("<h3>Study (results.json)</h3>")
        parts.append(_kv_table({k: v for k, v in study.items() if k != "inputs"}))
        if study.get("inputs"):
            parts.append(_table(["input", "sha256", "bytes"],
                                [[i.get("path"), i.get("sha256"), i.get("bytes")]
                                 for i in study["inputs"]]))
    for kind, label in (("bench", "Codec benchmark"), ("comm", "Collective benchmark"),
                        ("model", "Step-time model")):
        for b in p.get(kind, []):
            parts.append(f"<h3>{label} ({_e(b['file'])})</h3>")
            parts.append(_kv_table(b["meta"]))
    parts.append("<h3>Files read for this report</h3>")
    parts.append(_table(["file", "read as", "bytes", "sha256"],
                        [[os.path.basename(i["path"]), i["kind"], i["bytes"], i["sha256"]]
                         for i in p["inputs_read"]]))
    parts.append("<h3>Report</h3>")
    parts.append(_kv_table(p["report"]))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _fmt_bytes(v) -> str:
    if isinstance(v, (int, float)):
        return f"{v:.8g}"
    return "" if v is None else str(v)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


# ---- main -----------------------------------------------------------------------------------
def publish(stage: str, out_dir: str) -> None:
    """Moves the staged files into out_dir (figures first, index.html last) and removes
    figure files that the previous report made and this one did not."""
    figdir = os.path.join(out_dir, "figures")
    os.makedirs(figdir, exist_ok=True)
    old = set()
    try:
        with open(os.path.join(out_dir, "report.json"), encoding="utf-8") as f:
            for fig in json.load(f).get("figures", []):
                old.update(fig.get("files", {}).values())
    except (OSError, ValueError, AttributeError):
        pass
    new = set()
    for name in sorted(os.listdir(os.path.join(stage, "figures"))):
        os.replace(os.path.join(stage, "figures", name), os.path.join(figdir, name))
        new.add("figures/" + name)
    os.replace(os.path.join(stage, "report.json"), os.path.join(out_dir, "report.json"))
    os.replace(os.path.join(stage, "index.html"), os.path.join(out_dir, "index.html"))
    for rel in old - new:
        p = os.path.join(out_dir, rel)
        if os.path.dirname(rel) == "figures" and os.path.isfile(p):
            os.unlink(p)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip())
        return 0
    quiet = "--quiet" in argv
    args = [a for a in argv if a != "--quiet"]
    if len(args) != 2 or any(a.startswith("-") for a in args):
        print("report: error: expected RESULTS_DIR OUT_DIR [--quiet] (see --help)",
              file=sys.stderr)
        return 2
    results_dir, out_dir = args

    def log(msg: str) -> None:
        if not quiet:
            print("report: " + msg, file=sys.stderr)

    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        print(f"report: error: output '{out_dir}' exists and is not a directory", file=sys.stderr)
        return 2
    if not os.path.isdir(results_dir):
        what = "is not a directory" if os.path.exists(results_dir) else "does not exist"
        print(f"report: error: RESULTS_DIR '{results_dir}' {what}", file=sys.stderr)
        return 2
    created = not os.path.exists(out_dir)
    try:
        os.makedirs(out_dir, exist_ok=True)
        stage = tempfile.mkdtemp(prefix=".report-tmp-", dir=out_dir)
    except OSError as e:
        print(f"report: error: cannot create '{out_dir}' ({e.strerror})", file=sys.stderr)
        return 2
    try:
        style.check_environment()
        rec = build(results_dir, stage, log)
        if not rec["figures"]:
            log("no figure could be drawn: the directory holds no taco result file")
        with open(os.path.join(stage, "report.json"), "w", encoding="utf-8") as f:
            json.dump(figkit._jsonable(rec), f, indent=1)
            f.write("\n")
        with open(os.path.join(stage, "index.html"), "w", encoding="utf-8") as f:
            f.write(render_html(rec))
        publish(stage, out_dir)
        ok = True
    except results.InputInvalid as e:
        print(f"report: error: {e}", file=sys.stderr)
        return 2
    except style.EnvironmentTooOld as e:
        print(f"report: {e}", file=sys.stderr)     # not "error:": taco maps it to exit 1
        return 1
    except OSError as e:
        print(f"report: error: cannot write into '{out_dir}' ({e.strerror or e})",
              file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if created and not locals().get("ok"):
            try:
                os.rmdir(out_dir)        # we made it and it is empty again
            except OSError:
                pass
    print(os.path.join(out_dir, "index.html"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
