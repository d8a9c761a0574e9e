#!/usr/bin/env bash
# The main job (README's first command): from the bundled fixtures, write a migrated copy of the example
# scripts, the compatibility report, a try of one migrated script on the stand-in device and the pre-migration
# checklist, then say where they are.
# Assumes .venv exists (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
examples=fixtures/examples
reference=fixtures/compat/results-neuron-sim.jsonl
standin=fixtures/compat/results-neuron-standin.jsonl  # the top 100 again, on the stand-in neuron device
out=out
mkdir -p "$out"

echo "==> [1/4] Migrating $examples into $out/migrated (the examples themselves are not modified)"
status=0
"$bin/neuron-migrate" --output-dir "$out/migrated" "$examples" || status=$?
# Exit 1 only means manual work remains, which the example scripts are written to show.
if [ "$status" -gt 1 ]; then
    echo "neuron-migrate failed with exit code $status" >&2
    exit "$status"
fi

echo "==> [2/4] Compatibility report from $reference and $standin, side by side"
for results in "$reference" "$standin"; do
    if [ ! -f "$results" ]; then
        echo "error: $results is missing: run 'neuron-compat run' (see docs/reference/compat-matrix.md) or restore the file from git" >&2
        exit 2
    fi
done
"$bin/neuron-compat" report "$reference" "$standin" -o "$out/compat.html"

echo "==> [3/4] Trying the migrated sft_llama.py for 2 steps on the stand-in neuron device (tiny models, local data)"
# The bundled example must run: a failed try (exit 1) still writes its report and the checklist shows it, then
# the demo fails.
try_status=0
"$bin/neuron-migrate" try "$out/migrated/sft_llama.py" --steps 2 -q --format json --report "$out/try.json" \
    -- --per_device_train_batch_size 1 || try_status=$?
if [ "$try_status" -gt 1 ]; then
    echo "neuron-migrate try failed with exit code $try_status" >&2
    exit "$try_status"
fi

echo "==> [4/4] Pre-migration checklist for $examples"
"$bin/neuron-migrate" checklist "$examples" -o "$out/checklist.html" --try-report "$out/try.json"
"$bin/neuron-migrate" checklist "$examples" -o "$out/checklist.md" --try-report "$out/try.json"

cat <<SUMMARY

Done. Open these files in a browser (they work offline):
  compatibility report: $(pwd)/$out/compat.html
  checklist:            $(pwd)/$out/checklist.html   (Markdown: $out/checklist.md)
  migrated scripts:     $(pwd)/$out/migrated/
  try report:           $(pwd)/$out/try.json   (shown per script in the checklist)
SUMMARY
if [ "$try_status" -ne 0 ]; then
    echo "error: the try of the migrated sft_llama.py failed; $out/try.json says where" >&2
    exit 1
fi
