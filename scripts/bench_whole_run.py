#!/usr/bin/python3
"""Whole-run speed: each shipped recipe on its real data for its first --epochs epochs,
images/s per epoch and the ratio of the last epoch to the first, with the job's default
floating-point mode (numerics.flush_denormals: true) and, in the same run, with IEEE
subnormals kept (false): the peer that shows what flushing buys.

A step benchmark (bench-train.sh) times a few hundred steps from fresh weights; a run slows
down later, when its optimizer state decays into subnormal floats, and only a whole run
shows it. Every row runs the recipe as shipped (its LR schedule over its own epoch count),
stopped by train.max_steps after --epochs epochs; images/s per epoch is the harmonic mean of
that epoch's [step] windows (equal step counts: total images over total step time, data
waits included, evaluation excluded).

  scripts/bench-whole-run.sh [--recipes lenet-mnist,mlp-mnist,resnet20-cifar10] [--epochs 3]
                             [--threads 2] [--modes on,off] [--rounds 3] [--data-dir DIR]
The modes alternate within each round, so drift in the host's speed hits both; each figure
is the median over the rounds.
Data: $SDP_DATA_DIR (default ../shared/data) with mnist/ and cifar10/; a recipe whose data
is absent is skipped with a message.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPES = {"lenet-mnist": "mnist", "mlp-mnist": "mnist", "resnet20-cifar10": "cifar10"}


def run_recipe(binary, recipe, data_dir, threads, flush, max_steps, tmp):
    """Runs the recipe; returns its metrics events (output.metrics JSON lines)."""
    metrics = os.path.join(tmp, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [binary, "--config", os.path.join(ROOT, "configs", f"{recipe}.yaml"),
           "--set", f"threads={threads}",
           "--set", f"train.max_steps={max_steps}", "--set", "train.log_every=50",
           "--set", f"checkpoint.dir={tmp}/ckpt", "--set", "checkpoint.every_steps=0",
           "--set", "checkpoint.resume=never",
           "--set", f"output.model_dir={tmp}/model", "--set", f"output.metrics={metrics}",
           "--set", "output.progress=lines"]
    if flush is not None:  # None: the binary's default (one that predates the key, say)
        cmd += ["--set", f"numerics.flush_denormals={'true' if flush else 'false'}"]
    env = dict(os.environ, SDP_DATA_DIR=data_dir, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("SM_CHANNEL_TRAINING", None)
    env.pop("SM_CHANNEL_TEST", None)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    if proc.returncode != 0:
        sys.exit(f"bench-whole-run: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
    with open(metrics) as f:
        return [json.loads(line) for line in f if line.strip()]


def per_epoch_rates(events):
    by_epoch = {}
    for e in events:
        if e.get("event") == "train" and "images_per_sec" in e:
            by_epoch.setdefault(int(e["epoch"]), []).append(e["images_per_sec"])
    return {epoch: statistics.harmonic_mean(rates) for epoch, rates in sorted(by_epoch.items())}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=os.path.join(ROOT, "build", "sdp-train"))
    parser.add_argument("--recipes", default=",".join(RECIPES))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="on,off", help="numerics.flush_denormals per row: on, off, both, or default (the key not set)")
    parser.add_argument("--data-dir", default=os.environ.get("SDP_DATA_DIR", os.path.join(ROOT, "..", "shared", "data")))
    args = parser.parse_args()
    modes = [{"on": True, "off": False, "default": None}[m.strip()] for m in args.modes.split(",")]

    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  host {os.uname().nodename}  {os.cpu_count()} cores  "
          f"threads {args.threads}  epochs {args.epochs}  rounds {args.rounds}  1 rank")
    print(f"# command: {' '.join(sys.argv)}")
    epoch_cols = "".join(f"{'epoch ' + str(e) + ' img/s':>15}" for e in range(1, args.epochs + 1))
    header = f"{'recipe':<17} {'flush':>5}{epoch_cols} {'last/first':>10} {'test acc':>9} {'wall s':>7}"
    print(header)
    print("-" * len(header))
    for recipe in args.recipes.split(","):
        data = os.path.join(args.data_dir, RECIPES[recipe])
        if not os.path.isdir(data):
            print(f"{recipe:<17} skipped: no {RECIPES[recipe]} data at {data} (set SDP_DATA_DIR or --data-dir)")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            # One step first, to learn the recipe's steps per epoch from its start event.
            start = next(e for e in run_recipe(args.binary, recipe, args.data_dir, args.threads, None, 1, tmp)
                         if e.get("event") == "start")
            max_steps = int(start["steps_per_epoch"]) * args.epochs
            results = {flush: [] for flush in modes}  # per round: (rates, accuracy, wall)
            for _ in range(args.rounds):
                for flush in modes:
                    t0 = time.time()
                    events = run_recipe(args.binary, recipe, args.data_dir, args.threads, flush, max_steps, tmp)
                    acc = [e["test_accuracy"] for e in events if "test_accuracy" in e]
                    results[flush].append((per_epoch_rates(events), acc[-1] if acc else float("nan"), time.time() - t0))
            for flush in modes:
                runs = results[flush]
                rates = {e: statistics.median(r[0].get(e, float("nan")) for r in runs) for e in range(1, args.epochs + 1)}
                ratio = statistics.median(r[0].get(args.epochs, float("nan")) / r[0].get(1, float("nan")) for r in runs)
                cols = "".join(f"{rates[e]:>15.0f}" for e in range(1, args.epochs + 1))
                print(f"{recipe:<17} { {True: 'on', False: 'off', None: 'dflt'}[flush]:>5}{cols} {ratio:>9.2f}x "
                      f"{100 * statistics.median(r[1] for r in runs):>8.2f}% {statistics.median(r[2] for r in runs):>7.0f}",
                      flush=True)
    print("# img/s per epoch: harmonic mean of the epoch's [step] windows (50 steps each), median over rounds;")
    print("# last/first: median of the per-run ratios; flush = numerics.flush_denormals; test acc after the last epoch")


if __name__ == "__main__":
    main()
