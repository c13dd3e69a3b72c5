"""What `taco study` prints and what `taco report` draws from the same run agree: the same
statistic (medians over a site's tensors), the same numbers, zero-error rows shown, no empty
panels (issue 30, item 4)."""
import json
import re
import subprocess
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "traces" / "samples" / "gpt6l512-tp2-step000030.h5"
VARIANTS = "taco,taco-noh,fp8-g128,fp8-g128-had,bf16"


def run(taco, *args):
    return subprocess.run([str(taco), *map(str, args)], capture_output=True, text=True, timeout=600)


def parse_summary(text):
    """{(site, direction): {variant: (bytes, median rel_l2)}}, [(with, without, ratio)] per site,
    and {(variant, algorithm, tp): median rel_l2} from the printed summary."""
    sites, hadamard, coll = {}, {}, {}
    key = None
    in_coll = False
    for line in text.splitlines():
        m = re.match(r"site=(\S+) direction=(\S+)$", line)
        if m:
            key, in_coll = (m.group(1), m.group(2)), False
            sites[key] = {}
            continue
        if line.startswith("simulated collectives"):
            in_coll = True
            continue
        m = re.match(r"\s+\d+\s+(\S+)\s+([\d.]+)\s+([\d.e+-]+)\s+([\d.e+-]+)\s+", line)
        if m and key and not in_coll:
            sites[key][m.group(1)] = (float(m.group(2)), float(m.group(3)))
            continue
        m = re.match(r"\s+Hadamard: (\S+) vs (\S+): .* ratio ([\d.]+)", line)
        if m and key:
            hadamard[(key, m.group(1), m.group(2))] = float(m.group(3))
            continue
        m = re.match(r"\s+(\S+)\s+(one_shot|two_shot|ring)\s+(\d+)\s+\d+\s+([\d.e+-]+)\s+\d+$", line)
        if m and in_coll:
            coll[(m.group(1), m.group(2), int(m.group(3)))] = float(m.group(4))
    return sites, hadamard, coll


@pytest.fixture(scope="module")
def study_and_report(taco, tmp_path_factory):
    out = tmp_path_factory.mktemp("agree") / "st"
    r = run(taco, "study", SAMPLE, "--variants", VARIANTS, "--collectives", "one_shot,ring", "--tp", "2,4",
            "--out", out, "-q")
    assert r.returncode == 0, r.stderr
    rep = run(taco, "report", out)
    assert rep.returncode == 0, rep.stderr

    def fig(name):
        return json.loads((out / "report" / "figures" / f"{name}.json").read_text())
    return parse_summary(r.stdout), fig


def test_bars_are_the_printed_medians_and_bytes(study_and_report):
    (sites, _, _), fig = study_and_report
    sc = fig("error_variants")
    assert sites
    for s in sc["series"]:
        v = s["label"]
        for (site, direction), variants in sites.items():
            printed_bytes, printed = variants[v]
            assert s["medians"][f"{site} ({direction})"] == pytest.approx(printed, rel=1e-4, abs=1e-12)
            assert s["bytes_per_elem"] == pytest.approx(printed_bytes, rel=1e-4)
    # bf16 is exact here: it is drawn (on the bottom edge), not dropped.
    assert any(s["label"] == "bf16" for s in sc["series"])
    assert sc["extra"]["zero_error"] == len(sites)
    assert "zero error (exact)" in sc["caption"] and "the statistic `taco study` prints" in sc["caption"]


def test_hadamard_cells_are_the_printed_ratios(study_and_report):
    (_, hadamard, _), fig = study_and_report
    sc = fig("hadamard_effect")
    assert hadamard
    cells = {(s["with_h"], s["without_h"]): s["ratio"] for s in sc["series"]}
    for ((site, direction), with_h, without_h), printed in hadamard.items():
        assert cells[(with_h, without_h)][f"{site} ({direction})"] == pytest.approx(printed, abs=6e-4)


def test_collective_medians_are_the_printed_ones_and_no_panel_is_empty(study_and_report):
    (_, _, coll), fig = study_and_report
    sc = fig("error_collectives")
    assert coll
    panels = {s["panel"] for s in sc["series"]}
    assert panels == {"(a) error against requantizations", "(b) error against TP degree"}
    b = {(s["variant"], s["algorithm"]): dict(zip(s["tp_size"], s["rel_l2"]))
         for s in sc["series"] if s["panel"].startswith("(b)")}
    checked = 0
    for (v, alg, tp), printed in coll.items():
        if (v, alg) in b:
            assert b[(v, alg)][tp] == pytest.approx(printed, rel=1e-4, abs=1e-12)
            checked += 1
    assert checked > 0


def test_one_tp_degree_draws_no_empty_panel(taco, tmp_path):
    out = tmp_path / "st"
    r = run(taco, "study", SAMPLE, "--variants", "fp8-g128,bf16", "--collectives", "one_shot,ring", "--out", out, "-q")
    assert r.returncode == 0, r.stderr
    assert run(taco, "report", out).returncode == 0
    sc = json.loads((out / "report" / "figures" / "error_collectives.json").read_text())
    assert {s["panel"] for s in sc["series"]} == {"(a) error against requantizations"}
    assert "one TP degree (N = 2)" in sc["caption"]


def test_every_pareto_point_is_named(study_and_report):
    _, fig = study_and_report
    sc = fig("pareto_sites")
    for panel in {s["panel"] for s in sc["series"]}:
        named = {n for s in sc["series"] if s["panel"] == panel for n in s.get("variants", [])}
        assert set(VARIANTS.split(",")) <= named


def test_select_prints_preset_names(taco, tmp_path):
    r = run(taco, "study", SAMPLE, "--select", "--no-histograms", "--filter", "layer=0", "--out", tmp_path / "sel",
            "-q")
    assert r.returncode == 0, r.stderr
    chosen = re.findall(r"->\s+(\S+)", r.stdout) + re.findall(r"\((\S+) vs (\S+)\)", r.stdout)
    names = [n for c in chosen for n in (c if isinstance(c, tuple) else (c,))]
    assert names and not any(":" in n for n in names), r.stdout
    sel = json.loads((tmp_path / "sel" / "selection.json").read_text())
    assert "taco-noh-g32" in sel["candidates"] and not any(":" in c for c in sel["candidates"])
