#!/usr/bin/env bash
# First-request latency of the CPU demo models in a fresh JVM, with and without warm-up
# (warmup: 0 and 2 random samples), five fresh JVMs each.
#   bench/first-request.sh           -> target/bench/first-request.jsonl
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=target/bench
mkdir -p "$OUT"
mvn -B -q -o test-compile
CP="target/test-classes:target/classes"
: > "$OUT/first-request.jsonl"
for model in demo-portable demo-xnnpack; do
  for samples in 0 2; do
    for run in 1 2 3 4 5; do
      java --enable-native-access=ALL-UNNAMED -cp "$CP" io.etserve.bench.FirstRequestLatency \
        "models/$model/1/model.pte" "$samples" | tee -a "$OUT/first-request.jsonl"
    done
  done
done
