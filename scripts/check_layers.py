#!/usr/bin/env python3
"""Fails when a lower stage of the pipeline includes a higher one, or a file reaches into another
folder with a relative include ("../"). The stages, lowest first; a file may include its own stage
and any lower one. The GPU backend has its own stages (cuda/<stage>). tests/, fuzz/ and bench/ sit
above everything.

    python3 scripts/check_layers.py        # from the repository root; exit 1 and one line per violation
"""
import pathlib
import re
import sys

# src/<folder>: the CPU library by pipeline stage; then the GPU backend's cuda/<folder> stages, the
# binding, the CLI
STAGES = ["core", "formats", "io", "synth", "codecs", "stats", "collectives", "study", "model",
          "cuda/runtime", "cuda/codecs", "cuda/collectives", "cuda/bench", "binding", "apps"]
ROOTS = {"binding": "python/binding", "apps": "apps"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SUFFIXES = {".cpp", ".hpp", ".cu", ".cuh", ".h"}


def stage_dir(stage):
    return pathlib.Path(ROOTS.get(stage, stage if stage.startswith("cuda/") else f"src/{stage}"))


def include_stage(inc):
    """The stage an include names ("cuda/codecs/gpu_quant.hpp" -> "cuda/codecs"), or None."""
    parts = inc.split("/")
    if len(parts) < 2:
        return None
    return "/".join(parts[:2]) if parts[0] == "cuda" else parts[0]


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    rank = {s: i for i, s in enumerate(STAGES)}
    known = {p.name for p in (root / "src").iterdir() if p.is_dir()}
    bad = [f"src/{k}: a folder of src/ that is not a stage in scripts/check_layers.py" for k in sorted(known - set(STAGES))]
    for p in sorted((root / "cuda").iterdir()):
        if p.is_dir() and f"cuda/{p.name}" not in rank:
            bad.append(f"cuda/{p.name}: a folder of cuda/ that is not a stage in scripts/check_layers.py")
        elif p.suffix in SUFFIXES:
            bad.append(f"cuda/{p.name}: a source file outside the stages of cuda/")
    files = [(s, f) for s in STAGES for f in sorted((root / stage_dir(s)).rglob("*")) if f.suffix in SUFFIXES]
    files += [(None, f) for d in ("tests", "fuzz", "bench") for f in sorted((root / d).rglob("*")) if f.suffix in SUFFIXES]
    for stage, f in files:
        rel = f.relative_to(root)
        for inc in INCLUDE.findall(f.read_text(errors="replace")):
            if inc.startswith("../"):
                bad.append(f"{rel}: relative include \"{inc}\" (include by stage: \"<stage>/file\")")
                continue
            top = include_stage(inc)
            if stage is None or top not in rank:
                continue
            if rank[top] > rank[stage]:
                bad.append(f"{rel}: stage {stage} includes \"{inc}\" of the higher stage {top}")
    for line in bad:
        print(line)
    if bad:
        print(f"check_layers: {len(bad)} violation(s); the order is {' < '.join(STAGES)}")
        return 1
    print(f"check_layers: {len(files)} files, no include goes up the pipeline ({' < '.join(STAGES)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
