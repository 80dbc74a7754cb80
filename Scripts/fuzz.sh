#!/usr/bin/env bash
# make fuzz: libFuzzer over reading and validating models, seeded from the
# fixtures, for FUZZ_SECONDS (default 120). A crash is saved under
# .build/fuzz/crashes/; copy it to Fixtures/Fuzz/ so the test suite replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzzer=$1
work=.build/fuzz
mkdir -p "$work/corpus" "$work/crashes"
# Seeds: every fixture specification, valid and broken (ignored if unreadable).
find Fixtures/Models Fixtures/Broken Fixtures/Fuzz -name '*.mlmodel' -type f -size -1M | while read -r file; do
    cp "$file" "$work/corpus/$(echo "$file" | tr '/' '_')"
done
"$fuzzer" "$work/corpus" -artifact_prefix="$work/crashes/" \
    -max_total_time="${FUZZ_SECONDS:-120}" -max_len=65536 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1
