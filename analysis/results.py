"""Readers for the files taco writes (docs/results-schema.md), with strict validation.

Not a script. Every figure script reads its data through ResultsDir, which
  * finds the inputs in RESULTS_DIR (study CSVs by name; bench and comm JSON by content, any
    file name, top level of the directory only),
  * raises InputMissing when a figure's input is simply not there (the figure is skipped),
  * raises InputInvalid with a one-line message naming the file, line/row and column when an
    input is there but malformed (the caller exits 2),
  * remembers which files were read, for the report's provenance table.

    rd = ResultsDir("results/")
    t = rd.results()                   # Table of results.csv rows
    for (site, direction), sub in t.groupby("site", "direction").items(): ...
    facts = rd.variants()              # what taco says about each variant (never parse a name)
"""
from __future__ import annotations

import csv
import hashlib
import json
import math
import os
from typing import Any, Iterable

import numpy as np


class InputMissing(Exception):
    """The input a figure needs is absent: the figure is skipped, not an error."""


class InputInvalid(Exception):
    """An input exists but does not follow docs/results-schema.md: one-line message, exit 2."""


# ---- schemas (docs/results-schema.md). Extra columns are allowed (appended later). --------
RESULTS_COLUMNS = [
    "file", "tensor", "layer", "site", "direction", "collective", "tp_rank", "tp_size", "step",
    "shape", "numel", "in_dtype", "variant", "family", "elem_format", "scale_format",
    "granularity", "group_size", "transform", "rel_l2", "mse", "snr_db", "cosine",
    "max_abs_err", "max_rel_err", "underflow_frac", "saturation_frac", "nan_count",
    "inf_count", "wire_bytes", "bytes_per_elem", "compression_ratio"]
RESULTS_NUMERIC = {
    "layer", "tp_rank", "tp_size", "step", "numel", "group_size", "rel_l2", "mse", "snr_db",
    "cosine", "max_abs_err", "max_rel_err", "underflow_frac", "saturation_frac", "nan_count",
    "inf_count", "wire_bytes", "bytes_per_elem", "compression_ratio"}

COLLECTIVES_COLUMNS = [
    "layer", "site", "direction", "step", "variant", "algorithm", "tp_size", "quantizations",
    "numel", "rel_l2", "mse", "snr_db", "max_abs_err", "cosine"]
COLLECTIVES_NUMERIC = {"layer", "step", "tp_size", "quantizations", "numel", "rel_l2", "mse",
                       "snr_db", "max_abs_err", "cosine"}

PARETO_COLUMNS = ["site", "direction", "variant", "family", "bytes_per_elem", "rel_l2", "on_front"]
PARETO_NUMERIC = {"bytes_per_elem", "rel_l2", "on_front", "tensors", "p99_rel_l2"}

HISTOGRAMS_COLUMNS = ["site", "direction", "scope", "bin_lo_log2", "bin_hi_log2", "count"]
HISTOGRAMS_NUMERIC = {"bin_lo_log2", "bin_hi_log2", "count"}

# Numbers that must be present (not empty) in every row, per file.
_REQUIRED_NUMBERS = {
    "results.csv": {"rel_l2", "bytes_per_elem"},
    "collectives.csv": {"tp_size", "quantizations", "rel_l2"},
    "histograms.csv": {"count"},
    "pareto.csv": {"bytes_per_elem", "on_front"},
}

BENCH_RESULT_KEYS = {"variant": str, "op": str, "impl": str, "dtype": str, "numel": float,
                     "gbps": float}
BENCH_COPY_KEYS = {"bytes": float, "tbps": float}
COMM_RESULT_KEYS = {"collective": str, "size": float, "codec": str, "algorithm": str,
                    "transport": str, "nranks": float, "busbw": float}
COMM_OPTIONAL_NUMBERS = ("speedup", "time_us", "algbw", "eff_busbw", "wire_bytes", "rel_l2")

# results.json "variant_facts" (docs/results-schema.md): name -> (types allowed). The C++ parses
# each variant once and writes these; the analysis reads them instead of the variant's name.
VARIANT_FACT_TYPES = {
    "canonical": (str,), "family": (str,), "preset": (str, type(None)), "has_transform": (bool,),
    "twin": (str, type(None)), "group_size": (int, type(None)),
    "group_series": (str, type(None)), "nearest_preset": (str, type(None)),
    "nearest_preset_group_size": (int, type(None))}
