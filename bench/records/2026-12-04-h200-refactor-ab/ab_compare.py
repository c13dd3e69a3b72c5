"""Same-run A/B of `taco bench` JSON files: rounds old1,new1,old2,new2... -> per row the mean
median_us of each binary, the ratio new/old, and whether the sizes agree (bytes_counted)."""
import json, sys, statistics, glob
rows = {}
for tag in ("old", "new"):
    for f in sorted(glob.glob(f"{sys.argv[1]}/bench_{tag}_*.json")):
        for r in json.load(open(f))["results"]:
            k = (r["variant"], r["op"], r["size_bytes"], r.get("sources", 1))
            rows.setdefault(k, {"old": [], "new": [], "bytes": set()})
            rows[k][tag].append(r["median_us"])
            rows[k]["bytes"].add((tag, r["bytes_counted"], r.get("config")))
ratios = []
print(f"{'variant':<14} {'op':<21} {'size':>10} {'old us':>9} {'new us':>9} {'new/old':>8}  bytes")
for k in sorted(rows):
    v = rows[k]
    if not v["old"] or not v["new"]:
        print(k, "missing in one binary"); continue
    o, n = statistics.mean(v["old"]), statistics.mean(v["new"])
    same = len({b[1] for b in v["bytes"]}) == 1
    ratios.append(n / o)
    print(f"{k[0]:<14} {k[1]:<21} {k[2]:>10} {o:9.2f} {n:9.2f} {n/o:8.3f}  {'same' if same else 'DIFFER'}")
print(f"rows {len(ratios)}: new/old geomean {statistics.geometric_mean(ratios):.4f}, min {min(ratios):.3f}, max {max(ratios):.3f}")
