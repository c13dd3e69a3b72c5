"""Shared look of every taco figure: fonts, sizes, colours, FP8 ranges, axis helpers.

Not a script. The figure scripts call apply() once, size figures with COLUMN_WIDTH or
FULL_WIDTH (inches, two-column paper layout), and take every colour from here so that one
variant (or transport, site, scope) has the same colour in every figure of every report:

    import style
    style.apply()
    fig, ax = style.figure(style.COLUMN_WIDTH, 2.4)
    facts = rd.variants()                     # results.ResultsDir: results.json "variant_facts"
    ax.plot(x, y, color=style.variant_color(v, facts.get(v)))

Colours are a pure function of the variant (no state, no order of appearance), computed from
what taco says about it (results.json "variant_facts", read with results.ResultsDir.variants();
no variant name is parsed here):
  * the codec presets have hand-picked colours (PRESET_COLORS), distinct inside each family:
    TACO blues, per-group FP8 oranges, MX greens, INT purples, TAH-Quant red, bf16 grey; a
    variant that equals a preset (in any spelling) has the preset's colour;
  * other variants take the hue of their nearest preset (or of their structured family), shaded
    by their group size (g32 darkest .. g512 lightest) and nudged by a hash of their G series;
  * a name taco did not describe (a bench or comm file without a study next to it) has its
    preset colour when it is a preset name, else a hue from a hash of the name.
"""
from __future__ import annotations

import colorsys
import hashlib
import math
import re

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

# Two-column paper layout (IEEE/ACM): one column and the full text width, inches.
COLUMN_WIDTH = 3.5
FULL_WIDTH = 7.16

# FP8 ranges (methods.md section 9): magnitudes, not log2.
E4M3_MAX = 448.0
E4M3_MIN_NORMAL = 2.0 ** -6
E4M3_MIN_SUBNORMAL = 2.0 ** -9
E5M2_MAX = 57344.0
E5M2_MIN_NORMAL = 2.0 ** -14
E5M2_MIN_SUBNORMAL = 2.0 ** -16
FP8_RANGES = {  # name -> (min subnormal, min normal, max normal)
    "E4M3": (E4M3_MIN_SUBNORMAL, E4M3_MIN_NORMAL, E4M3_MAX),
    "E5M2": (E5M2_MIN_SUBNORMAL, E5M2_MIN_NORMAL, E5M2_MAX),
}

_RC = {
    "font.family": "DejaVu Sans",      # ships with matplotlib; TrueType, so Type 42 embeds it
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.title_fontsize": 7,
    "legend.frameon": False,
    "legend.handlelength": 1.8,
    "legend.columnspacing": 1.0,
    "axes.linewidth": 0.6,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.linewidth": 0.4,
    "grid.alpha": 0.35,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "xtick.minor.width": 0.4,
    "ytick.minor.width": 0.4,
    "lines.linewidth": 1.2,
    "lines.markersize": 3.5,
    "mathtext.fontset": "dejavusans",
    "pdf.fonttype": 42,                # TrueType (Type 42) fonts in PDF, never Type 3
    "ps.fonttype": 42,
    "savefig.dpi": 300,
    "figure.dpi": 100,
    # No bbox="tight": constrained layout (with legends placed "outside" by the layout engine)
    # already fits everything inside the figure, so files keep their exact physical size and
    # each save draws once instead of twice.
    "savefig.bbox": None,
    "figure.constrained_layout.use": True,
    "figure.constrained_layout.h_pad": 0.03,
    "figure.constrained_layout.w_pad": 0.03,
}


MIN_MATPLOTLIB = (3, 7)   # legends placed "outside" by the constrained layout engine


class EnvironmentTooOld(RuntimeError):
    """The Python environment cannot draw taco figures (one-line message, exit 1)."""


