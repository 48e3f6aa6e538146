#!/usr/bin/env bash
# GPU batch for the attention, rope and matmul ops (docs/gpu-runs.md): a plugin's time to its
# verdict on the cold machine, alone; then two streams side by side, each one harness pool:
# rope and matmul (verify, then the campaign, in the same report directory so the campaign's
# sanity step reuses verify's store), and attention likewise. LIMIT bounds each stream (s).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD
LIMIT=${LIMIT:-400}; R=reports/out/gpu; mkdir -p $R
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)'; nproc; git log -1 --format=%h 2>/dev/null; } > $R/machine.txt 2>&1
t0=$(date +%s%N)
timeout -k 10 120 python3 -m harness verify --backend cuda --plugin examples/plugins/tutorial_rmsnorm.py --select tutorial_rmsnorm \
    --report-dir $R/first --no-render > $R/first.log 2>&1
echo "rc=$? ms=$(( ($(date +%s%N) - t0) / 1000000 ))" >> $R/first.log
run_op() { for op in "$@"; do python3 -m harness verify --backend cuda --op $op --report-dir $R/$op --no-render; done
           for op in "$@"; do python3 -m harness mutate --backend cuda --op $op --report-dir $R/$op; done; }
export -f run_op; export R
( t=$(date +%s); timeout -k 30 $LIMIT bash -c "run_op rope matmul" > $R/rope_matmul.log 2>&1; echo "rc=$? seconds=$(( $(date +%s)-t ))" >> $R/rope_matmul.log ) &
( t=$(date +%s); timeout -k 30 $LIMIT bash -c "run_op attention" > $R/attention.log 2>&1; echo "rc=$? seconds=$(( $(date +%s)-t ))" >> $R/attention.log ) &
( while true; do nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader >> $R/smi.txt 2>/dev/null; sleep 20; done ) & smi=$!
wait %1 %2; kill $smi
for i in $(seq 15); do pgrep -f "python3 -m harness" >/dev/null || break; sleep 2; done
python3 scripts/failures.py $R/*/verify.json $R/*/mutation.json > ${OUT:-/tmp}/fail.txt 2>&1
tar czf ${OUT:-/tmp}/reports.tgz --exclude=incremental $R
