#!/usr/bin/env bash
# A/B on the device (the command of records v4): A = this tree with bench/records/2026-11-30-h200-v4-prefetch.patch
# reversed, B = this tree with it applied (scripts/gpu_check.sh records B). Needs .anchors/.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/A
tar --exclude=./build-gpu --exclude=./.commbin -cf - . | (cd /tmp/A && tar xf -)
(cd /tmp/A && patch -s -R -p1 < bench/records/2026-11-30-h200-v4-prefetch.patch && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
   -DTACO_CUDA=ON -DTACO_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90-real > /tmp/A.log 2>&1 &&
   cmake --build build -j 6 --target taco >> /tmp/A.log 2>&1; echo "A build rc=$?" >> /tmp/A.log) &
APID=$!
JOBS=10 bash scripts/gpu_check.sh all
wait $APID; tail -1 /tmp/A.log | tee -a $OUT/log.txt
ab() { "$1" bench -v taco,fp8-g128 --sizes 256M,1G --ops encode,decode,decode_reduce --impl fused --no-batch \
         --no-verify --min-time 0.05 --max-noise 0.5 --timeout 2 -q | grep -E "^\| (taco|fp8-g128) " | cut -d'|' -f2-7,13,14 | sed "s/^/$2 /"; }
{ echo "== A/B (A: no prefetch, B: prefetch)"; for i in 1 2; do ab /tmp/A/build/bin/taco A; ab build-gpu/bin/taco B; done; } 2>&1 | tee -a $OUT/log.txt