_TYPE_WORDS = {str: "a string", int: "an integer", bool: "true/false", type(None): "null"}

DTYPE_BYTES = {"bf16": 2, "bfloat16": 2, "f16": 2, "fp16": 2, "half": 2, "f32": 4, "fp32": 4,
               "float": 4, "float32": 4}


def _number(text: str, where: str) -> float:
    s = text.strip()
    if s == "":
        return math.nan
    if "_" in s:
        raise InputInvalid(f"{where}: '{text}' is not a number")
    try:
        return float(s)
    except ValueError:
        raise InputInvalid(f"{where}: '{text}' is not a number") from None


class Table:
    """Columns of equal length: numeric columns are float64 arrays (NaN = empty), the others
    object arrays of str."""

    def __init__(self, columns: dict[str, np.ndarray], source: str):
        self.columns = columns
        self.source = source
        lengths = {len(v) for v in columns.values()}
        self.nrows = lengths.pop() if lengths else 0

    def __len__(self) -> int:
        return self.nrows

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def has(self, name: str) -> bool:
        return name in self.columns

    def where(self, mask: np.ndarray) -> "Table":
        return Table({k: v[mask] for k, v in self.columns.items()}, self.source)

    def unique(self, name: str) -> list:
        """Distinct values of a column in order of first appearance."""
        seen: dict = {}
        for v in self.columns[name]:
            if isinstance(v, float) and math.isnan(v):
                continue
            seen.setdefault(v, None)
        return list(seen)

    def groupby(self, *names: str) -> dict[tuple, "Table"]:
        """Sub-tables per distinct key, in order of first appearance."""
        keys = list(zip(*(self.columns[n] for n in names)))
        order: dict[tuple, list[int]] = {}
        for i, k in enumerate(keys):
            order.setdefault(k, []).append(i)
        return {k: self.where(np.asarray(idx, dtype=np.int64)) for k, idx in order.items()}


def read_csv(path: str, columns: list[str], numeric: set[str], required: set[str]) -> Table:
    """Reads a taco CSV. Raises InputInvalid naming the line and column on any problem."""
    name = os.path.basename(path)
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except UnicodeDecodeError:
        raise InputInvalid(f"{path}: not UTF-8 text") from None
    except csv.Error as e:
        raise InputInvalid(f"{path}: not valid CSV ({e})") from None
    except OSError as e:
        raise InputInvalid(f"{path}: cannot read ({e.strerror})") from None
    if not rows:
        raise InputInvalid(f"{path}: empty file (no header line)")
    header = [h.strip() for h in rows[0]]
    missing = [c for c in columns if c not in header]
    if missing:
        raise InputInvalid(f"{path}: header lacks column(s) {', '.join(missing)}")
    if len(set(header)) != len(header):
        raise InputInvalid(f"{path}: header repeats a column name")
    idx = {c: header.index(c) for c in header}
    data: dict[str, list] = {c: [] for c in header}
    for lineno, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise InputInvalid(f"{path} line {lineno}: {len(row)} fields, header has {len(header)}")
        for c in header:
            v = row[idx[c]]
            if c in numeric:
                x = _number(v, f"{path} line {lineno} column {c}")
                if c in required and math.isnan(x) and v.strip() == "":
                    raise InputInvalid(f"{path} line {lineno}: column {c} is empty")
                data[c].append(x)
            else:
                data[c].append(v)
    cols = {c: (np.asarray(data[c], dtype=np.float64) if c in numeric
                else np.asarray(data[c], dtype=object)) for c in header}
    return Table(cols, name)


def table_from_rows(rows: Any, path: str, columns: list[str], numeric: set[str],
                    required: set[str]) -> Table:
    """Builds a Table from results.json "rows" (list of objects), with the CSV's checks."""
    if not isinstance(rows, list):
        raise InputInvalid(f"{path}: \"rows\" is not a list")
    data: dict[str, list] = {c: [] for c in columns}
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise InputInvalid(f"{path}: rows[{i}] is not an object")
        for c in columns:
            if c not in r:
                raise InputInvalid(f"{path}: rows[{i}] lacks \"{c}\"")
            v = r[c]
            if c in numeric:
                if v is None or v == "":
                    if c in required:
                        raise InputInvalid(f"{path}: rows[{i}].{c} is empty")
                    data[c].append(math.nan)
                elif isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise InputInvalid(f"{path}: rows[{i}].{c} is not a number")
                else:
                    data[c].append(float(v))
            else:
                data[c].append("" if v is None else str(v))
    cols = {c: (np.asarray(data[c], dtype=np.float64) if c in numeric
                else np.asarray(data[c], dtype=object)) for c in columns}
    return Table(cols, os.path.basename(path))


