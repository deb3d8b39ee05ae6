#!/usr/bin/python3
"""CTR training (DeepFM) throughput and accuracy of sdp-train against PyTorch and TensorFlow, in one run.

For each shape and each thread count, --repeats times (alternating, so that drift in the
host's speed hits every tool alike): sdp-train (`threads: N`, one process) and each peer of
scripts/ctr_peers.py train the same model on the same LibSVM files, then evaluate on the test
file. Medians of the repeats are reported.

Shapes:
  sample         the SageMaker DeepFM sample: 39 fields, 117,581 table rows, K=32, MLP 256-128-64,
                 batch 1024 (synthetic Criteo-shaped data of scripts/ctr_data.py)
  criteo-kaggle  39 fields, 1,000,000 rows, K=16, MLP 400-400-400, batch 4096 (synthetic, the same way)
  a9a            LIBSVM's a9a ($SDP_DATA_DIR/a9a/a9a, tested on a9a.t; -1/+1 labels read as 0/1):
                 14 fields, 124 rows (ids 1..123), K=8, MLP 256-128-64, batch 256, 2 epochs;
                 skipped, saying so, when the files are not there
All: Adam, lr 1e-3 (--lr), dropout 0.5 (the sample's; --dropout), L2 0 (--l2), the last partial
batch of an epoch dropped by the peers (as the sample), 1 epoch on synthetic data (--epochs).

Tools: sdp-train (--sdp-train, default $SDP_TRAIN or build/sdp-train; without it, or when it has
no CTR models, the peers run alone and the report says why; at N > 1 threads also as N ranks of
one thread under mpirun, "sdp-train-ranks", the same global batch and LR), torch-sparse (nn.Embedding(sparse=
True) + SparseAdam for the tables, Adam for the rest), torch-dense (dense tables, Adam), tf (the
sample's model in TF2, tf.compat.v1 Adam, tf.data; in $SDP_BENCH_VENV, default /opt/sdp-bench-venv).

samples/s: steady state, the steps after a warm-up (min(10, steps/5) steps): the peers' own
timers; sdp-train's from its [step] lines (windowed samples_per_sec, log_every = the warm-up, the
first window left out). "all steps": every step (sdp-train's [done] samples_per_sec; both exclude
data loading and evaluation). AUC and log loss: on the whole test file after training (sdp-train's
[done] line; the peers' exact rank AUC). Peak RSS: each process's maximum resident set (wait4).
ratio: sdp-train at its best thread count over the fastest peer at its best thread count.
The torch peers at N threads run N OpenMP threads and N OpenBLAS threads; --torch-blas same,1
also tries 1 OpenBLAS thread and keeps the faster (their threads can contend for the cores). After
sdp-train's first run of a shape, scripts/deepfm_torch.py scores the model.safetensors it wrote
and the report shows whether it matches sdp-train's own AUC.

  scripts/bench-ctr.sh [--shapes sample,criteo-kaggle,a9a] [--threads 1,2] [--repeats 3]
                       [--train-samples N] [--test-samples 20000] [--quick] [--json FILE]
                       [--model deepfm|fm|lr] [--peers torch-sparse,torch-dense,tf] [--torch-blas same,1]
                       [--sdp-train PATH] [--sdp-set KEY=VALUE]
Synthetic training lines: sample 200,000, criteo-kaggle 100,000 (1 epoch; --train-samples sets
both). The defaults are sized for 10-15 minutes on 2 cores; --quick (tiny data, 1 repeat) takes
about 2 minutes.
Data are made in --work (default /tmp/sdp-bench-ctr) and kept for later runs.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import ctr_data  # noqa: E402  (numpy only)
VENV = os.environ.get("SDP_BENCH_VENV", "/opt/sdp-bench-venv")
DATA_DIR = os.environ.get("SDP_DATA_DIR", os.path.join(os.path.dirname(ROOT), "shared", "data"))
PEERS = ("torch-sparse", "torch-dense", "tf")
NOT_INSTALLED = "not installed: bash scripts/install-deps.sh --bench"
SHAPES = {
    "sample": dict(fields=39, rows=117581, k=32, hidden=[256, 128, 64], batch=1024, epochs=1, train=200000),
    "criteo-kaggle": dict(fields=39, rows=1000000, k=16, hidden=[400, 400, 400], batch=4096, epochs=1, train=100000),
    "a9a": dict(fields=14, rows=124, k=8, hidden=[256, 128, 64], batch=256, epochs=2),
}
RUN_TIMEOUT = 3600


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_child(cmd, env=None, timeout=RUN_TIMEOUT):
    """(exit status, stdout + stderr, max RSS in MiB) of cmd."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, out, usage.ru_maxrss / 1024.0


