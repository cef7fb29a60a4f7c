#!/usr/bin/env bash
# Runs the record-reader fuzz target for a bounded time: `fuzz/run.sh [SECONDS] [LIBFUZZER
# FLAGS...]` (default 60 s); e.g. `fuzz/run.sh 300 -len_control=0` tries long inputs at once.
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
