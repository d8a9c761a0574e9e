#!/usr/bin/env bash
# The main job (README's first command): from the bundled fixtures, write a migrated copy of the example
# scripts, the compatibility report and the pre-migration checklist, then say where they are.
# Assumes .venv exists (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
examples=fixtures/examples
reference=fixtures/compat/results-neuron-sim.jsonl
out=out
mkdir -p "$out"

echo "==> [1/3] Migrating $examples into $out/migrated (the examples themselves are not modified)"
status=0
"$bin/neuron-migrate" --output-dir "$out/migrated" "$examples" || status=$?
# Exit 1 only means manual work remains, which the example scripts are written to show.
if [ "$status" -gt 1 ]; then
    echo "neuron-migrate failed with exit code $status" >&2
    exit "$status"
fi

echo "==> [2/3] Compatibility report from $reference"
if [ ! -f "$reference" ]; then
    echo "error: $reference is missing: run 'neuron-compat run' (see README) or restore the file from git" >&2
    exit 2
fi
"$bin/neuron-compat" report "$reference" -o "$out/compat.html"

echo "==> [3/3] Pre-migration checklist for $examples"
"$bin/neuron-migrate" checklist "$examples" -o "$out/checklist.html"
"$bin/neuron-migrate" checklist "$examples" -o "$out/checklist.md"

cat <<SUMMARY

Done. Open these files in a browser (they work offline):
  compatibility report: $(pwd)/$out/compat.html
  checklist:            $(pwd)/$out/checklist.html   (Markdown: $out/checklist.md)
  migrated scripts:     $(pwd)/$out/migrated/
SUMMARY
