#!/usr/bin/env bash
# Installs the peers of `cargo bench --bench compare`, idempotently:
# - rsyslog, with apt-get, without ever starting it as a service (the benchmark runs its own
#   rsyslogd in the foreground with a configuration of its own, never as the system logger);
# - syslog-ng, which Debian's packages make conflict with rsyslog, unpacked privately (with the
#   libraries it needs that are not installed) under target/bench/peers/syslog-ng.
# GNU coreutils (cat, tail) are assumed.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
peers="$target/bench/peers"
export DEBIAN_FRONTEND=noninteractive

updated=0
apt_update() {
    if ((updated == 0)); then
        apt-get update -qq
        updated=1
    fi
}

# rsyslog: a policy-rc.d that refuses keeps the package's scripts from starting the service.
if ! command -v rsyslogd >/dev/null 2>&1 || [[ ! -e /usr/lib/x86_64-linux-gnu/rsyslog/imfile.so ]]; then
    apt_update
    made_policy=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        made_policy=1
    fi
    trap 'if ((made_policy)); then rm -f /usr/sbin/policy-rc.d; fi' EXIT
    apt-get install -y -qq --no-install-recommends rsyslog >/dev/null
fi
if [[ -S /dev/log ]]; then
    echo "warning: /dev/log exists: some system logger is running; the benchmark's own peers never create it" >&2
fi

# syslog-ng: syslog-ng-core and the libraries it links that are not installed, unpacked.
sng="$peers/syslog-ng"
if [[ ! -x "$sng/usr/sbin/syslog-ng" ]]; then
    apt_update
    debs="$peers/debs"
    rm -rf "$sng" "$debs"
    mkdir -p "$debs" "$sng"
    want=(syslog-ng-core)
    for lib in libivykis0 libnet1 libpcre3 libwrap0; do
        dpkg -s "$lib" >/dev/null 2>&1 || want+=("$lib")
    done
    # As root, apt-get download warns that _apt cannot write the directory; harmless.
    if ! (cd "$debs" && apt-get download -qq "${want[@]}" 2>"$debs/download.log"); then
        cat "$debs/download.log" >&2
        exit 1
    fi
    for deb in "$debs"/*.deb; do
        dpkg -x "$deb" "$sng"
    done
fi
if [[ ! -x "$sng/usr/sbin/syslog-ng" ]]; then
    echo "error: syslog-ng-core did not unpack to $sng" >&2
    exit 1
fi
libs="$sng/usr/lib/x86_64-linux-gnu:$sng/usr/lib/syslog-ng:$sng/lib/x86_64-linux-gnu"
if LD_LIBRARY_PATH="$libs" ldd "$sng/usr/sbin/syslog-ng" | grep -q 'not found'; then
    echo "error: syslog-ng under $sng misses libraries:" >&2
    LD_LIBRARY_PATH="$libs" ldd "$sng/usr/sbin/syslog-ng" | grep 'not found' >&2
    exit 1
fi
echo "peers ready: $(command -v rsyslogd) ($(rsyslogd -v | head -1 | cut -d' ' -f1-3)), $sng/usr/sbin/syslog-ng"
