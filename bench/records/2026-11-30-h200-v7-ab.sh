#!/usr/bin/env bash
# A = HEAD 2f9e37a binary (.exp/bin), B = working tree (.exp/new): GPU tests of B, A/B bench, ncu instr counts of B
set -u
export NCCL_NVLS_ENABLE=0
SECONDS=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee $OUT/log.txt
timeout 300 .exp/sec/taco_gpu_tests > $OUT/gpu_tests.log 2>&1; echo "gpu_tests rc=$? ${SECONDS}s" | tee -a $OUT/log.txt
tail -3 $OUT/gpu_tests.log
ab() { "$1" bench -v taco,fp8-g128,mxfp8,int8-g128-had --sizes 8M,256M --ops encode,decode,decode_reduce,decode_reduce_encode --impl fused --no-batch \
         --no-verify --min-time 0.05 --max-noise 0.5 --timeout 2 -q | grep -E "^\| [a-z0-9-]+ \| (en|de)" | cut -d'|' -f2-7,13,14 | sed "s/^/$2 /"; }
for i in 1 2; do ab .exp/new/taco A; ab .exp/sec/taco B; done > $OUT/ab.txt 2>&1
echo "ab done ${SECONDS}s"
.exp/sec/taco bench -v taco,fp8-g128,int8-g128-had,taco-g256,taco-g512 --sizes 8M --ops encode,decode --impl fused --no-batch --min-time 0.01 -q 2>&1 | grep -E "Verified|identical|FAIL" | head -12
echo "done ${SECONDS}s"
python3 - <<'PY'
import os,collections
rows=collections.defaultdict(list)
for l in open(os.environ['OUT']+'/ab.txt'):
    f=[x.strip() for x in l.split('|')]
    if len(f)<8: continue
    ab=f[0].split()[0]; key=(f[0].split()[1],f[1],f[4]); rows[key].append((ab,float(f[6]),float(f[7])))
print(f"{'variant':14s} {'op':14s} {'size':8s} {'A GB/s':>8s} {'B GB/s':>8s} {'B/A':>6s} {'A%':>5s} {'B%':>5s}")
for k,v in rows.items():
    a=[x for x in v if x[0]=='A']; b=[x for x in v if x[0]=='B']
    ag=max(x[1] for x in a); bg=max(x[1] for x in b)
    print(f"{k[0]:14s} {k[1]:14s} {k[2]:8s} {ag:8.0f} {bg:8.0f} {bg/ag:6.2f} {max(x[2] for x in a):5.1f} {max(x[2] for x in b):5.1f}")
PY
