"""What every figure script shares: the figure record, atomic saving, the command line.

Not a script. A figure script defines

    def make(rd: results.ResultsDir) -> list[figkit.FigureOut]: ...
    if __name__ == "__main__":
        sys.exit(figkit.main(make, __doc__))

make() raises results.InputMissing when its input is absent (the figure is skipped) and
results.InputInvalid when the input is malformed (exit 2). Each FigureOut is written as
NAME.png (300 dpi), NAME.pdf (Type 42 fonts) and NAME.json, a sidecar that lists what was
drawn: per panel the axis labels and scales, and every series with its label and number of
points (tests and the report read it; nothing else does).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import tempfile
from typing import Callable

import results
import style  # noqa: I100  (first: selects the Agg backend before pyplot loads)

import matplotlib.pyplot as plt  # noqa: E402


@dataclasses.dataclass
class FigureOut:
    name: str                     # file stem: NAME.png, NAME.pdf, NAME.json
    fig: object                   # matplotlib Figure
    title: str                    # one line, for the report's heading
    caption: str                  # what is plotted, from which file, how aggregated
    inputs: list                  # paths of the files the figure was drawn from
    series: list = dataclasses.field(default_factory=list)   # see add_series
    extra: dict = dataclasses.field(default_factory=dict)    # figure-specific facts

    def add_series(self, ax, label: str, n: int, **facts) -> None:
        """Records one drawn series (line, bar set, heat-map row...) on axes `ax`."""
        self.series.append({"panel": panel_id(ax), "label": label, "n": int(n), **facts})


def panel_id(ax) -> str:
    t = ax.get_title()
    return t if t else f"axes{ax.figure.axes.index(ax)}"


def describe(out: FigureOut) -> dict:
    """The sidecar: panels (labels, scales, limits), series, and extra facts."""
    panels = []
    for ax in out.fig.axes:
        if not ax.get_visible() or getattr(ax, "_taco_decor", False):
            continue
        panels.append({
            "id": panel_id(ax), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
            "xscale": ax.get_xscale(), "yscale": ax.get_yscale(),
            "xlim": [_num(v) for v in ax.get_xlim()], "ylim": [_num(v) for v in ax.get_ylim()],
        })
    legends = []
    for leg in out.fig.legends + [a.get_legend() for a in out.fig.axes if a.get_legend()]:
        legends.append([t.get_text() for t in leg.get_texts()])
    w, h = out.fig.get_size_inches()
    return {"name": out.name, "title": out.title, "caption": out.caption,
            "inputs": list(out.inputs), "size_in": [round(float(w), 3), round(float(h), 3)],
            "panels": panels, "series": out.series, "legends": legends,
            "extra": _jsonable(out.extra)}


def _num(v):
    v = float(v)
    return v if math.isfinite(v) else None


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if hasattr(obj, "item"):                    # numpy scalar
        return _jsonable(obj.item())
    return obj


def _replace_atomically(write: Callable[[str], None], path: str) -> None:
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=d)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save(out: FigureOut, out_dir: str) -> list[str]:
    """Writes NAME.png, NAME.pdf and NAME.json into out_dir, each via temp file + rename."""
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, out.name)
    meta = {"Creator": "taco analysis", "Title": out.title}
    pdf_meta = dict(meta, CreationDate=None, ModDate=None)   # reproducible PDFs
    _replace_atomically(lambda t: out.fig.savefig(t, format="png", metadata={
        "Software": "taco analysis", "Title": out.title}), stem + ".png")
    _replace_atomically(lambda t: out.fig.savefig(t, format="pdf", metadata=pdf_meta),
                        stem + ".pdf")

    def write_json(t: str) -> None:
        with open(t, "w", encoding="utf-8") as f:
            json.dump(describe(out), f, indent=1, sort_keys=False)
            f.write("\n")
    _replace_atomically(write_json, stem + ".json")
    return [stem + ".png", stem + ".pdf", stem + ".json"]


def close(outs: list[FigureOut]) -> None:
    for o in outs:
        plt.close(o.fig)


def per_run(runs, base: str, make_one) -> list[FigureOut]:
    """One figure per (path, doc) run: named `base` when there is one run, `base_<file stem>`
    otherwise."""
    outs = []
    for path, doc in runs:
        stem = os.path.splitext(os.path.basename(path))[0]
        outs.append(make_one(path, doc, base if len(runs) == 1 else f"{base}_{stem}"))
    return outs


def main(make: Callable[[results.ResultsDir], list[FigureOut]], doc: str | None,
         argv: list[str] | None = None) -> int:
    """Command line of every figure script: SCRIPT RESULTS_DIR OUT_DIR.
    Exit 0 (written, or skipped because the input is absent), 2 (bad arguments or input)."""
    argv = sys.argv[1:] if argv is None else argv
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "figure"
    if any(a in ("-h", "--help") for a in argv):
        print((doc or "").strip())
        return 0
    if len(argv) != 2:
        print(f"{prog}: error: expected RESULTS_DIR OUT_DIR (see --help)", file=sys.stderr)
        return 2
    results_dir, out_dir = argv
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        print(f"{prog}: error: OUT_DIR '{out_dir}' exists and is not a directory",
              file=sys.stderr)
        return 2
    try:
        style.check_environment()
        rd = results.ResultsDir(results_dir)
        outs = make(rd)
    except style.EnvironmentTooOld as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    except results.InputMissing as e:
        print(f"{prog}: skipped: {e}", file=sys.stderr)
        return 0
    except results.InputInvalid as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    try:
        for o in outs:
            for p in save(o, out_dir):
                print(p)
    except OSError as e:
        print(f"{prog}: error: cannot write to '{out_dir}' ({e.strerror})", file=sys.stderr)
        return 2
    finally:
        close(outs)
    return 0


def mark_decor(ax) -> None:
    """Flags an axes as decoration (e.g. the FP8 range strip): not listed as a data panel."""
    ax._taco_decor = True