def check_environment() -> None:
    found = tuple(int(x) for x in re.findall(r"\d+", matplotlib.__version__)[:2])
    if found < MIN_MATPLOTLIB:
        raise EnvironmentTooOld(
            f"matplotlib {'.'.join(map(str, MIN_MATPLOTLIB))} or newer is needed (found "
            f"{matplotlib.__version__}): pip install -r analysis/requirements.txt")


def apply() -> None:
    """Sets the rcParams every taco figure uses (idempotent)."""
    check_environment()
    matplotlib.rcParams.update(_RC)
    matplotlib.rcParams["svg.hashsalt"] = "taco"   # deterministic ids if anyone saves SVG
    matplotlib.rcParams["pdf.compression"] = 6


def figure(width: float, height: float, nrows: int = 1, ncols: int = 1, **kw):
    """plt.subplots with the taco style applied, constrained layout, squeeze=False."""
    apply()
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), squeeze=False, **kw)
    return fig, axes


# ----------------------------------------------------------------------------------------
# Colours
# ----------------------------------------------------------------------------------------
def _digest(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big")


# Hand-picked colours for the codec presets (src/codecs/variant.cpp), distinct inside each
# family: TACO blues (G sweep from dark g32 to light g512; ablations shifted towards violet or
# cyan), per-group FP8 oranges, row/col/tensor FP8 browns, MX greens/teals, INT purples,
# TAH-Quant red, bf16 grey.
PRESET_COLORS = {
    "taco": "#1f5fbf", "taco-g32": "#0a2557", "taco-g64": "#163f8c", "taco-g256": "#5b95e0",
    "taco-g512": "#9ec2f2", "taco-noh": "#6a4fb0", "taco-nosa": "#2aa3c4",
    "taco-e5m2": "#0f6f7f", "taco-rht": "#74d4d4",
    "fp8-g128": "#e6750b", "fp8-g32": "#9c4400", "fp8-g128-had": "#f5b731",
    "fp8-1x128-e8m0": "#c28d00", "fp8-tile128": "#ff9c7a", "fp8-row": "#8c564b",
    "fp8-col": "#c49a80", "fp8-tensor": "#4d2f1a",
    "mxfp8": "#2ca02c", "mxfp8-e5m2": "#93d67e", "mxfp4": "#0b6e4f", "nvfp4": "#5cc4a8",
    "int8-g128": "#7b3294", "int8-g128-had": "#c7a3d9", "int8-g128-asym": "#e7298a",
    "int4-g32": "#3f0057", "int4-g32-had": "#f29bc8",
    "tahquant": "#d62728", "bf16": "#7f7f7f",
}

# Hues of the structured families, which have no colour presets: (hue, saturation) by the
# "family" taco reports.
FAMILY_HUES = {
    "subspace": (0.52, 0.75), "lowrank": (0.52, 0.75), "tt": (0.52, 0.75),   # cyans
    "topk": (0.88, 0.60), "randk": (0.88, 0.60),                             # pinks
    "ef": (0.15, 0.75), "aqsgd": (0.15, 0.75),                               # olive/yellow
}


def _hex_rgb(h: str) -> tuple[float, float, float]:
    return tuple(int(h[i:i + 2], 16) / 255.0 for i in (1, 3, 5))


def _hashed_color(key: str) -> tuple[float, float, float]:
    return colorsys.hls_to_rgb((_digest(key) % 9973) / 9973.0, 0.45, 0.65)


def variant_color(name: str, facts: dict | None = None) -> tuple[float, float, float]:
    """The colour of a variant in every figure (RGB in [0,1]), from its facts (a
    results.VariantTable entry: `style.variant_color(v, rd.variants().get(v))`).

    A variant equal to a preset of PRESET_COLORS has that colour. Any other variant takes the
    hue of its nearest preset (or of its structured family, FAMILY_HUES), a lightness shifted
    by 0.09 per doubling of its group size against the nearest preset's (smaller groups
    darker), and, unless it belongs to that preset's G sweep, a small nudge of hue and lightness
    from a hash of its series name. Without facts: the preset colour of a preset name, else a
    hue hashed from the name."""
    if facts is None:
        if name in PRESET_COLORS:
            return _hex_rgb(PRESET_COLORS[name])
        return _hashed_color(name)
    if facts["preset"] in PRESET_COLORS:
        return _hex_rgb(PRESET_COLORS[facts["preset"]])
    nearest = facts["nearest_preset"]
    if nearest in PRESET_COLORS:
        hue, light, sat = colorsys.rgb_to_hls(*_hex_rgb(PRESET_COLORS[nearest]))
        base_g = facts["nearest_preset_group_size"] or 128
    elif facts["family"] in FAMILY_HUES:
        hue, sat = FAMILY_HUES[facts["family"]]
        light, base_g = 0.45, 128
    else:   # a family without a hue: one from the hash
        return _hashed_color(facts["canonical"])
    g = facts["group_size"]
    if g:
        light += 0.09 * (math.log2(g) - math.log2(base_g))
    light = min(0.85, max(0.15, light))
    series = facts["group_series"] or facts["canonical"]
    if series != nearest:
        hr = _digest(series)
        hue = (hue + 0.05 * (((hr >> 8) % 1000) / 1000.0 - 0.5)) % 1.0
        light = min(0.85, max(0.15, light + 0.12 * (((hr >> 20) % 5) / 4.0 - 0.5)))
    if sat < 0.05:
        return colorsys.hls_to_rgb(0, light, 0)
    return colorsys.hls_to_rgb(hue, light, sat)


def series_color(facts: dict) -> tuple[float, float, float]:
    """The colour of the group-size series a variant belongs to (its facts' group_series): the
    preset's colour when the series is named after a coloured preset, else the variant's colour
    without the shading by group size (what every member of the series shares)."""
    name = facts["group_series"]
    if name in PRESET_COLORS:
        return _hex_rgb(PRESET_COLORS[name])
    return variant_color(name, dict(facts, canonical=name, preset=None, group_size=None))


_TRANSPORT_COLORS = {
    "nvlink": "#1b6ca8", "p2p": "#1b6ca8", "nvls": "#3b8fd1",
    "shm": "#d1495b", "shared_memory": "#d1495b",
    "socket": "#2e933c", "net": "#2e933c", "ib": "#7b4fa0", "pcie": "#c77d1b",
}


def transport_color(name: str):
    """Fixed colours for the usual NCCL transports, a hashed hue for any other."""
    c = _TRANSPORT_COLORS.get(name.lower())
    if c is not None:
        return c
    hue = (_digest(name.lower()) % 997) / 997.0
    return colorsys.hls_to_rgb(hue, 0.42, 0.7)


SCOPE_STYLE = {  # histograms.csv scopes
    "raw": dict(color="#555555", ls="-"),
    "tensor": dict(color="#c0392b", ls="-"),
}


def scope_color(scope: str):
    if scope in SCOPE_STYLE:
        return SCOPE_STYLE[scope]["color"]
    g = int(scope[5:]) if scope.startswith("group") and scope[5:].isdigit() else 0
    if g > 0:  # group32 .. group512: blues, darker for smaller groups
        return colorsys.hls_to_rgb(0.60, 0.25 + 0.06 * min(max(math.log2(g) - 5, 0), 4), 0.75)
    return colorsys.hls_to_rgb((_digest(scope) % 997) / 997.0, 0.4, 0.6)


SITE_ORDER = ["attn_out", "mlp_out", "attn_qkv", "mlp_fc1"]
DIRECTION_ORDER = ["fwd", "bwd"]
_SITE_COLORS = {"attn_out": "#1f77b4", "mlp_out": "#d62728", "attn_qkv": "#2ca02c",
                "mlp_fc1": "#9467bd"}


def site_color(site: str):
    c = _SITE_COLORS.get(site)
    if c is not None:
        return c
    return colorsys.hls_to_rgb((_digest(site) % 997) / 997.0, 0.4, 0.6)


def site_key(site: str, direction: str):
    """Sort key: the usual Megatron sites first (in forward order), then anything else."""
    si = SITE_ORDER.index(site) if site in SITE_ORDER else len(SITE_ORDER)
    di = DIRECTION_ORDER.index(direction) if direction in DIRECTION_ORDER else 2
    return (di, si, site, direction)


def site_label(site: str, direction: str) -> str:
    return f"{site} ({direction})" if direction else site


# Marker and line style per collective algorithm and per kernel implementation.
ALGORITHM_MARKERS = {"one_shot": "o", "two_shot": "s", "ring": "^", "all_gather": "D",
                     "reduce_scatter": "v", "auto": "P", "nccl": "x"}
IMPL_LINESTYLES = {"fused": "-", "unfused": "--"}


def algorithm_marker(alg: str) -> str:
    return ALGORITHM_MARKERS.get(alg, "*")


# ----------------------------------------------------------------------------------------
# Axes helpers
# ----------------------------------------------------------------------------------------
def format_bytes(b: float) -> str:
    """1024 -> '1 KiB', 3*2**20 -> '3 MiB' (binary prefixes; never mixed with GB)."""
    if b <= 0 or not math.isfinite(b):
        return str(b)
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if b >= scale:
            v = b / scale
            return f"{v:.0f} {unit}" if abs(v - round(v)) < 1e-9 else f"{v:.3g} {unit}"
    return f"{b:.0f} B"


def _pow2_ticks(lo: float, hi: float, max_ticks: int) -> list[float]:
    e0, e1 = math.floor(math.log2(lo)), math.ceil(math.log2(hi))
    step = 1
    while (e1 - e0) // step + 1 > max_ticks:
        step *= 2
    start = int(math.ceil(e0 / step) * step)
    return [2.0 ** e for e in range(start, e1 + 1, step) if lo <= 2.0 ** e <= hi]


def bytes_axis(ax, values, max_ticks: int = 6, axis: str = "x") -> None:
    """Log2 axis for message sizes with ticks at powers of two labelled in KiB/MiB/GiB."""
    vals = [v for v in values if v > 0 and math.isfinite(v)]
    lo, hi = min(vals), max(vals)
    a = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    ticks = _pow2_ticks(lo, hi, max_ticks) or [lo]
    a.set_major_locator(FixedLocator(ticks))
    a.set_major_formatter(FuncFormatter(lambda v, _pos: format_bytes(v)))
    a.set_minor_locator(NullLocator())
    pad = 2 ** 0.25
    (ax.set_xlim if axis == "x" else ax.set_ylim)(lo / pad, hi * pad)


def log2_axis(ax, lo: float, hi: float, max_ticks: int = 8, axis: str = "x") -> None:
    """Log2 axis with ticks labelled 2^k (for magnitudes on the FP8 exponent grid)."""
    a = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    ticks = _pow2_ticks(lo, hi, max_ticks)
    a.set_major_locator(FixedLocator(ticks))
    a.set_major_formatter(FuncFormatter(lambda v, _pos: f"$2^{{{round(math.log2(v))}}}$"))
    a.set_minor_locator(NullLocator())
    (ax.set_xlim if axis == "x" else ax.set_ylim)(lo, hi)


LEGEND_ROOM_IN = 0.5   # what figure heights below reserve for a figure legend (3 rows)


def legend_columns_that_fit(fig, labels, fontsize: float | None = None) -> int:
    """How many legend columns of these labels fit the figure's width (DejaVu Sans averages
    about 0.6 em per character; each column also holds a handle and padding)."""
    fs = fontsize or matplotlib.rcParams["legend.fontsize"]
    if isinstance(fs, str):
        fs = 7.0
    char_in = 0.6 * fs / 72.0
    col_in = max(len(str(l)) for l in labels) * char_in + 0.45
    return max(1, int((fig.get_size_inches()[0] - 0.1) // col_in))


def legend_below(fig, handles, labels, ncol: int | None = None, title: str | None = None):
    """A figure legend under the axes (outside them, so it never covers data). ncol is reduced
    when the labels would not fit the figure's width."""
    if not handles:
        return None
    if ncol is None:
        ncol = 3
    ncol = max(1, min(ncol, len(labels), legend_columns_that_fit(fig, labels)))
    # Figure heights leave room for about three legend rows; a longer legend makes the figure
    # taller instead of squeezing the axes.
    rows = -(-len(labels) // ncol)
    fs = matplotlib.rcParams["legend.fontsize"]
    row_in = 1.35 * (fs if not isinstance(fs, str) else 7.0) / 72.0
    extra = rows * row_in + 0.1 - LEGEND_ROOM_IN
    if extra > 0:
        w, h = fig.get_size_inches()
        fig.set_size_inches(w, h + extra)
    return fig.legend(handles, labels, loc="outside lower center", ncol=ncol, title=title)


def legend_right(fig, handles, labels, title: str | None = None):
    """A figure legend right of the axes (outside them)."""
    if not handles:
        return None
    return fig.legend(handles, labels, loc="outside right upper", title=title)


def decade_ticks(ax, lo: float, hi: float, axis: str = "y") -> None:
    """Major ticks at the powers of ten in [lo, hi] only (e.g. fractions up to 1, leaving the
    headroom above unlabelled), at most 6 of them."""
    from matplotlib.ticker import LogFormatterSciNotation
    e0, e1 = math.ceil(math.log10(lo) - 1e-9), math.floor(math.log10(hi) + 1e-9)
    step = max(1, math.ceil((e1 - e0 + 1) / 6))
    ticks = [10.0 ** e for e in range(e1, e0 - 1, -step)][::-1]
    a = ax.yaxis if axis == "y" else ax.xaxis
    a.set_major_locator(FixedLocator(ticks))
    a.set_major_formatter(LogFormatterSciNotation())
    a.set_minor_locator(NullLocator())


def plain_log_ticks(ax, lo: float, hi: float, axis: str = "y") -> None:
    """Log axis with major ticks on the 1-2-5 sequence labelled as plain numbers (GB/s,
    speed-ups), no minor labels. Thinned to 1-10 per decade when the range is wide."""
    e0, e1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mult = (1, 2, 5) if e1 - e0 <= 3 else (1,)
    ticks = [m * 10.0 ** e for e in range(e0, e1 + 1) for m in mult if lo <= m * 10.0 ** e <= hi]
    a = ax.yaxis if axis == "y" else ax.xaxis
    a.set_major_locator(FixedLocator(ticks))
    a.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    a.set_minor_locator(NullLocator())


# ----------------------------------------------------------------------------------------
# Numbers as the terminal prints them, and exact (zero-error) values on log axes
# ----------------------------------------------------------------------------------------
def bytes_text(b: float) -> str:
    """Wire bytes per element as `taco study` prints them (5 significant digits): 1.0625,
    1.0312, 0.56252, 2."""
    return f"{b:.5g}"


ZERO_MARKER = "v"   # an exact (zero-error) value, drawn on the bottom edge of a log axis


def zero_floor(values) -> float:
    """Where zero values sit on a log axis: a third of the smallest positive value (1e-6 when
    there is none). Set the axis' lower limit to it and draw zeros there with ZERO_MARKER."""
    pos = [float(v) for v in values if v > 0 and math.isfinite(v)]
    return min(pos) / 3 if pos else 1e-6


def mark_zeros(ax, xs, floor: float, colors, size: float = 18) -> None:
    """Exact values at x: a downward triangle on the axis floor, not clipped, so that a
    lossless variant is shown rather than dropped off the log axis."""
    if len(xs) == 0:
        return
    ax.scatter(xs, [floor] * len(xs), marker=ZERO_MARKER, s=size, c=colors, edgecolors="black",
               linewidths=0.4, zorder=4, clip_on=False)
