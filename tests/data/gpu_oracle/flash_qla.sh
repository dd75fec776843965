# On the GPU machine from the project root, with .gpu/site.tar.xz and .gpu/fq/flash_qla-0.1.3-*.whl
# (README.md here): flash-qla's forward and backward untraced, then under
# `irtrace run --machine-code --bench`; prints both digests and what each kernel's bench gave.
PYTHON=${PYTHON:-python3}
site=$(mktemp -d) && tar -C "$site" -xJf .gpu/site.tar.xz
for w in .gpu/fq/*.whl; do "$PYTHON" -m zipfile -e "$w" "$site"; done
export PYTHONPATH="$site:$PWD"
W=${OUT:-$(mktemp -d)}
timeout -k 5 200 "$PYTHON" tests/data/gpu_oracle/flash_qla_check.py > "$W/fq_plain.log" 2>&1
echo "plain rc=$?"
timeout -k 10 540 "$PYTHON" -m irtrace.cli run --machine-code --bench -o "$W/fq.jsonl" -- "$PYTHON" tests/data/gpu_oracle/flash_qla_check.py > "$W/fq_traced.log" 2>&1
echo "traced rc=$?"
grep -h DIGEST "$W"/fq_plain.log "$W"/fq_traced.log
tail -n 5 "$W/fq_plain.log" "$W/fq_traced.log" | cut -c1-300
"$PYTHON" - "$W/fq.jsonl" << 'PY'
import sys
from irtrace.trace.reader import load_trace
runs = load_trace(sys.argv[1]).runs
print(len(runs), "runs")
for r in runs:
    b = r.bench
    print(r.kernel, r.target, r.status, None if b is None else (b.latency_ms, b.error, b.shape_from))
PY
[ -f "$W/fq.jsonl" ] && gzip -9 -f "$W/fq.jsonl"
