#!/usr/bin/env bash
# A = 6dbb152+ (.exp/cur), B = 16 elements per lane for the transformed decode(-reduce) kernel (.exp/r4)
set -u
export NCCL_NVLS_ENABLE=0
SECONDS=0
.exp/r4/taco bench -v taco --sizes 8M --ops decode,decode_reduce --impl fused,unfused --no-batch --min-time 0.01 -q 2>&1 | grep -E "identical|FAIL|differ" | head
ab() { "$1" bench -v taco,int8-g128-had --sizes 1M,8M,64M,256M --ops decode,decode_reduce --impl fused --no-batch \
         --no-verify --min-time 0.05 --max-noise 0.5 --timeout 2 -q | grep -E "^\| [a-z0-9-]+ \| (en|de)" | cut -d'|' -f2-7,13,14 | sed "s/^/$2 /"; }
for i in 1 2; do ab .exp/cur/taco A; ab .exp/r4/taco B; done > $OUT/ab.txt 2>&1
echo "ab done ${SECONDS}s"
python3 - <<'PY'
import os,collections
rows=collections.defaultdict(list)
for l in open(os.environ['OUT']+'/ab.txt'):
    f=[x.strip() for x in l.split('|')]
    if len(f)<8: continue
    ab=f[0].split()[0]; key=(f[0].split()[1],f[1],f[4]); rows[key].append((ab,float(f[6]),float(f[7])))
for k,v in rows.items():
    a=[x for x in v if x[0]=='A']; b=[x for x in v if x[0]=='B']
    ag=max(x[1] for x in a); bg=max(x[1] for x in b)
    print(f"{k[0]:14s} {k[1]:14s} {k[2]:8s} {ag:8.0f} {bg:8.0f} {bg/ag:6.2f} {max(x[2] for x in a):5.1f} {max(x[2] for x in b):5.1f}")
PY
