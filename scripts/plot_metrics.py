#!/usr/bin/env python3
"""Draws a training run from its metrics.jsonl (output.metrics): train and test loss, test
accuracy, learning rate and images/s against the step, one PNG with four panels.

    python3 scripts/plot_metrics.py out/quickstart/metrics.jsonl -o quickstart.png

Needs matplotlib (scripts/install-deps.sh --bench). Exit status: 0 ok, 1 matplotlib
missing, 2 bad input (unreadable file, a line that is not a metrics record, no records).
"""
import argparse
import json
import math
import os
import sys

PROG = "plot_metrics"


def die(message, status=2):
    print(f"{PROG}: error: {message}", file=sys.stderr)
    sys.exit(status)


def number(value):
    """A finite float from a JSON number; None for null/absent (NaN is written as null)."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def read_records(path):
    """The train and eval records of a metrics.jsonl, and its start record (or None)."""
    try:
        text = open(path, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as e:
        die(f"cannot read {path}: {e}")
    start, train, evals = None, [], []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            die(f"{path}:{lineno}: not a JSON metrics record ({e.msg}): {line[:80]}")
        if not isinstance(record, dict) or not isinstance(record.get("event"), str):
            die(f"{path}:{lineno}: not a metrics record (a JSON object with an \"event\"): {line[:80]}")
        event = record["event"]
        if event in ("train", "eval"):
            if number(record.get("step")) is None:
                die(f"{path}:{lineno}: {event} record without a numeric \"step\": {line[:80]}")
            for key, value in record.items():
                if key != "event" and value is not None and number(value) is None:
                    die(f"{path}:{lineno}: \"{key}\" is not a number: {line[:80]}")
            (train if event == "train" else evals).append(record)
        elif event == "start":
            start = record
        # Other events ([done], later additions) are not drawn.
    if not train and not evals:
        die(f"{path}: no train or eval records (is it an output.metrics file?)")
    return start, train, evals


def series(records, key):
    points = [(number(r["step"]), number(r.get(key))) for r in records]
    points = [(s, v) for s, v in points if v is not None]
    return [s for s, _ in points], [v for _, v in points]


def plot(path, png, start, train, evals):
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        die(f"needs matplotlib for {sys.executable} (scripts/install-deps.sh --bench installs "
            "python3-matplotlib for /usr/bin/python3)", status=1)

    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    (ax_loss, ax_acc), (ax_lr, ax_ips) = axes

    steps, values = series(train, "train_loss")
    ax_loss.plot(steps, values, label="train (mean over the logging window)")
    steps, values = series(evals, "test_loss")
    if steps:
        ax_loss.plot(steps, values, marker="o", label="test")
    ax_loss.set_ylabel("loss")
    ax_loss.legend()

    steps, values = series(evals, "test_accuracy")
    if steps:
        ax_acc.plot(steps, [100 * v for v in values], marker="o", color="tab:green")
        ax_acc.annotate(f"{100 * values[-1]:.2f} %", (steps[-1], 100 * values[-1]),
                        textcoords="offset points", xytext=(-10, -15), ha="right")
    else:
        ax_acc.text(0.5, 0.5, "no evaluation in this run", ha="center", transform=ax_acc.transAxes)
    ax_acc.set_ylabel("test accuracy (%)")

    steps, values = series(train, "lr")
    ax_lr.plot(steps, values, color="tab:purple")
    ax_lr.set_ylabel("learning rate")

    steps, values = series(train, "images_per_sec")
    ax_ips.plot(steps, values, color="tab:red")
    ax_ips.set_ylabel("images/s (global)")
    ax_ips.set_ylim(bottom=0)

    for ax in axes.flat:
        ax.grid(True, alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("step")
    title = os.path.basename(path)
    if start:
        ranks, batch = number(start.get("world_size")), number(start.get("global_batch"))
        if ranks and batch:
            title += f": {ranks:.0f} rank(s), global batch {batch:.0f}"
    fig.suptitle(title)
    fig.tight_layout()
    try:
        fig.savefig(png, dpi=110)
    except OSError as e:
        die(f"cannot write {png}: {e}", status=1)


def main():
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0],
        epilog="Exit status: 0 ok, 1 matplotlib missing or the PNG not writable, 2 bad input.")
    parser.add_argument("metrics", help="a metrics.jsonl written by sdp-train (output.metrics)")
    parser.add_argument("-o", "--output", help="PNG to write (default: METRICS with .png instead of .jsonl)")
    args = parser.parse_args()
    png = args.output or os.path.splitext(args.metrics)[0] + ".png"
    if os.path.abspath(png) == os.path.abspath(args.metrics):
        die(f"the PNG would overwrite {args.metrics}: name another with -o")
    start, train, evals = read_records(args.metrics)
    plot(args.metrics, png, start, train, evals)
    print(f"{PROG}: wrote {png} ({len(train)} train and {len(evals)} eval records)")


if __name__ == "__main__":
    main()
