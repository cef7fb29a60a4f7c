#!/usr/bin/env python3
"""Counts Claude Code's model calls apart from transcript-sync, to check `usage` against: each
reply's `message.usage` once (by `message.id`, as every content block's record repeats it),
over the transcripts under DIR (default ~/.claude/projects). Prints one JSON object: calls,
input, output, cache_read, cache_write, which `transcript-sync usage --by agent --json
--harness claude-code` must equal for an archive of the same files.

Usage: scripts/usage-check.py [DIR]
"""

import glob
import json
import os
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.claude/projects")
calls = {}
for path in glob.glob(os.path.join(root, "**", "*.jsonl"), recursive=True):
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            message = record.get("message") if isinstance(record, dict) else None
            if record.get("type") != "assistant" or not isinstance(message, dict):
                continue
            usage, model = message.get("usage"), message.get("model") or ""
            if not isinstance(usage, dict) or not message.get("id") or model.startswith("<"):
                continue
            calls[message["id"]] = usage
fields = [("input", "input_tokens"), ("output", "output_tokens"),
          ("cache_read", "cache_read_input_tokens"),
          ("cache_write", "cache_creation_input_tokens")]
total = {"calls": len(calls)}
total.update({name: sum(u.get(key) or 0 for u in calls.values()) for name, key in fields})
print(json.dumps(total))
