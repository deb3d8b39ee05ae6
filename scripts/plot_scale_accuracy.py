#!/usr/bin/env python3
"""Plots final test accuracy against global batch, one line per method, from the CSV that
scripts/bench-scale-accuracy.sh writes.

    python3 scripts/plot_scale_accuracy.py scale-accuracy-lenet5.csv scale-accuracy-lenet5.png [BAND]

BAND: how many accuracy points below the best the axis shows (default 5; ResNet-20's recipes
spread over ~15).
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402


def main(csv_path, png_path, band=5.0):
    rows = list(csv.DictReader(open(csv_path)))
    if not rows:
        sys.exit(f"{csv_path}: no rows")
    model = rows[0]["model"]
    methods = list(dict.fromkeys(r["method"] for r in rows))
    best = max(100 * float(r["test_accuracy"]) for r in rows)
    # Zoom on the band where recipes differ; a run below it (a dead network, ~10 %) is drawn
    # as a down triangle on the bottom edge instead of stretching the axis.
    low, high = best - band, min(100.0, best + 0.5)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for m in methods:
        pts = sorted((int(r["global_batch"]), 100 * float(r["test_accuracy"])) for r in rows if r["method"] == m)
        xs = [b for b, _ in pts]
        line = ax.plot(xs, [max(a, low + 0.05) for _, a in pts], marker="o", label=m)[0]
        below = [b for b, a in pts if a < low]
        if below:
            ax.plot(below, [low + 0.05] * len(below), "v", color=line.get_color(), markersize=10)
    ax.set_xscale("log", base=2)
    batches = sorted({int(r["global_batch"]) for r in rows})
    ax.set_xticks(batches)
    ax.set_xticklabels([str(b) for b in batches])
    ax.set_ylim(low, high)
    ax.set_xlabel("global batch")
    ax.set_ylabel("final test accuracy (%)")
    ax.set_title(f"{model}: accuracy vs global batch (v: below {low:.1f} %, diverged)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) == 4 else 5.0)
