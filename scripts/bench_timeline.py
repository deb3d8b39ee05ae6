#!/usr/bin/python3
"""What output.timeline costs: the same short synthetic training job with the timeline off
and on, alternately (the order flips every round, so a drift of the host's speed hits both),
--rounds times. Per run: the median images/s of the steps after warm-up (log_every 1), and
the wall time of the whole process (which includes writing the trace files on exit).
Prints the medians over rounds and the overhead of "on".

  scripts/bench_timeline.py [BINARY=build/sdp-train] [--rounds 9] [--steps 60] [--ranks 2]
                            [--model lenet5] [--batch 64] [--bucket-mb 0.25]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARMUP = 15  # the first steps of a 2-rank job on a busy host are slow and erratic
SHAPES = {"mlp": (1, 28, 28), "lenet5": (1, 28, 28)}


def run(binary, args, timeline, tmp, tag):
    c, h, w = SHAPES.get(args.model, (3, 32, 32))
    steps = args.steps + WARMUP
    job = os.path.join(tmp, "bench.yaml")
    with open(job, "w") as f:
        f.write(f"""name: bench-timeline
model: {{name: {args.model}, num_classes: 10}}
threads: {args.threads}
data:
  format: synthetic
  batch_size: {args.batch}
  synthetic: {{train_samples: {args.batch * args.ranks * (steps + 1)}, test_samples: {args.batch}, channels: {c}, height: {h}, width: {w}}}
train: {{epochs: 1, max_steps: {steps}, log_every: 1, eval_every_epochs: 0}}
optimizer: {{name: sgd, lr: 0.01, momentum: 0.9}}
distributed: {{bucket_mb: {args.bucket_mb}}}
checkpoint: {{dir: {tmp}/ckpt-{tag}, every_steps: 0, resume: never}}
output: {{model_dir: {tmp}/model, metrics: "", progress: lines, timeline: "{os.path.join(tmp, 'tl', 'trace.json') if timeline else ''}"}}
""")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_mpi_yield_when_idle="1")
    cmd = [binary, "--config", job]
    if args.ranks > 1:
        cmd = ["mpirun", "-np", str(args.ranks), "--oversubscribe"] + cmd
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        sys.exit(f"bench_timeline: {' '.join(cmd)} failed:\n{out.stdout}")
    rates = [float(m) for m in re.findall(r"^\[step \d+\].*images_per_sec=([0-9.]+)", out.stdout, re.M)]
    if timeline and not os.path.exists(os.path.join(tmp, "tl", "trace.json")):
        sys.exit("bench_timeline: no trace written")
    return statistics.median(rates[WARMUP:]), wall


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary", nargs="?", default=os.path.join(ROOT, "build", "sdp-train"))
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", default="lenet5")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--bucket-mb", type=float, default=0.25)
    args = parser.parse_args()
    results = {"off": [], "on": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for which in (["off", "on"] if r % 2 == 0 else ["on", "off"]):
                results[which].append(run(args.binary, args, which == "on", tmp, f"{r}{which}"))
            print(f"# round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    off_rate = statistics.median(x[0] for x in results["off"])
    on_rate = statistics.median(x[0] for x in results["on"])
    off_wall = statistics.median(x[1] for x in results["off"])
    on_wall = statistics.median(x[1] for x in results["on"])
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  {args.model} batch {args.batch}  {args.ranks} ranks x "
          f"{args.threads} thread(s)  bucket_mb {args.bucket_mb}  steps {args.steps} (+{WARMUP} warm-up)  "
          f"rounds {args.rounds}")
    print(f"{'timeline':<9} {'img/s (median)':>15} {'wall s (median)':>16}")
    print(f"{'off':<9} {off_rate:>15.0f} {off_wall:>16.3f}")
    print(f"{'on':<9} {on_rate:>15.0f} {on_wall:>16.3f}")
    print(f"overhead of on: {100 * (off_rate - on_rate) / off_rate:+.2f} % images/s, "
          f"{100 * (on_wall - off_wall) / off_wall:+.2f} % wall time (medians)")
    # The two runs of a round are back to back: their ratio is less exposed to a host whose
    # speed drifts (other jobs) than the ratio of the medians.
    paired = statistics.median(on[0] / off[0] for off, on in zip(results["off"], results["on"]))
    print(f"paired: median over rounds of on/off images/s = {paired:.3f} "
          f"(overhead {100 * (1 - paired):+.2f} %)")
    print("per-round img/s off: " + " ".join(f"{x[0]:.0f}" for x in results["off"]))
    print("per-round img/s on:  " + " ".join(f"{x[0]:.0f}" for x in results["on"]))


if __name__ == "__main__":
    main()