def last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"^Model name:\s*(.*)$", out, re.M)
        if m:
            return m.group(1).strip()
    except OSError:
        pass
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^model name\s*:\s*(.*)$", f.read(), re.M)
            return m.group(1).strip() if m else "unknown"
    except OSError:
        return "unknown"


class Shape:
    def __init__(self, name, spec, train, test, epochs):
        self.name, self.train, self.test, self.epochs = name, train, test, epochs
        self.__dict__.update({k: v for k, v in spec.items() if k not in ("epochs", "train")})
        self.hidden_arg = ",".join(map(str, self.hidden))


def count_lines(path):
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def prepare(name, args):
    """The shape's data files (made once in --work), or a reason it is skipped."""
    spec = dict(SHAPES[name])
    if name == "a9a":
        train, test = os.path.join(DATA_DIR, "a9a", "a9a"), os.path.join(DATA_DIR, "a9a", "a9a.t")
        if not (os.path.isfile(train) and os.path.isfile(test)):
            return None, f"no {train} and {test} (set SDP_DATA_DIR)"
        epochs = args.epochs or (1 if args.quick else spec["epochs"])
        return Shape(name, spec, train, test, epochs), None
    n_train, n_test = args.train_samples or spec["train"], args.test_samples
    if args.quick:
        n_train, n_test = max(6000, 3 * spec["batch"]), 2000
    out = os.path.join(args.work, f"{name}-v{ctr_data.VERSION}-f{spec['fields']}-r{spec['rows']}-n{n_train}-t{n_test}-s{args.seed}")
    train, test = os.path.join(out, "train.libsvm"), os.path.join(out, "test.libsvm")
    if not (os.path.isfile(train) and os.path.isfile(test)):
        tmp = out + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = [sys.executable, os.path.join(HERE, "ctr_data.py"), "--fields", str(spec["fields"]), "--rows",
               str(spec["rows"]), "--train", str(n_train), "--test", str(n_test), "--seed", str(args.seed),
               "--out", tmp]
        rc, text, _ = run_child(cmd)
        if rc != 0:
            return None, f"ctr_data.py failed ({rc}): {last_line(text)}"
        os.replace(tmp, out)
        log(f"# data {name}: {text.strip().replace(tmp, out)}")
    return Shape(name, spec, train, test, args.epochs or spec["epochs"]), None


