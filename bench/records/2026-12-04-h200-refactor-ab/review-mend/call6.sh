#!/usr/bin/env bash
# call 6 (#31 review mend): the refactored tree's GPU tests (codecs incl. the Codec-contract ops, collectives) and package CUDA tests
set -uo pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
O=$OUT; t0=$(date +%s)
stamp() { echo "== $1 at $(( $(date +%s) - t0 ))s"; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nvcc --version 2>/dev/null | tail -1; python3 -c 'import torch,sys;print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.nccl.version())'; } 2>&1 | tee $O/env.txt
stamp contract
timeout 120 .exp/bin/taco_gpu_tests "[contract]" > $O/gpu_tests_contract.txt 2>&1; echo "contract rc=$?"; tail -2 $O/gpu_tests_contract.txt
stamp codec
timeout 200 .exp/bin/taco_gpu_tests "[codec]~[contract]" > $O/gpu_tests_codec.txt 2>&1; echo "codec rc=$?"; tail -2 $O/gpu_tests_codec.txt
stamp rest
timeout 200 .exp/bin/taco_gpu_tests "~[codec]" > $O/gpu_tests_rest.txt 2>&1; echo "rest rc=$?"; tail -2 $O/gpu_tests_rest.txt
stamp pkgtests
(cd tests/package && PYTHONPATH=$PWD/../../python timeout 200 python3 -m pytest -q -k cuda test_codec.py test_dist.py test_train.py 2>&1 | tail -4) | tee $O/pkg_tests.txt
stamp done
grep -B3 -A12 "FAILED\|failed" $O/gpu_tests_*.txt | head -60
(cd $O && tar czf /tmp/call6.tgz . && rm -rf ./* && mv /tmp/call6.tgz .)
