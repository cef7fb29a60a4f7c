#!/usr/bin/env node
// Runs the transcript-sync binary of this machine's platform package, installed beside this
// one by npm through `optionalDependencies` (npm skips the packages whose `os`, `cpu` and
// `libc` do not match), with this process's arguments, standard streams and exit status.
//
// The binary runs as a child rather than in place of this process (Node.js has no exec), so
// the signals a terminal or a supervisor sends here are passed on to it; `service install`
// run through here names the binary itself, which a service manager then runs without Node.js.
"use strict";

const { spawn } = require("node:child_process");

// One line per platform a release builds: `process.platform process.arch` → its package.
const PACKAGES = {
  "linux x64": "transcript-sync-linux-x64",
  "linux arm64": "transcript-sync-linux-arm64",
  "darwin x64": "transcript-sync-darwin-x64",
  "darwin arm64": "transcript-sync-darwin-arm64",
};

function binaryPath() {
  const platform = `${process.platform} ${process.arch}`;
  const name = PACKAGES[platform];
  if (!name) {
    fail(`no transcript-sync binary is built for ${platform}; ` +
      "build it from source: cargo install transcript-sync");
  }
  try {
    return require.resolve(`${name}/bin/transcript-sync`);
  } catch {
    fail(`the package ${name}, which holds the binary for ${platform}, is not installed ` +
      "beside this one; install again without --no-optional (or --omit=optional), " +
      "or on a musl system build from source: cargo install transcript-sync");
  }
}

function fail(message) {
  process.stderr.write(`transcript-sync: ${message}\n`);
  process.exit(1);
}

const child = spawn(binaryPath(), process.argv.slice(2), { stdio: "inherit" });
const forwarded = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"];
for (const signal of forwarded) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (error) => fail(`could not run ${child.spawnfile}: ${error.message}`));
child.on("exit", (code, signal) => {
  if (signal) {
    // Die of the same signal, so that the caller sees what the binary saw.
    for (const s of forwarded) process.removeAllListeners(s);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code);
});
