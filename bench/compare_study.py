"""Compares two `taco study` outputs row by row (every error column, exact text): usage compare_study.py CPU_DIR GPU_DIR."""
import csv, sys
def rows(d):
    with open(f"{d}/results.csv") as f:
        return {(r["tensor"], r["variant"]): r for r in csv.DictReader(f)}
c, g = rows(sys.argv[1]), rows(sys.argv[2])
cols = ["rel_l2", "mse", "snr_db", "cosine", "max_abs_err", "max_rel_err", "underflow_frac", "saturation_frac",
        "nan_count", "inf_count", "wire_bytes"]
per = {}
for k, r in c.items():
    v = per.setdefault(k[1], [0, 0])
    v[0] += 1
    if k in g and all(r[x] == g[k][x] for x in cols):
        v[1] += 1
print(f"rows: cpu {len(c)} gpu {len(g)}")
for v, (n, eq) in per.items():
    print(f"{v:<14} {eq}/{n} rows equal")
print("ALL EQUAL" if len(c) == len(g) and all(n == eq for n, eq in per.values()) else "DIFFER")
