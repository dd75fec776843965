# Run on the GPU machine from the project root (`bash tests/data/gpu_oracle/make_oracle.sh`), with
# .gpu/ prepared as tests/data/gpu_oracle/README.md says. One device call makes: TileLang's examples
# under plain `irtrace run` (the oracle for --no-gpu), the bundled GPU examples traced and their own
# checks, fasterkernels FA2 + decode under --machine-code --bench (digests traced vs untraced), and
# the renamed-`main` bench. Every command has a deadline inside BUDGET seconds, so the call ends in
# time even when an example hangs; everything is packed into ONE file, $OUT/oracle.tar.gz (the
# device tool brings back few files), with a watchdog that packs whatever exists if time runs out.
BUDGET=${BUDGET:-430}
PYTHON=${PYTHON:-python3}
LIST=${LIST:-tests/data/gpu_oracle/tilelang_examples.txt}
JOBS=${JOBS:-8}
START=$(date +%s)
ROOT=$PWD
W=$(mktemp -d)
mkdir -p "$W/gpu" "$W/extra"
export ROOT W START BUDGET PYTHON

left() { echo $((START + BUDGET - $(date +%s))); }
# deadline CAP: seconds a command may take, at most CAP and never past the budget
deadline() { local l; l=$(left); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
export -f left deadline

pack() {
  for f in "$W"/gpu/*.jsonl "$W"/extra/*.jsonl "$W"/gpu/*.partial "$W"/extra/*.partial; do
    [ -f "$f" ] && gzip -9 -f "$f"
  done
  tar -C "$W" -czf "$OUT/$1" gpu extra
}
export -f pack

if [ -z "$NO_SITE" ]; then
  site=$(mktemp -d) && tar -C "$site" -xJf .gpu/site.tar.xz
  for w in .gpu/fk/*.whl; do "$PYTHON" -m zipfile -e "$w" "$site"; done
  export PYTHONPATH="$site:$ROOT"
fi
{
  nvidia-smi -L
  "$PYTHON" -c "import sys, tilelang, torch; print(sys.version.split()[0], tilelang.__version__, torch.__version__, torch.cuda.get_device_name())"
} > "$W/extra/env.txt" 2>&1
cat "$W/extra/env.txt"

# the watchdog: if the end is not reached in time, pack what there is
(while [ ! -f "$W/done" ] && [ "$(left)" -gt -40 ]; do sleep 2; done
 [ -f "$W/done" ] || { echo "WATCHDOG: packing partial results"; pack oracle.tar.gz; }) &
WATCHDOG=$!

one() {
  f=$1
  name=$(echo "$f" | tr '/' '_' | sed 's/\.py$//')
  s=$(date +%s)
  t=$(deadline 240)
  if [ "$t" -lt 15 ]; then echo "$name skipped (no time left)" >> "$W/gpu/summary.txt"; return; fi
  (cd "$ROOT/.gpu/ex/$(dirname "$f")" && timeout -k 10 "$t" "$PYTHON" -m irtrace.cli run -q -o "$W/gpu/$name.jsonl" -- "$PYTHON" "$(basename "$f")" > "$W/gpu/$name.log" 2>&1
   echo "$name rc=$? s=$(($(date +%s) - s))" >> "$W/gpu/summary.txt")
}
export -f one
(grep -v '^#' "$LIST" | xargs -P "$JOBS" -I{} bash -c 'one {}') &
EXAMPLES=$!

# bench the kernels of a trace: name, target, status, (latency, error, shape, where the shape came from)
benches() {
  "$PYTHON" - "$1" << 'PY'
import sys
from irtrace.trace.reader import load_trace
for r in load_trace(sys.argv[1]).runs:
    b = r.bench
    print(r.kernel, r.target, r.status, None if b is None else (b.latency_ms, b.error, b.shape, b.shape_from))
PY
}
note() { echo "$1 rc=$2" >> "$W/extra/summary.txt"; }
(
  cd "$ROOT/examples" || exit
  timeout -k 5 "$(deadline 90)" "$PYTHON" gemm_on_gpu.py > "$W/extra/gemm_on_gpu_plain.log" 2>&1
  note "gemm_on_gpu plain (its own check)" $?
  for ex in gemm_on_gpu eager_gemm; do
    timeout -k 10 "$(deadline 150)" "$PYTHON" -m irtrace.cli run -q -o "$W/extra/$ex.jsonl" -- "$PYTHON" $ex.py > "$W/extra/${ex}_traced.log" 2>&1
    note "$ex traced" $?
  done
  cd "$ROOT" || exit
  timeout -k 5 "$(deadline 120)" "$PYTHON" tests/data/gpu_oracle/fasterkernels_check.py > "$W/extra/fk_plain.log" 2>&1
  note "fasterkernels plain" $?
  timeout -k 10 "$(deadline 180)" "$PYTHON" -m irtrace.cli run --machine-code --bench -o "$W/extra/fk.jsonl" -- "$PYTHON" tests/data/gpu_oracle/fasterkernels_check.py > "$W/extra/fk_traced.log" 2>&1
  note "fasterkernels traced --machine-code --bench" $?
  (echo "== fasterkernels"; benches "$W/extra/fk.jsonl") >> "$W/extra/bench.txt" 2>&1
  (cd tests/data && timeout -k 10 "$(deadline 120)" "$PYTHON" -m irtrace.cli run --bench -o "$W/extra/main_factories.jsonl" -- "$PYTHON" main_factories.py > "$W/extra/main_factories.log" 2>&1
   note "main_factories --bench" $?)
  (echo "== main_factories"; benches "$W/extra/main_factories.jsonl") >> "$W/extra/bench.txt" 2>&1
  cd "$ROOT/examples" || exit
  timeout -k 10 "$(deadline 200)" "$PYTHON" -m irtrace.cli run -q -o "$W/extra/autotune_gemm.jsonl" -- "$PYTHON" autotune_gemm.py > "$W/extra/autotune_gemm_traced.log" 2>&1
  note "autotune_gemm traced" $?
) &
EXTRAS=$!

wait $EXAMPLES $EXTRAS
touch "$W/done"
wait $WATCHDOG
pack oracle.tar.gz
echo "== examples (irtrace run on the GPU)"
sort "$W/gpu/summary.txt"
echo "== extras"
cat "$W/extra/summary.txt" "$W/extra/bench.txt"
grep -h DIGEST "$W"/extra/fk_*.log
tail -n 3 "$W/extra/gemm_on_gpu_plain.log"
for f in "$W"/gpu/*.log; do grep -q "rc=0" <(grep "$(basename "$f" .log) " "$W/gpu/summary.txt") || { echo "-- $(basename "$f")"; tail -n 4 "$f" | cut -c1-300; }; done
ls -la "$OUT"
echo "total s=$(($(date +%s) - START))"
