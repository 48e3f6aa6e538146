#!/usr/bin/env bash
# GPU batch for a lent machine (docs/gpu-runs.md): several streams side by side, each on the GPU
# index it names, each bounded by LIMIT seconds; run from the repository root with the image's
# python3. The Liger streams need the git-ignored .whl/ (the liger-kernel wheel) and .liger/repo
# (its test files at the same release): docs/library-mutation.md.
#   STREAMS="verify:0 camp0/4:1 camp1/4:2 rms_norm:5 vop:layer_norm:0"   (stream:gpu; vop:OP verifies one op, campop:OP runs its campaign)
#   LIMIT (s, default 540)  GJOBS (mutate --jobs of the campaign shards)  LJOBS/TJOBS/TSAMPLE (Liger)
#   SHARD (Liger --shard, empty = all)  MAXEX (Liger --max-examples, default 8)
#   TXDIST (pytest-xdist workers inside Liger's test command, default 0: none)
#   LEXTRA (more mutate flags for the Liger streams, e.g. --no-memcheck)
# The whole batch ends within LIMIT + 70 s (timeout's -k 40, then 30 s for the harness to write
# its partial report): keep that under the device call's limit, or nothing comes back.
# Reports land in reports/out/gpu/<stream>; logs in reports/out/logs; all tarred into $OUT/reports.tgz.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
LIMIT=${LIMIT:-540}; GJOBS=${GJOBS:-auto}; LJOBS=${LJOBS:-6}; TJOBS=${TJOBS:-3}; TSAMPLE=${TSAMPLE:-20}
SHARD=${SHARD:-}; MAXEX=${MAXEX:-8}; TXDIST=${TXDIST:-0}; LEXTRA=${LEXTRA:-}
mkdir -p reports/out/logs reports/out/gpu /tmp/site
python3 -m pip install -q --no-deps --target /tmp/site .whl/liger_kernel-0.8.5-py3-none-any.whl >/dev/null 2>&1
export PYTHONPATH=$ROOT:/tmp/site
{ nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)'; nproc; } > reports/out/logs/machine.txt 2>&1
EQ=""; [ -f examples/liger_equivalent.toml ] && EQ="--equivalent examples/liger_equivalent.toml"

liger() {  # name module plugin carrier testfile [extra...]
    local name=$1 mod=$2 plugin=$3 carrier=$4 tfile=$5; shift 5
    python3 -m harness mutate --backend cuda --mutate-module "$mod" --plugin "examples/plugins/$plugin" \
        --carrier "$carrier" --max-examples "$MAXEX" --jobs "$LJOBS" --tests-jobs "$TJOBS" --tests-sample "$TSAMPLE" \
        --tests "cd $ROOT/.liger/repo && python3 -m pytest -x -q $( [ "$TXDIST" -gt 0 ] && echo "-n $TXDIST" ) test/transformers/$tfile" \
        $EQ ${SHARD:+--shard $SHARD} --report-dir "reports/out/gpu/$name" $LEXTRA "$@"
}

