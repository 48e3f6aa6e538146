#!/usr/bin/env bash
# One GPU call, steps one after another (one harness pool on the GPU at a time), each under its own
# limit, each step's wall time and exit status in $OUT/steps.txt, logs and reports in $OUT/gpu.tgz.
#   STEPS="first wild norms kernelbench mutate:add_rmsnorm" bash scripts/gpu_round.sh
# first: a new kernel's first verdict (the tutorial plugin); case:CASE_ID: one case of the as-written
# kernels (CASE_KERNEL picks which); gate: make verify BACKEND=cuda under LGATE; bench:OP,OP: each op's
# project kernel timed with every size specialized (HARNESS_SPECIALIZE_ALL=1), then as the kernels ask
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
O=${OUT:-/tmp/gpu_out}; R=reports/out/gpu; mkdir -p $O $R
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 -c 'import torch, triton, hypothesis; print("torch", torch.__version__, "triton", triton.__version__, "hypothesis", hypothesis.__version__, "cuda", torch.version.cuda)'; nproc; git log -1 --format=%h 2>/dev/null; } > $O/machine.txt 2>&1
KB=tests/fixtures/kernelbench
V="python3 -m harness verify --backend cuda --no-render"
step() {  # name limit command...
    local name=$1 limit=$2; shift 2; local t=$(date +%s)
    timeout -k 10 $limit "$@" > $R/$name.log 2>&1; local rc=$?
    echo "$name rc=$rc seconds=$(( $(date +%s) - t ))" | tee -a $O/steps.txt
}
for s in ${STEPS:-wild norms kernelbench mutate:add_rmsnorm}; do case $s in
    wild) step wild ${LWILD:-200} $V --plugin examples/plugins/as_written.py --select 'wild_*' --report-dir $R/wild ;;
    first) step first ${LFIRST:-120} $V --plugin examples/plugins/tutorial_rmsnorm.py --select tutorial_rmsnorm --report-dir $R/first ;;
    case:*) step case ${LCASE:-120} $V --plugin examples/plugins/as_written.py --select "${CASE_KERNEL:-wild_*}" --case "${s#*:}" --report-dir $R/case ;;
    gate) step gate ${LGATE:-560} make verify BACKEND=cuda REPORT=$R/gate ;;
    gatepy) step gate ${LGATE:-560} python3 -m harness gate --backend cuda --report-dir $R/gate ;;  # SIGTERM reaches the harness: partial reports kept
    kb1) step kb1 ${LKB:-300} python3 scripts/kernelbench_level1.py --dir third_party/KernelBench/level1 --jobs ${KBJOBS:-8} --timeout ${KBT:-120} --max-examples 3 --out $R/kb1.md --json $R/kb1.json ;;
    norms) step norms ${LNORMS:-200} $V --op rmsnorm --op add_rmsnorm --report-dir $R/norms ;;
    kernelbench) for p in softmax_torch softmax_naive; do step kb_$p 60 $V --reference $KB/softmax_problem.py --candidate $KB/$p.py --report-dir $R/kb_$p; done
                 for p in rowmean_triton rowmean_triton_tail; do step kb_$p 60 $V --reference $KB/rowmean_problem.py --candidate $KB/$p.py --report-dir $R/kb_$p; done ;;
    bench:*) for op in ${s#*:}; do op=${op//,/ }; for o in $op; do  # OPS comma-separated: specialized as Triton does, then as the kernels ask
        step bench_${o}_all ${LBENCH:-300} env HARNESS_SPECIALIZE_ALL=1 python3 -m harness bench --op $o --select 'triton*' --report-dir $R/bench_all
        step bench_${o}_runtime ${LBENCH:-300} python3 -m harness bench --op $o --select 'triton*' --report-dir $R/bench_runtime; done; done ;;
    mutate:*) step mutate_${s#*:} ${LMUT:-240} python3 -m harness mutate --backend cuda --op ${s#*:} --report-dir $R/mut_${s#*:} ;;
esac; done
python3 scripts/failures.py $R/*/verify.json $R/*/mutation.json > $O/fail.txt 2>&1
for f in $R/*.log; do tail -25 $f; done > $O/tails.txt 2>&1
tar czf $O/gpu.tgz --exclude=incremental $R
