#!/usr/bin/env python3
"""Fails when a module of the Python package `taco` (python/taco) imports a module of a higher stage,
or when a .py file under python/taco belongs to no stage. The stages, lowest first; a module may
import its own stage and any lower one. Every import counts: absolute (`import taco.x`,
`from taco.x import y`), relative (`from .x import y`, `from . import x`, `from .. import y`), at
module level or inside a function (a lazy import is still a dependency; it only runs later).
The compiled extension taco._C (python/binding) sits below every stage. The order, and why:

  package   taco/__init__.py: every `import taco.x` runs it first, so it may import only taco._C
  errors    the exceptions and the CLI wrapper, which everything raises and uses
  codec     encode / decode on arrays and tensors (the extension); dist sends its bytes
  dist      compressed collectives over torch.distributed and SimGroup; lowrank.py, the low-rank
            (PowerSGD) all-reduce that dist runs on its transports
  tp        tp.py and dtensor.py, one stage: dtensor's styles are built on tp's, and tp re-exports
            them lazily (a module __getattr__ imports taco.dtensor on first use)
  capture   the trace format, its writer, recorder, emulator and converters (emulate uses tp)
  train     the trainer; it records traces through capture.recorder
  selfcheck capture/selfcheck.py: checks the recorder and the emulator on the trainer's model,
            so it sits above train although it lives in capture/
  bench     the Python benchmarks, on top of everything

tests/, examples/, bench/ (the repository's) and analysis/ sit outside the package, above it.

    python3 scripts/check_py_layers.py               # from anywhere; exit 1 and one line per violation
    python3 scripts/check_py_layers.py --root DIR    # check DIR/python/taco instead of this checkout's
"""
import argparse
import ast
import pathlib
import sys

PACKAGE = "taco"
# (stage, paths under python/taco that belong to it), lowest first. A path ending in "/" is a folder
# (all .py files below it); a file named here belongs to its stage even inside another's folder.
STAGES = [("package", ["__init__.py"]), ("errors", ["errors.py"]), ("codec", ["codec.py"]),
          ("dist", ["dist.py", "lowrank.py"]), ("tp", ["tp.py", "dtensor.py"]), ("capture", ["capture/"]),
          ("train", ["train/"]), ("selfcheck", ["capture/selfcheck.py"]), ("bench", ["bench/"])]
BELOW_ALL = {"_C"}  # the compiled extension (python/binding): below every stage
ORDER = " < ".join(s for s, _ in STAGES)


def stage_of(rel):
    """The stage of a path relative to python/taco ("capture/recorder.py" -> "capture"), or None:
    an exact file wins over the folders that hold it, a deeper folder over a shallower one."""
    best, depth = None, -1
    for stage, paths in STAGES:
        for p in paths:
            if p == rel:
                return stage
            if p.endswith("/") and rel.startswith(p) and p.count("/") > depth:
                best, depth = stage, p.count("/")
    return best


def module_file(pkg_dir, dotted):
    """python/taco/<...>.py or <...>/__init__.py of the module "taco.a.b", as a path relative to
    pkg_dir ("<...>/" for a folder without __init__.py, a namespace package), or None when there is
    no such module."""
    parts = dotted.split(".")[1:]
    if not parts:
        return "__init__.py"
    rel = "/".join(parts)
    if (pkg_dir / f"{rel}.py").is_file():
        return f"{rel}.py"
    if (pkg_dir / rel / "__init__.py").is_file():
        return f"{rel}/__init__.py"
    if (pkg_dir / rel).is_dir():
        return f"{rel}/"
    return None


def imported_modules(tree, package):
    """(line, dotted taco module or "module.name" candidate, is_from_name) of every import in tree.
    package is the dotted package a relative import starts from."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == PACKAGE or a.name.startswith(PACKAGE + "."):
                    yield node.lineno, a.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level - 1 >= len(base):
                    yield node.lineno, "." * node.level + (node.module or ""), None  # above the package
                    continue
                base = ".".join(base[:len(base) - (node.level - 1)] + ([node.module] if node.module else []))
            elif node.module and (node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
                base = node.module
            else:
                continue
            for a in node.names:
                yield node.lineno, base, a.name


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=pathlib.Path, default=pathlib.Path(__file__).resolve().parent.parent,
                    help="repository root whose python/taco is checked (default: this checkout)")
    args = ap.parse_args()
    root = args.root.resolve()
    pkg_dir = root / "python" / PACKAGE
    if not pkg_dir.is_dir():
        print(f"check_py_layers: no package at {pkg_dir}")
        return 2
    rank = {s: i for i, (s, _) in enumerate(STAGES)}
    files = sorted(f for f in pkg_dir.rglob("*.py") if "__pycache__" not in f.parts)
    bad = []
    for f in files:
        rel = f.relative_to(pkg_dir).as_posix()
        shown = f.relative_to(root).as_posix()
        stage = stage_of(rel)
        if stage is None:
            bad.append(f"{shown}: a module in no stage of scripts/check_py_layers.py")
            continue
        dirs = [PACKAGE] + list(pathlib.PurePosixPath(rel).parent.parts)
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
        except SyntaxError as e:
            bad.append(f"{shown}:{e.lineno}: does not parse ({e.msg})")
            continue
        for line, base, name in imported_modules(tree, ".".join(dirs)):
            if base.startswith("."):
                bad.append(f"{shown}:{line}: relative import \"{base}\" reaches above the package")
                continue
            # `from X import name`: the submodule X.name when there is one, else X (name is an attribute)
            target = f"{base}.{name}" if name and name != "*" and module_file(pkg_dir, f"{base}.{name}") else base
            if target.split(".")[1:2] and target.split(".")[1] in BELOW_ALL:
                continue
            # importing a.b.c runs a/__init__.py and a/b/__init__.py too
            parts = target.split(".")
            for k in range(len(parts), 0, -1):
                mod = ".".join(parts[:k])
                mrel = module_file(pkg_dir, mod)
                if mrel is None:
                    if k == len(parts):
                        bad.append(f"{shown}:{line}: imports {mod}, which is no module of python/{PACKAGE}")
                    continue
                top = stage_of(mrel)
                if top is not None and rank[top] > rank[stage]:
                    bad.append(f"{shown}:{line}: stage {stage} imports {mod} of the higher stage {top}")
                    break
    for line in bad:
        print(line)
    if bad:
        print(f"check_py_layers: {len(bad)} violation(s); the order is {ORDER}")
        return 1
    print(f"check_py_layers: {len(files)} modules, no import goes up the package ({ORDER})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