def _check_keys(obj: Any, keys: dict[str, type], where: str) -> None:
    if not isinstance(obj, dict):
        raise InputInvalid(f"{where} is not an object")
    for k, t in keys.items():
        if k not in obj:
            raise InputInvalid(f"{where} lacks \"{k}\"")
        v = obj[k]
        if t is str and not isinstance(v, str):
            raise InputInvalid(f"{where}.{k} is not a string")
        if t is float and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise InputInvalid(f"{where}.{k} is not a number")


def _opt_number(obj: dict, key: str, where: str) -> float:
    v = obj.get(key)
    if v is None:
        return math.nan
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputInvalid(f"{where}.{key} is not a number")
    return float(v)


class VariantTable:
    """results.json "variant_facts": per variant name, what taco derived from its parsed spec
    (canonical name, preset, transform-free twin, group-size series, nearest preset, ...).
    get() also finds a variant by its canonical name, so a name another tool spelled
    canonically (taco bench, taco comm) meets the study's spelling of the same codec."""

    def __init__(self, facts: dict[str, dict], source: str | None = None):
        self.facts = facts
        self.source = source
        self._by_canonical: dict[str, dict] = {}
        for f in facts.values():
            self._by_canonical.setdefault(f["canonical"], f)

    def get(self, name: str) -> dict | None:
        """The facts of a variant, or None when taco did not describe it."""
        f = self.facts.get(name)
        return f if f is not None else self._by_canonical.get(name)

    def require(self, names: Iterable[str], where: str) -> None:
        """InputInvalid unless every name has facts (rows must not name unknown variants)."""
        for n in names:
            if self.get(n) is None:
                raise InputInvalid(f"{self.source}: \"variant_facts\" lacks variant '{n}' "
                                   f"(used in {where})")


