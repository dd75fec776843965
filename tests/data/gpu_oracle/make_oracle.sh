# Run on the GPU machine from the project root, with .gpu/ prepared as tests/data/gpu_oracle/README.md says;
# writes the oracle traces (gzip) and logs under $OUT.
# One device call: examples under irtrace run (the oracle for --no-gpu), gemm_on_gpu's check,
# fasterkernels FA2 + decode under --machine-code --bench, and the renamed-main bench.
site=$(mktemp -d) && tar -C "$site" -xJf .gpu/site.tar.xz && export PYTHONPATH="$site:$PWD"
for w in .gpu/fk/*.whl; do python3 -m zipfile -e "$w" "$site"; done
ROOT=$PWD
nvidia-smi -L; python3 -c "import tilelang, torch; print(tilelang.__version__, torch.__version__, torch.cuda.get_device_name())"
mkdir -p $OUT/gpu $OUT/extra
one() {
  f=$1; name=$(echo $f | tr '/' '_' | sed 's/.py$//'); d=$(dirname $f); s=$(date +%s)
  (cd $ROOT/.gpu/ex/$d && timeout 200 python3 -m irtrace.cli run -q -o $OUT/gpu/$name.jsonl -- python3 $(basename $f) > $OUT/gpu/$name.log 2>&1; echo "$name rc=$? s=$(( $(date +%s)-s ))" >> $OUT/gpu/summary.txt)
}
export -f one; export ROOT OUT PYTHONPATH
(timeout 300 bash -c "cat tests/data/gpu_oracle/tilelang_examples.txt | xargs -P 8 -I{} bash -c \"one {}\"") &
EX=$!
cat > /tmp/extras.sh <<'XEOF'
cd $ROOT/examples
timeout 60 python3 gemm_on_gpu.py --size 2048 > $OUT/extra/gemm_on_gpu_plain.log 2>&1; echo "gemm_on_gpu plain rc=$?" >> $OUT/extra/summary.txt
python3 -m irtrace.cli run -o $OUT/extra/gemm_on_gpu.jsonl -- python3 gemm_on_gpu.py > $OUT/extra/gemm_on_gpu_traced.log 2>&1; echo "gemm_on_gpu traced rc=$?" >> $OUT/extra/summary.txt
python3 -m irtrace.cli run -o $OUT/extra/eager_gemm.jsonl -- python3 eager_gemm.py > $OUT/extra/eager_gemm.log 2>&1; echo "eager_gemm traced rc=$?" >> $OUT/extra/summary.txt
cd $ROOT
timeout 90 python3 tests/data/gpu_oracle/fasterkernels_check.py > $OUT/extra/fk_plain.log 2>&1; echo "fk plain rc=$?" >> $OUT/extra/summary.txt
timeout 120 python3 -m irtrace.cli run --machine-code --bench -o $OUT/extra/fk.jsonl -- python3 tests/data/gpu_oracle/fasterkernels_check.py > $OUT/extra/fk_traced.log 2>&1; echo "fk traced rc=$?" >> $OUT/extra/summary.txt
python3 -m irtrace.cli show $OUT/extra/fk.jsonl > $OUT/extra/fk_show.txt 2>&1
python3 - $OUT/extra/fk.jsonl > $OUT/extra/fk_bench.txt 2>&1 <<'PY'
import sys
from irtrace.core.trace_reader import load_trace
for r in load_trace(sys.argv[1]).runs:
    b = r.bench
    print(r.kernel, r.target, r.status, None if b is None else (b.latency_ms, b.error, b.shape, b.shape_from))
PY
(cd tests/data && python3 -m irtrace.cli run --bench -o $OUT/extra/main_factories.jsonl -- python3 main_factories.py > $OUT/extra/main_factories.log 2>&1; echo "main_factories bench rc=$?" >> $OUT/extra/summary.txt)
python3 - $OUT/extra/main_factories.jsonl >> $OUT/extra/fk_bench.txt 2>&1 <<'PY'
import sys
from irtrace.core.trace_reader import load_trace
for r in load_trace(sys.argv[1]).runs:
    b = r.bench
    print(r.kernel, r.target, r.status, None if b is None else (b.latency_ms, b.error, b.shape, b.shape_from))
PY
(cd examples && timeout 100 python3 -m irtrace.cli run -o $OUT/extra/autotune_gemm.jsonl -- python3 autotune_gemm.py > $OUT/extra/autotune_gemm.log 2>&1; echo "autotune_gemm traced rc=$?" >> $OUT/extra/summary.txt)
XEOF
(timeout 330 bash /tmp/extras.sh) 
wait $EX
gzip -9 $OUT/gpu/*.jsonl $OUT/extra/*.jsonl
cat $OUT/gpu/summary.txt $OUT/extra/summary.txt $OUT/extra/fk_bench.txt
grep -h DIGEST $OUT/extra/fk_*.log
du -sh $OUT