def warmup_steps(shape, n_train):
    return min(10, shape.epochs * (n_train // shape.batch) // 5)


def sdp_job(shape, args, threads, tmp, warm, ranks=1):
    # N ranks of one thread each split the same global batch; the LR is the global batch's
    # (lr_scaling none), so every variant trains the same model.
    return f"""name: bench-ctr-{shape.name}
model: {{name: {args.model}, fields: {shape.fields}, table_rows: {shape.rows}, embedding_size: {shape.k}, hidden: [{', '.join(map(str, shape.hidden))}], dropout: {args.dropout}, l2: {args.l2}}}
threads: {threads}
data: {{format: libsvm, train: {shape.train}, test: {shape.test}, batch_size: {shape.batch // ranks}}}
train: {{epochs: {shape.epochs}, log_every: {max(1, warm)}}}
optimizer: {{name: adam, lr: {args.lr}, lr_scaling: none}}
checkpoint: {{dir: {tmp}/checkpoints}}
output: {{model_dir: {tmp}/model, metrics: ""}}
"""


def sdp_run(binary, shape, args, threads, warm, check_model=False, ranks=1):
    """One sdp-train run (one process of `threads` threads, or `ranks` processes of one thread
    under mpirun): a result dict, or {'error': why}."""
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        job = os.path.join(tmp, "job.yaml")
        with open(job, "w") as f:
            f.write(sdp_job(shape, args, 1 if ranks > 1 else threads, tmp, warm, ranks))
        cmd = [binary, "--config", job] + [a for s in args.sdp_set for a in ("--set", s)]
        if ranks > 1:
            cmd = ["mpirun", "-np", str(ranks), "--oversubscribe"] + cmd
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        rc, out, rss = run_child(cmd, env)
        if rc != 0:
            return {"error": f"exit {rc}: {last_line(out)}", "output": out[-3000:]}
        done = re.search(r"^\[done\](.*)$", out, re.M)
        if not done:
            return {"error": "no [done] line", "output": out[-3000:]}
        values = {k: float(v) for k, v in re.findall(r"(\w+)=([-+0-9.eEinfa]+)", done.group(1))}
        windows = [(int(s), float(r)) for s, r in
                   re.findall(r"^\[step (\d+)\].*?samples_per_sec=([0-9.eE+-]+)", out, re.M)]
        # Steady state: the windows after the first (log_every = the warm-up); samples / seconds.
        steady = None
        prev, samples, seconds = 0, 0.0, 0.0
        for i, (step, rate) in enumerate(windows):
            n = (step - prev) * shape.batch
            prev = step
            if i == 0 and warm > 0 or rate <= 0:
                continue
            samples += n
            seconds += n / rate
        if seconds > 0:
            steady = samples / seconds
        result = {"samples_per_sec": steady if steady else values.get("samples_per_sec", 0.0),
                  "samples_per_sec_all": values.get("samples_per_sec", 0.0),
                  "test_auc": values.get("test_auc", float("nan")),
                  "test_logloss": values.get("test_logloss", float("nan")),
                  "steps": int(values.get("steps", 0)), "train_seconds": values.get("train_seconds", 0.0),
                  "mlp_gemm_gflops": values.get("mlp_gemm_gflops", 0.0),
                  "peak_rss_mb": rss}
        if check_model:
            result["check"] = score_model(os.path.join(tmp, "model"), shape, result["test_auc"], result["test_logloss"])
        return result


def sgemm_peak(binary, threads, peaks):
    """oneDNN's sgemm rate at `threads` threads (sdp-train bench gemm), measured once."""
    if threads not in peaks:
        rc, out, _ = run_child([binary, "bench", "gemm", "--size", "1024", "--threads", str(threads)], timeout=300)
        m = re.search(r"gflops=([0-9.]+)", out)
        peaks[threads] = float(m.group(1)) if rc == 0 and m else None
    return peaks[threads]


def score_model(model_dir, shape, auc, logloss):
    """deepfm_torch.py's AUC and log loss of sdp-train's model.safetensors, next to sdp-train's own."""
    if not os.path.isfile(os.path.join(model_dir, "model.safetensors")):
        return "no model.safetensors written"
    rc, out, _ = run_child([sys.executable, os.path.join(HERE, "deepfm_torch.py"), "score", "--model-dir", model_dir,
                            "--test", shape.test, "--fields", str(shape.fields), "--embedding-size", str(shape.k),
                            "--hidden", shape.hidden_arg])
    m = re.search(r"test_auc=([0-9.naN]+) test_logloss=([0-9.naN]+)", out)
    if rc != 0 or not m:
        return f"deepfm_torch.py score failed: {last_line(out)}"
    a, l = float(m.group(1)), float(m.group(2))
    ok = abs(a - auc) < 2e-3 and abs(l - logloss) < 2e-3
    return (f"deepfm_torch.py scores sdp-train's model.safetensors AUC {a:.4f} logloss {l:.4f}, sdp-train reported "
            f"{auc:.4f} / {logloss:.4f}: {'match' if ok else 'MISMATCH'}")


def peer_run(peer, shape, args, threads, warm, blas=0):
    python = os.path.join(VENV, "bin", "python") if peer == "tf" else sys.executable
    cmd = [python, os.path.join(HERE, "ctr_peers.py"), "--peer", peer, "--train", shape.train, "--test", shape.test,
           "--fields", str(shape.fields), "--rows", str(shape.rows), "--embedding-size", str(shape.k),
           "--hidden", shape.hidden_arg, "--batch", str(shape.batch), "--epochs", str(shape.epochs),
           "--lr", str(args.lr), "--threads", str(threads), "--dropout", str(args.dropout), "--l2", str(args.l2),
           "--model", args.model, "--blas-threads", str(blas), "--warmup-steps", str(warm), "--cache-dir", os.path.join(args.work, "cache")]
    rc, out, rss = run_child(cmd, dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    result = None
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            try:
                result = json.loads(line)
                break
            except ValueError:
                pass
    if result is None:
        return {"error": f"exit {rc}: {last_line(out)}"}
    if "error" in result:
        return result
    result["peak_rss_mb"] = rss
    return result


def probe_tools(args):
    """({tool: None (runs) or why it is skipped}, sdp-train binary, versions)."""
    why, versions = {}, {}
    binary = args.sdp_train or os.environ.get("SDP_TRAIN") or os.path.join(ROOT, "build", "sdp-train")
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        why["sdp-train"] = f"no {binary}: build first (cmake -S . -B build && cmake --build build) or --sdp-train PATH"
    else:
        rc, out, _ = run_child([binary, "--version"], timeout=60)
        first = out.strip().splitlines()[0] if out.strip() else "?"
        kernels = re.search(r"^\s*CPU kernels (.*)$", out, re.M)
        versions["sdp-train"] = (first.replace("sdp-train ", "", 1)
                                 + (f", CPU kernels {kernels.group(1)}" if kernels else "") if rc == 0 else "?")
        with tempfile.TemporaryDirectory() as tmp:  # does this build have the CTR models?
            shape = Shape("probe", SHAPES["a9a"], "/dev/null", "/dev/null", 1)
            job = os.path.join(tmp, "job.yaml")
            with open(job, "w") as f:
                f.write(sdp_job(shape, args, 1, tmp, 1))
            rc, out, _ = run_child([binary, "validate", "--config", job, "--set", "data.format=synthetic"], timeout=60)
            if rc != 0 and re.search(r"unknown value 'deepfm'|unknown key 'model\.", out):
                why["sdp-train"] = f"{binary} has no CTR models (an older build?): {last_line(out)}"
    rc, out, _ = run_child([sys.executable, "-c", "import torch; print(torch.__version__)"], timeout=300)
    for peer in ("torch-sparse", "torch-dense"):
        why[peer] = None if rc == 0 else f"no PyTorch in {sys.executable}: {NOT_INSTALLED} (or PYTHON=...)"
    if rc == 0:
        versions["torch"] = last_line(out)
    python = os.path.join(VENV, "bin", "python")
    if not os.access(python, os.X_OK):
        why["tf"] = f"{NOT_INSTALLED} (no {python}; or SDP_BENCH_VENV=...)"
    else:
        rc, out, _ = run_child([python, "-c", "import tensorflow as tf; print(tf.__version__)"],
                               dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=300)
        why["tf"] = None if rc == 0 else f"{NOT_INSTALLED} ({last_line(out)})"
        if rc == 0:
            versions["tensorflow"] = last_line(out)
    why.setdefault("sdp-train", None)
    return why, binary, versions


def fmt(x, spec):
    return "-" if x is None or x != x else format(x, spec)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="sample,criteo-kaggle,a9a")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--train-samples", type=int, default=0,
                        help="synthetic shapes' training lines (default: sample 200000, criteo-kaggle 100000)")
    parser.add_argument("--test-samples", type=int, default=20000, help="synthetic shapes' test lines")
    parser.add_argument("--epochs", type=int, default=0, help="override every shape's epochs")
    parser.add_argument("--model", choices=("deepfm", "fm", "lr"), default="deepfm",
                        help="the model every tool trains (fm, lr: the shapes' tables without the MLP)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--dropout", type=float, default=0.5, help="drop probability")
    parser.add_argument("--l2", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=1, help="synthetic data seed")
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--torch-blas", default="same",
                        help="torch peers at more than 1 thread: OpenBLAS thread counts to try, the best counts "
                             "(e.g. same,1; same: as many as threads)")
    parser.add_argument("--sdp-train", default="", help="the binary (default $SDP_TRAIN, else build/sdp-train)")
    parser.add_argument("--sdp-set", action="append", default=[], metavar="KEY=VALUE",
                        help="a job key for sdp-train's runs (its --set; repeatable)")
    parser.add_argument("--work", default="/tmp/sdp-bench-ctr", help="data and caches (kept)")
    parser.add_argument("--quick", action="store_true", help="smoke test: tiny data, 1 repeat, a9a 1 epoch")
    parser.add_argument("--json", default="", help="also write every run as JSON lines to FILE")
    args = parser.parse_args()
    if args.quick:
        args.repeats = 1
    shapes = [s for s in args.shapes.split(",") if s]
    for s in shapes:
        if s not in SHAPES:
            parser.error(f"--shapes: unknown '{s}' (of {', '.join(SHAPES)})")
    peers = [p for p in args.peers.split(",") if p]
    for p in peers:
        if p not in PEERS:
            parser.error(f"--peers: unknown '{p}' (of {', '.join(PEERS)})")
    threads = [int(t) for t in args.threads.split(",") if t]
    os.makedirs(args.work, exist_ok=True)
    args.work = os.path.abspath(args.work)

    why, binary, versions = probe_tools(args)
    tools = ["sdp-train"] + peers
    runnable = [t for t in tools if why.get(t) is None]
    # sdp-train as N ranks of one thread (N = the thread count), as it runs on a node's cores.
    if "sdp-train" in runnable and shutil.which("mpirun"):
        runnable.insert(1, "sdp-train-ranks")
    print(f"# CTR benchmark {time.strftime('%Y-%m-%d %H:%M')}  CPU: {cpu_model()}  {os.cpu_count()} cores  "
          f"host {os.uname().nodename}")
    print(f"# versions: {'; '.join(f'{k} {v}' for k, v in versions.items())}")
    print(f"# command: {' '.join(sys.argv)}")
    print(f"# model {args.model}  repeats {args.repeats}  threads {args.threads}  lr {args.lr}  "
          f"dropout {args.dropout}  l2 {args.l2}  "
          f"synthetic test lines {2000 if args.quick else args.test_samples}{'  quick' if args.quick else ''}")
    for t in tools:
        if why.get(t):
            print(f"# {t}: skipped: {why[t]}")
    sys.stdout.flush()
    jsonf = open(args.json, "w") if args.json else None
    rows, summary, notes = [], [], []
    peaks = {}  # threads -> sgemm GFLOP/s
    for name in shapes:
        shape, skip = prepare(name, args)
        if shape is None:
            notes.append(f"{name}: skipped: {skip}")
            log(f"# {name}: skipped: {skip}")
            continue
        n_train = count_lines(shape.train)
        warm = warmup_steps(shape, n_train)
        notes.append(f"{name}: {n_train} training lines ({shape.train}), {count_lines(shape.test)} test lines, "
                     f"{shape.fields} fields, {shape.rows} rows, K={shape.k}, "
                     f"MLP {'-'.join(map(str, shape.hidden)) if args.model == 'deepfm' else 'none'}, "
                     f"batch {shape.batch}, {shape.epochs} epoch(s), warm-up {warm} steps")
        results = {}  # (tool, threads) -> [result]
        failed = {}
        checked = False
        for rep in range(args.repeats):
            for t in threads:
                for tool in runnable:
                    # torch peers: each OpenBLAS thread count of --torch-blas (0: as many as threads)
                    variants = sorted({0 if b in ("same", str(t)) else int(b) for b in args.torch_blas.split(",")}
                                      ) if tool.startswith("torch") and t > 1 else [0]
                    for blas in variants:
                        if tool in failed or (tool == "sdp-train-ranks" and t < 2):
                            continue
                        t0 = time.time()
                        if tool == "sdp-train-ranks":
                            r = sdp_run(binary, shape, args, t, warm, ranks=t)
                        elif tool == "sdp-train":
                            r = sdp_run(binary, shape, args, t, warm, check_model=not checked)
                            if "check" in r:
                                checked = True
                                notes.append(f"{name}: {r['check']}")
                        else:
                            r = peer_run(tool, shape, args, t, warm, blas)
                        if "error" in r:
                            failed[tool] = r["error"]
                            log(f"# {name} {tool} {t} threads: FAILED: {r['error']}")
                            if r.get("output"):
                                log(r["output"])
                            continue
                        results.setdefault((tool, t, blas), []).append(r)
                        log(f"# {name} {tool} threads {t}{f' BLAS {blas}' if blas else ''} repeat {rep + 1}: "
                            f"{r['samples_per_sec']:.0f} samples/s, AUC {r['test_auc']:.4f}, logloss "
                            f"{r['test_logloss']:.4f}, RSS {r['peak_rss_mb']:.0f} MB ({time.time() - t0:.0f} s)")
                        if jsonf:
                            jsonf.write(json.dumps(dict(r, shape=name, tool=tool, threads=t, repeat=rep + 1)) + "\n")
                            jsonf.flush()
        for tool, err in failed.items():
            notes.append(f"{name}: {tool} failed: {err}")
        best = {}
        for tool in runnable:
            for t in threads:
                configs = {blas: runs for (tl, th, blas), runs in results.items() if tl == tool and th == t}
                if not configs:
                    continue
                blas = max(configs, key=lambda b: statistics.median(r["samples_per_sec"] for r in configs[b]))
                runs = configs[blas]
                med = lambda key: statistics.median(r[key] for r in runs)
                label = f"{t}, BLAS {blas}" if blas else (f"{t}, BLAS {t}" if len(configs) > 1 else str(t))
                if tool == "sdp-train-ranks":
                    label = f"{t} ({t} ranks x 1)"
                if tool.startswith("sdp-train") and med("mlp_gemm_gflops") > 0:
                    # A rank's products against the sgemm peak of its own threads.
                    per_process = 1 if tool == "sdp-train-ranks" else t
                    peak = sgemm_peak(binary, per_process, peaks)
                    if peak:
                        notes.append(f"{name}: {tool} {label}: the MLP's products ran at {med('mlp_gemm_gflops'):.1f}"
                                     f" GFLOP/s a process, {100 * med('mlp_gemm_gflops') / peak:.0f} % of oneDNN's "
                                     f"sgemm peak at {per_process} thread(s) ({peak:.1f} GFLOP/s, "
                                     f"sdp-train bench gemm --size 1024)")
                row = dict(shape=name, tool=tool, threads=t, label=label, rate=med("samples_per_sec"),
                           rate_all=med("samples_per_sec_all"), auc=med("test_auc"), logloss=med("test_logloss"),
                           rss=max(r["peak_rss_mb"] for r in runs), n=len(runs))
                rows.append(row)
                if tool not in best or row["rate"] > best[tool]["rate"]:
                    best[tool] = row
        peer_best = [best[p] for p in peers if p in best]
        fastest = max(peer_best, key=lambda r: r["rate"]) if peer_best else None
        ours = [best[t] for t in ("sdp-train", "sdp-train-ranks") if t in best]
        summary.append((name, max(ours, key=lambda r: r["rate"]) if ours else None, fastest))

    print()
    print("| shape | tool | threads | samples/s | all steps | test AUC | logloss | peak RSS MB |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['shape']} | {r['tool']} | {r['label']} | {r['rate']:.0f} | {r['rate_all']:.0f} | "
              f"{fmt(r['auc'], '.4f')} | {fmt(r['logloss'], '.4f')} | {r['rss']:.0f} |")
    print()
    print("| shape | sdp-train best (threads) | fastest peer (threads) | ratio |")
    print("| --- | ---: | --- | ---: |")
    for name, sdp, peer in summary:
        s = f"{sdp['rate']:.0f} ({sdp['label']})" if sdp else "-"
        p = f"{peer['tool']} {peer['rate']:.0f} ({peer['label']})" if peer else "-"
        ratio = f"{sdp['rate'] / peer['rate']:.2f}x" if sdp and peer else "-"
        print(f"| {name} | {s} | {p} | {ratio} |")
    print()
    print(f"# samples/s: median of {args.repeats} runs, steady state (the first min(10, steps/5) steps left out);"
          " all steps: every step; neither counts data loading or evaluation.")
    print("# test AUC / logloss: the whole test file after training; peak RSS: the process's max RSS (wait4).")
    print("# ratio: sdp-train's samples/s at its best thread count over the fastest peer's at its best.")
    if args.torch_blas != "same":
        print(f"# torch peers at N > 1 threads: N OpenMP threads and the best of OpenBLAS threads {args.torch_blas}"
              " (shown as BLAS k).")
    for t in tools:
        if why.get(t):
            print(f"# {t}: skipped: {why[t]}")
    for n in notes:
        print(f"# {n}")
    if jsonf:
        jsonf.close()


if __name__ == "__main__":
    main()