def variant_table(obj: Any, path: str) -> VariantTable:
    """The "variant_facts" of a parsed results.json. A results.json from a taco without them
    is InputInvalid with one message: re-run `taco study`."""
    if not isinstance(obj, dict):
        raise InputInvalid(f"{path}: top level is not an object")
    facts = obj.get("variant_facts")
    if facts is None:
        raise InputInvalid(
            f"{path} lacks \"variant_facts\" (written by an older taco study): re-run "
            f"`taco study` to rewrite it")
    if not isinstance(facts, dict):
        raise InputInvalid(f"{path}: \"variant_facts\" is not an object")
    for name, f in facts.items():
        w = f"{path}: variant_facts[{json.dumps(name)}]"
        if not isinstance(f, dict):
            raise InputInvalid(f"{w} is not an object")
        for key, types in VARIANT_FACT_TYPES.items():
            if key not in f:
                raise InputInvalid(f"{w} lacks \"{key}\"")
            v = f[key]
            if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
                raise InputInvalid(f"{w}.{key} is not {' or '.join(_TYPE_WORDS[t] for t in types)}")
    return VariantTable(facts, path)


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class ResultsDir:
    """The outputs of taco study / bench / comm in one directory. Parses each file once."""

    def __init__(self, path: str):
        if not os.path.isdir(path):
            if os.path.exists(path):
                raise InputInvalid(f"RESULTS_DIR '{path}' is not a directory")
            raise InputInvalid(f"RESULTS_DIR '{path}' does not exist")
        self.path = path
        self.used: dict[str, str] = {}          # path -> what it was read as
        self._cache: dict[str, Any] = {}
        self._json: list[tuple[str, str, Any]] | None = None   # (path, kind, parsed)

    def _file(self, name: str) -> str | None:
        p = os.path.join(self.path, name)
        return p if os.path.isfile(p) else None

    def _note(self, path: str, kind: str) -> None:
        self.used[path] = kind

    # ---- JSON files, classified by content ----------------------------------------------
    def json_files(self) -> list[tuple[str, str, Any]]:
        """(path, kind, parsed) for every *.json at the top of the directory. kind is one of
        study, selection, bench, comm, other. Unparseable JSON is an InputInvalid."""
        if self._json is None:
            found = []
            for entry in sorted(os.listdir(self.path)):
                p = os.path.join(self.path, entry)
                if not entry.endswith(".json") or not os.path.isfile(p):
                    continue
                try:
                    with open(p, encoding="utf-8") as f:
                        obj = json.load(f)
                except (json.JSONDecodeError, UnicodeDecodeError) as e:
                    raise InputInvalid(f"{p}: not valid JSON ({str(e).splitlines()[0]})") from None
                except OSError as e:
                    raise InputInvalid(f"{p}: cannot read ({e.strerror})") from None
                found.append((p, classify_json(obj), obj))
            self._json = found
        return self._json

    # ---- study outputs -----------------------------------------------------------------
    def results(self) -> Table:
        """Rows of results.csv, or of results.json "rows" when only the JSON is there."""
        if "results" in self._cache:
            return self._cache["results"]
        p = self._file("results.csv")
        if p is not None:
            t = read_csv(p, RESULTS_COLUMNS, RESULTS_NUMERIC, _REQUIRED_NUMBERS["results.csv"])
        else:
            pj = self._file("results.json")
            if pj is None:
                raise InputMissing("no results.csv (taco study --out)")
            obj = self._load_json(pj)
            if not isinstance(obj, dict) or "rows" not in obj:
                raise InputInvalid(f"{pj}: lacks \"rows\"")
            t = table_from_rows(obj["rows"], pj, RESULTS_COLUMNS, RESULTS_NUMERIC,
                                _REQUIRED_NUMBERS["results.csv"])
            p = pj
        if len(t) == 0:
            raise InputMissing(f"{os.path.basename(p)} holds no rows")
        self._note(p, "study results")
        self._cache["results"] = t
        return t

    def _load_json(self, path: str) -> Any:
        for p, _kind, obj in self.json_files():
            if os.path.abspath(p) == os.path.abspath(path):
                return obj
        raise InputMissing(f"no {os.path.basename(path)}")

    def study_provenance(self) -> dict | None:
        """results.json's provenance object, or None. Malformed provenance is InputInvalid."""
        p = self._file("results.json")
        if p is None:
            return None
        obj = self._load_json(p)
        if not isinstance(obj, dict):
            raise InputInvalid(f"{p}: top level is not an object")
        prov = obj.get("provenance")
        if prov is None:
            return None
        if not isinstance(prov, dict):
            raise InputInvalid(f"{p}: \"provenance\" is not an object")
        inputs = prov.get("inputs", [])
        if not isinstance(inputs, list) or not all(isinstance(i, dict) for i in inputs):
            raise InputInvalid(f"{p}: provenance.inputs is not a list of objects")
        self._note(p, "study provenance")
        return prov

    def variants(self) -> VariantTable:
        """results.json "variant_facts"; an empty table when there is no results.json (then
        a figure knows variants by name only, as bench and comm files name them). InputInvalid
        for a results.json without them (written before they existed)."""
        if "variants" in self._cache:
            return self._cache["variants"]
        p = self._file("results.json")
        if p is None:
            table = VariantTable({})
        else:
            table = variant_table(self._load_json(p), p)
            self._note(p, "variant facts")
        self._cache["variants"] = table
        return table

    def study_variants(self, t: Table) -> VariantTable:
        """The variant facts of the study whose rows are t: every variant of t must have them.
        InputMissing without a results.json (taco study writes it next to results.csv)."""
        table = self.variants()
        if table.source is None:
            raise InputMissing("no results.json next to results.csv (taco study writes both; the "
                               "figure needs its \"variant_facts\")")
        table.require(t.unique("variant"), t.source)
        return table

    def collectives(self) -> Table:
        return self._csv("collectives.csv", COLLECTIVES_COLUMNS, COLLECTIVES_NUMERIC,
                         "simulated collectives", "taco study")

    def pareto(self) -> Table:
        t = self._csv("pareto.csv", PARETO_COLUMNS, PARETO_NUMERIC, "error-vs-bytes front",
                      "taco study")
        bad = ~np.isin(t["on_front"], [0.0, 1.0])
        if np.any(bad):
            raise InputInvalid(f"{t.source} line {int(np.argmax(bad)) + 2}: on_front must be 0 or 1")
        return t

    def histograms(self) -> Table:
        return self._csv("histograms.csv", HISTOGRAMS_COLUMNS, HISTOGRAMS_NUMERIC,
                         "magnitude histograms", "taco study")

    def _csv(self, name, columns, numeric, kind, producer) -> Table:
        if name in self._cache:
            return self._cache[name]
        p = self._file(name)
        if p is None:
            raise InputMissing(f"no {name} ({producer} --out)")
        t = read_csv(p, columns, numeric, _REQUIRED_NUMBERS[name])
        if len(t) == 0:
            raise InputMissing(f"{name} holds no rows")
        self._note(p, kind)
        self._cache[name] = t
        return t

    def selection(self) -> dict:
        p = self._file("selection.json")
        if p is None:
            raise InputMissing("no selection.json (taco study --select)")
        obj = self._load_json(p)
        if not isinstance(obj, dict) or not isinstance(obj.get("choices"), list):
            raise InputInvalid(f"{p}: lacks a \"choices\" list")
        for i, c in enumerate(obj["choices"]):
            _check_keys(c, {"site": str, "direction": str, "variant": str}, f"{p}: choices[{i}]")
        self._note(p, "selection")
        return obj

    # ---- bench and comm JSON -------------------------------------------------------------
    def bench_runs(self) -> list[tuple[str, dict]]:
        """Every `taco bench --json` output in the directory, validated."""
        runs = []
        for p, kind, obj in self.json_files():
            if kind != "bench":
                continue
            validate_bench(obj, p)
            self._note(p, "codec benchmark")
            runs.append((p, obj))
        if not runs:
            raise InputMissing("no codec benchmark JSON (taco bench --json FILE)")
        return runs

    def comm_runs(self) -> list[tuple[str, dict]]:
        """Every `taco comm --json` output in the directory, validated."""
        runs = []
        for p, kind, obj in self.json_files():
            if kind != "comm":
                continue
            validate_comm(obj, p)
            self._note(p, "collective benchmark")
            runs.append((p, obj))
        if not runs:
            raise InputMissing("no collective benchmark JSON (taco comm --json FILE)")
        return runs

    def training_runs(self) -> list[tuple[str, dict]]:
        """Every training summary (python -m taco.train.sweep) in the directory."""
        runs = []
        for p, kind, obj in self.json_files():
            if kind != "training":
                continue
            if not isinstance(obj.get("runs"), list) or not isinstance(obj.get("table"), list):
                raise InputInvalid(f"{p}: a training summary needs \"runs\" and \"table\" lists")
            self._note(p, "training runs")
            runs.append((p, obj))
        if not runs:
            raise InputMissing("no training summary (python -m taco.train.sweep writes training_summary.json)")
        return runs

    def model_runs(self) -> list[tuple[str, dict]]:
        """Every `taco model --json` output in the directory, validated."""
        runs = []
        for p, kind, obj in self.json_files():
            if kind != "model":
                continue
            validate_model(obj, p)
            self._note(p, "step-time model")
            runs.append((p, obj))
        if not runs:
            raise InputMissing("no step-time model JSON (taco model --json FILE)")
        return runs

    def check(self) -> None:
        """Reads every input the directory holds, so that a malformed one stops a report before
        it draws anything (one error line, no progress lines before it)."""
        for load in (self.json_files, self.results, self.study_provenance, self.variants,
                     self.collectives, self.pareto, self.histograms, self.selection,
                     self.bench_runs, self.comm_runs, self.training_runs, self.model_runs):
            try:
                load()
            except InputMissing:
                pass

    def provenance_of_used(self) -> list[dict]:
        """path, kind, bytes, sha256 of every file read so far (sorted by path)."""
        out = []
        for p in sorted(self.used):
            out.append({"path": p, "kind": self.used[p], "bytes": os.path.getsize(p),
                        "sha256": sha256_file(p)})
        return out


