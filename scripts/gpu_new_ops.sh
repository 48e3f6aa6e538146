#!/usr/bin/env bash
# GPU batch for the attention, rope and matmul ops (docs/gpu-runs.md): with FIRST=1, a plugin's
# time to its verdict on the cold machine, alone; then STREAMS side by side, each a comma list of
# verify:OP / mutate:OP steps run in order in the op's report directory (a campaign after verify
# reuses verify's store for its sanity step). LIMIT bounds each stream (s).
#   FIRST=1 STREAMS="verify:rope,verify:matmul,mutate:rope,mutate:matmul verify:attention,mutate:attention"
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD
LIMIT=${LIMIT:-400}; R=reports/out/gpu; mkdir -p $R
STREAMS=${STREAMS:-"verify:rope,verify:matmul,mutate:rope,mutate:matmul verify:attention,mutate:attention"}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)'; nproc; } > $R/machine.txt 2>&1
if [ "${FIRST:-0}" = 1 ]; then
    t0=$(date +%s%N)
    timeout -k 10 120 python3 -m harness verify --backend cuda --plugin examples/plugins/tutorial_rmsnorm.py --select tutorial_rmsnorm \
        --report-dir $R/first --no-render > $R/first.log 2>&1
    echo "rc=$? ms=$(( ($(date +%s%N) - t0) / 1000000 ))" >> $R/first.log
fi
steps() { for s in ${1//,/ }; do op=${s#*:}
              case ${s%%:*} in verify) python3 -m harness verify --backend cuda --op $op --report-dir $R/$op --no-render ;;
                               mutate) python3 -m harness mutate --backend cuda --op $op --report-dir $R/$op ;; esac; done; }
export -f steps; export R
n=0
for st in $STREAMS; do n=$((n+1))
    ( t=$(date +%s); timeout -k 30 $LIMIT bash -c "steps $st" > $R/stream$n.log 2>&1; echo "$st rc=$? seconds=$(( $(date +%s)-t ))" >> $R/stream$n.log ) &
done
( while true; do nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader >> $R/smi.txt 2>/dev/null; sleep 20; done ) & smi=$!
for j in $(seq $n); do wait %$j; done; kill $smi
for i in $(seq 15); do pgrep -f "python3 -m harness" >/dev/null || break; sleep 2; done
python3 scripts/failures.py $R/*/verify.json $R/*/mutation.json > ${OUT:-/tmp}/fail.txt 2>&1
tar czf ${OUT:-/tmp}/reports.tgz --exclude=incremental $R