stream() {
    local s=$1
    case $s in
        verify) python3 -m harness verify --backend cuda --report-dir reports/out/gpu/verify --no-render \
                    && python3 -m harness train-check --backend cuda --report-dir reports/out/gpu/verify ;;
        camp) python3 -m harness mutate --backend cuda --jobs "$GJOBS" --report-dir reports/out/gpu/camp ;;
        campop:*) python3 -m harness mutate --backend cuda --jobs "$GJOBS" --op "${s#campop:}" \
                    --report-dir "reports/out/gpu/camp_${s#campop:}" ;;
        camp*) local part=${s#camp}; python3 -m harness mutate --backend cuda --jobs "$GJOBS" --shard "$part" \
                    --report-dir "reports/out/gpu/camp_${part%/*}" ;;
        iw) python3 -m harness mutate --backend cuda --jobs "$GJOBS" --select 'gen.*drop_int64_cast*,cat.row_offset_int32' \
                    --report-dir reports/out/gpu/iw ;;
        rms_norm) liger rms_norm liger_kernel.ops.rms_norm liger_rmsnorm.py liger_rmsnorm_gemma_out_of_place test_rms_norm.py ;;
        rms_llama) liger rms_llama liger_kernel.ops.rms_norm liger_rmsnorm.py liger_rmsnorm_llama_declared test_rms_norm.py ;;
        layer_norm) liger layer_norm liger_kernel.ops.layer_norm liger_layer_norm.py liger_layer_norm test_layer_norm.py ;;
        softmax) liger softmax liger_kernel.ops.softmax liger_softmax.py liger_softmax_fp32 test_softmax.py ;;
        swiglu) liger swiglu liger_kernel.ops.swiglu liger_swiglu.py liger_swiglu_bf16 test_swiglu.py ;;
        cross_entropy) liger cross_entropy liger_kernel.ops.cross_entropy liger_cross_entropy.py liger_cross_entropy_contiguous test_cross_entropy.py ;;
        ce_ext) liger ce_ext liger_kernel.ops.cross_entropy cross_entropy_ext.py liger_cross_entropy_ext_contiguous test_cross_entropy.py ;;
        vop:*) python3 -m harness verify --backend cuda --op "${s#vop:}" --report-dir "reports/out/gpu/verify_${s#vop:}" --no-render ;;
        torch_ref) python3 -m harness verify --backend cuda --plugin tests/fixtures/torch_reference_ops.py --select torch_fp32 \
                    --report-dir reports/out/gpu/torch_ref --no-render ;;
        verify_ext) python3 -m harness verify --backend cuda --plugin examples/plugins/cross_entropy_ext.py --op cross_entropy_ext \
                    --report-dir reports/out/gpu/verify_ext --no-render ;;
        liger_verify) python3 -m harness verify --backend cuda $(for f in examples/plugins/liger_*.py; do echo --plugin $f; done) \
                    --select 'liger_*' --report-dir reports/out/gpu/liger_verify --no-render ;;
        flce) liger flce liger_kernel.ops.cross_entropy liger_flce.py liger_flce_fp32 test_fused_linear_cross_entropy.py \
                    --mutate-module liger_kernel.ops.utils \
                    --select 'gen.liger_kernel.ops.cross_entropy.*,gen.liger_kernel.ops.utils.element_mul_kernel.*' ;;
        script:*) python3 "${s#script:}" ;;
        *) echo "unknown stream $s" ;;
    esac
}

export -f liger stream
export ROOT MAXEX LJOBS TJOBS TSAMPLE SHARD GJOBS EQ TXDIST LEXTRA
start=$(date +%s)
pids=()
for sg in ${STREAMS:-verify:0}; do
    s=${sg%:*}; g=${sg##*:}; log="reports/out/logs/$(echo "$s" | tr '/:' '__').log"
    ( export CUDA_VISIBLE_DEVICES=$g; t0=$(date +%s); timeout -k 40 "$LIMIT" bash -c "stream '$s'" > "$log" 2>&1
      echo "rc=$? seconds=$(( $(date +%s) - t0 )) gpu=$g" >> "$log" ) &
    pids+=($!)
done
# GPU memory / utilisation every 20 s
( while true; do nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader >> reports/out/logs/smi.txt 2>/dev/null; sleep 20; done ) &
smi=$!
wait "${pids[@]}"
kill $smi 2>/dev/null
# timeout returns when its bash child dies of SIGTERM, while the harness (which handles SIGTERM by
# writing its partial report and store) may still be finishing: wait for it before tarring
for i in $(seq 15); do pgrep -f "python3 -m harness" >/dev/null || break; sleep 2; done
echo "all streams done in $(( $(date +%s) - start )) s"
for f in reports/out/logs/*.log; do echo "== $f"; tail -n 4 "$f"; done
tar czf "${OUT:-/tmp}/reports.tgz" reports/out