def classify_json(obj: Any) -> str:
    """What a taco JSON file is, from its keys (file names are free)."""
    if not isinstance(obj, dict):
        return "other"
    if obj.get("schema") == "taco.model/1":
        return "model"
    if "rows" in obj and "provenance" in obj:
        return "study"
    if "choices" in obj and "candidates" in obj:
        return "selection"
    if obj.get("schema") == "taco.training_summary/1":
        return "training"
    res = obj.get("results")
    if isinstance(res, list) and "meta" in obj:
        first = res[0] if res and isinstance(res[0], dict) else {}
        if "copy" in obj or "op" in first:
            return "bench"
        if "collective" in first or "busbw" in first:
            return "comm"
    return "other"


def validate_bench(obj: dict, path: str) -> None:
    if not isinstance(obj.get("meta"), dict):
        raise InputInvalid(f"{path}: \"meta\" is not an object")
    copy = obj.get("copy", [])
    if not isinstance(copy, list):
        raise InputInvalid(f"{path}: \"copy\" is not a list")
    for i, c in enumerate(copy):
        _check_keys(c, BENCH_COPY_KEYS, f"{path}: copy[{i}]")
        if c["bytes"] <= 0 or c["tbps"] < 0:
            raise InputInvalid(f"{path}: copy[{i}] has bytes <= 0 or tbps < 0")
    res = obj.get("results")
    if not isinstance(res, list) or not res:
        raise InputInvalid(f"{path}: \"results\" is not a non-empty list")
    for i, r in enumerate(res):
        w = f"{path}: results[{i}]"
        _check_keys(r, BENCH_RESULT_KEYS, w)
        if r["dtype"].lower() not in DTYPE_BYTES:
            raise InputInvalid(f"{w}.dtype '{r['dtype']}' is not one of bf16, f16, f32")
        if r["numel"] <= 0:
            raise InputInvalid(f"{w}.numel must be positive")
        if r["gbps"] < 0:
            raise InputInvalid(f"{w}.gbps is negative")
        if "cold" in r and not isinstance(r["cold"], bool):
            raise InputInvalid(f"{w}.cold is not true/false")


