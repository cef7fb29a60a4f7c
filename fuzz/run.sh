#!/usr/bin/env bash
# Runs each fuzz target for a bounded time: `fuzz/run.sh [SECONDS] [LIBFUZZER FLAGS...]`
# (default 60 s each); e.g. `fuzz/run.sh 300 -len_control=0` tries long inputs at once.
# `read_records` fuzzes the record reader; `validate_record` checks the single-pass JSON
# checker against serde_json, starting from the JSON samples in `fuzz/seeds/validate_record`.
# cargo-fuzz needs nightly flags: on a stable toolchain, RUSTC_BOOTSTRAP=1 allows them.
# Install it once with `cargo install cargo-fuzz`. Findings land in fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-60}"
shift || true
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
# Inputs up to 64 KiB reach past the reader's smallest chunk (4 KiB) and raw-byte cap.
RUSTC_BOOTSTRAP=1 cargo fuzz run read_records -- \
    -max_total_time="$seconds" -max_len=65536 -timeout=10 "$@"
# The corpus directory comes first: libFuzzer writes what it finds there, not into the seeds.
mkdir -p corpus/validate_record
RUSTC_BOOTSTRAP=1 cargo fuzz run validate_record corpus/validate_record seeds/validate_record -- \
    -max_total_time="$seconds" -max_len=4096 -timeout=10 "$@"
