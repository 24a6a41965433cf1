#!/usr/bin/env bash
# Resident memory for 1, 2 and 4 instances of weight-heavy programs (about 84 MB of weights):
# portable, XNNPACK with its weights in the .pte, XNNPACK with its weights in a .ptd.
# Exports the programs into target/bench-models (needs the export venv, see scripts/export),
# then runs io.etserve.bench.InstanceMemory once per (program, N) in a fresh JVM.
#   bench/weights-once.sh            -> target/bench/weights-once.jsonl
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=target/bench
mkdir -p "$OUT"
[[ -f target/bench-models/heavy-xnnpack-ptd/1/model.ptd ]] || scripts/export/export.sh --bench
mvn -B -q -o test-compile
# io.etserve.runtime needs nothing but the JDK and its own classes (natives included).
CP="target/test-classes:target/classes"
: > "$OUT/weights-once.jsonl"
for model in heavy-portable heavy-xnnpack heavy-xnnpack-ptd; do
  for n in 1 2 4; do
    java --enable-native-access=ALL-UNNAMED -Xmx256m -cp "$CP" io.etserve.bench.InstanceMemory \
      "target/bench-models/$model/1/model.pte" "$n" | tee -a "$OUT/weights-once.jsonl"
  done
done
