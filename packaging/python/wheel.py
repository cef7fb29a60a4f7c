#!/usr/bin/env python3
"""Packs an already built transcript-sync binary into a wheel, the way maturin's
`bindings = "bin"` lays one out: the binary in `<name>-<version>.data/scripts/`, which pip and
uv install into the environment's `bin/`, and no Python code. The binary is built once, by
scripts/dist, for every artifact; building it again through maturin would double the release
build for the same bytes.

    wheel.py BINARY VERSION PLATFORM_TAG README OUT_DIR

PLATFORM_TAG is the wheel's platform part, such as
`manylinux_2_17_x86_64.manylinux2014_x86_64`: the caller has checked that the binary needs no
newer glibc. Every file's time is SOURCE_DATE_EPOCH (or 1980-01-01, the earliest a zip holds),
so the same binary gives the same wheel. Prints the wheel's path.
"""

import base64
import hashlib
import os
import sys
import time
import zipfile

NAME = "transcript-sync"
DIST = "transcript_sync"
SUMMARY = (
    "Archive AI coding agents' sessions (transcripts, documents, databases): "
    "every record, exactly once, in order"
)


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def metadata(version: str, readme: str) -> bytes:
    head = [
        "Metadata-Version: 2.1",
        f"Name: {NAME}",
        f"Version: {version}",
        f"Summary: {SUMMARY}",
        "License: MIT OR Apache-2.0",
        "Keywords: ai,agents,transcripts,archive,claude-code,codex",
        "Classifier: Environment :: Console",
        "Classifier: Operating System :: POSIX :: Linux",
        "Classifier: Programming Language :: Rust",
        "Requires-Python: >=3.7",
        "Description-Content-Type: text/markdown",
    ]
    return ("\n".join(head) + "\n\n" + readme).encode()


def wheel_file(tags: list[str]) -> bytes:
    lines = ["Wheel-Version: 1.0", "Generator: transcript-sync packaging/python/wheel.py"]
    lines.append("Root-Is-Purelib: false")
    lines += [f"Tag: {tag}" for tag in tags]
    return ("\n".join(lines) + "\n").encode()


def main() -> None:
    binary, version, platform, readme_path, out_dir = sys.argv[1:6]
    tags = [f"py3-none-{p}" for p in platform.split(".")]
    wheel = os.path.join(out_dir, f"{DIST}-{version}-py3-none-{platform}.whl")
    epoch = max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)
    stamp = time.gmtime(epoch)[:6]
    with open(binary, "rb") as f:
        exe = f.read()
    with open(readme_path, encoding="utf-8") as f:
        readme = f.read()
    info = f"{DIST}-{version}.dist-info"
    files = [
        (f"{DIST}-{version}.data/scripts/{NAME}", exe, 0o755),
        (f"{info}/METADATA", metadata(version, readme), 0o644),
        (f"{info}/WHEEL", wheel_file(tags), 0o644),
    ]
    record = "".join(f"{p},{record_hash(d)},{len(d)}\n" for p, d, _ in files)
    files.append((f"{info}/RECORD", (record + f"{info}/RECORD,,\n").encode(), 0o644))
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data, mode in files:
            entry = zipfile.ZipInfo(path, date_time=stamp)
            # The high 16 bits are the Unix mode: pip and uv keep the executable bit from it.
            entry.external_attr = (0o100000 | mode) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(entry, data, compresslevel=9)
    print(wheel)


if __name__ == "__main__":
    main()
