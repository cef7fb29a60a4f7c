# Live latency with many files: appends round-robin over NFILES transcripts at a fixed RATE
# for SECONDS, without waiting for output, and times each record from its write() to its
# envelope read from the daemon's stdout tap. Prints p50, p99 and max in ms.
#
#   cargo build --release
#   python3 benches/many_files.py target/release/transcript-sync 1000 10 100
#
# Python, so its figures include the reader's own delay: compare runs of it with each other,
# not with benches/latency.rs. Used for the session index's gathering (BENCHMARKS.md).
import os, shutil, sys, time, threading, subprocess, tempfile
# usage: many_files.py BIN RATE SECONDS NFILES
BIN, RATE, SECS, NF = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
d = tempfile.mkdtemp(prefix="drv")
w = os.path.join(d, "watch"); os.makedirs(w)
paths = [os.path.join(w, f"s{i:03}.jsonl") for i in range(NF)]
for p in paths: open(p, "w").close()
env = dict(os.environ, RUST_LOG="warn")
p = subprocess.Popen([BIN, "run", "--sink", "stdout", "--db", os.path.join(d, "archive.db"), "--watch", w],
                     stdout=subprocess.PIPE, env=env, bufsize=0)
print("PID", p.pid, "DIR", d, flush=True)
arr = {}
def reader():
    f = p.stdout
    buf = b""
    while True:
        chunk = os.read(f.fileno(), 1 << 16)
        if not chunk: return
        t = time.perf_counter_ns()
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for l in lines:
            k = l.find(b'{"i":')
            if k >= 0:
                e = l.find(b",", k)
                arr[int(l[k+5:e])] = t
th = threading.Thread(target=reader, daemon=True); th.start()
fds = [os.open(q, os.O_WRONLY | os.O_APPEND) for q in paths]
# warm up
os.write(fds[0], b'{"warm":1}\n'); time.sleep(2)
pad = "x" * 200
n = int(RATE * SECS); gap = 1.0 / RATE
start_t = {}
t0 = time.perf_counter()
for i in range(n):
    rec = ('{"i":%d,"pad":"%s"}\n' % (i, pad)).encode()
    start_t[i] = time.perf_counter_ns()
    os.write(fds[i % NF], rec)
    nxt = t0 + (i + 1) * gap
    while True:
        r = nxt - time.perf_counter()
        if r <= 0: break
        if r > 0.0003: time.sleep(r - 0.0002)
time.sleep(1)
lat = sorted((arr[i] - start_t[i]) / 1e6 for i in range(n) if i in arr)
q = lambda x: lat[min(int(len(lat) * x), len(lat) - 1)]
print(f"rate {RATE} files {NF}: got {len(lat)}/{n}; p50 {q(.5):.3f} p99 {q(.99):.3f} max {lat[-1]:.3f} ms", flush=True)
p.terminate(); p.wait()
shutil.rmtree(d)
