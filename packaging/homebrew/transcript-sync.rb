# The Homebrew formula of transcript-sync, rendered by scripts/dist into dist/transcript-sync.rb
# with the source tarball's url and sha256 (a tap publishes that file). It builds from source
# with Homebrew's own Rust, on macOS and on Linux, Intel and ARM alike; no compiler of the
# user's is needed. SQLite and zstd are compiled into the binary, so nothing else is linked.
class TranscriptSync < Formula
  desc "Archive AI coding agents' sessions: every record, exactly once, in order"
  homepage "@HOMEPAGE@"
  url "@URL@"
  version "@VERSION@"
  sha256 "@SHA256@"
  license any_of: ["MIT", "Apache-2.0"]

  depends_on "rust" => :build

  def install
    system "cargo", "install", *std_cargo_args
    generate_completions_from_executable(bin/"transcript-sync", "completions")
    mkdir "man1"
    system bin/"transcript-sync", "man", "--dir", "man1"
    man1.install Dir["man1/*.1"]
  end

  service do
    run [opt_bin/"transcript-sync", "run"]
    keep_alive successful_exit: false
    log_path var/"log/transcript-sync.log"
    error_log_path var/"log/transcript-sync.log"
  end

  test do
    assert_match version.to_s, shell_output("#{bin}/transcript-sync --version")
    (testpath/".claude/projects/p").mkpath
    (testpath/".claude/projects/p/s.jsonl").write <<~JSONL
      {"type":"user","sessionId":"s","uuid":"u1","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"hello"}}
    JSONL
    system bin/"transcript-sync", "run", "--once", "--db", testpath/"archive.db"
    assert_match "s", shell_output("#{bin}/transcript-sync sessions --db #{testpath}/archive.db")
  end
end