def validate_comm(obj: dict, path: str) -> None:
    if not isinstance(obj.get("meta"), dict):
        raise InputInvalid(f"{path}: \"meta\" is not an object")
    res = obj.get("results")
    if not isinstance(res, list) or not res:
        raise InputInvalid(f"{path}: \"results\" is not a non-empty list")
    for i, r in enumerate(res):
        w = f"{path}: results[{i}]"
        _check_keys(r, COMM_RESULT_KEYS, w)
        if r["size"] <= 0:
            raise InputInvalid(f"{w}.size must be positive")
        for k in COMM_OPTIONAL_NUMBERS:
            v = _opt_number(r, k, w)
            if k == "speedup" and not math.isnan(v) and v <= 0:
                raise InputInvalid(f"{w}.speedup must be positive")


MODEL_PARTS = ("compute", "tp_comm", "codec", "pp_comm", "pp_bubble", "dp_comm", "optimizer")
MODEL_VALIDATION_KEYS = {"kind": str, "transport": str, "measured_us": float,
                         "predicted_us": float}


def validate_model(obj: dict, path: str) -> None:
    """`taco model --json` (schema taco.model/1): predictions and/or a validation."""
    if not isinstance(obj.get("meta"), dict):
        raise InputInvalid(f"{path}: \"meta\" is not an object")
    preds = obj.get("predictions")
    if not isinstance(preds, list):
        raise InputInvalid(f"{path}: \"predictions\" is not a list")
    for i, p in enumerate(preds):
        w = f"{path}: predictions[{i}]"
        _check_keys(p, {"label": str}, w)
        if not isinstance(p.get("model"), dict) or not isinstance(p["model"].get("name"), str):
            raise InputInvalid(f"{w}.model.name is missing")
        res, sp = p.get("results"), p.get("speedup")
        if not isinstance(res, dict) or "plain" not in res or not isinstance(sp, dict):
            raise InputInvalid(f"{w}: needs \"results\" with \"plain\" and a \"speedup\" object")
        for name, r in res.items():
            rw = f"{w}.results.{name}"
            _check_keys(r, {"step_ms": float}, rw)
            if not r["step_ms"] > 0:
                raise InputInvalid(f"{rw}.step_ms must be positive")
            parts = r.get("parts_ms")
            if not isinstance(parts, dict):
                raise InputInvalid(f"{rw}.parts_ms is not an object")
            _check_keys(parts, {k: float for k in MODEL_PARTS}, f"{rw}.parts_ms")
        for name, v in sp.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise InputInvalid(f"{w}.speedup.{name} is not a positive number")
    val = obj.get("validation")
    if val is not None:
        if not isinstance(val, dict) or not isinstance(val.get("rows"), list):
            raise InputInvalid(f"{path}: \"validation\" lacks a \"rows\" list")
        for i, r in enumerate(val["rows"]):
            w = f"{path}: validation.rows[{i}]"
            _check_keys(r, MODEL_VALIDATION_KEYS, w)
            if not (r["measured_us"] > 0 and r["predicted_us"] > 0):
                raise InputInvalid(f"{w}: measured_us and predicted_us must be positive")


def finite(values: Iterable[float]) -> np.ndarray:
    a = np.asarray(list(values), dtype=np.float64)
    return a[np.isfinite(a)]
