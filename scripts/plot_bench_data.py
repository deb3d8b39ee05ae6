#!/usr/bin/python3
"""Plots the table scripts/bench-data.sh prints: images/s of each loader, grouped by worker count.

  scripts/bench-data.sh ... | tee loader.txt
  /usr/bin/python3 scripts/plot_bench_data.py loader.txt docs/img/loader-peers.png

Needs matplotlib (scripts/install-deps.sh --bench).
"""
import re
import sys

ROW = re.compile(r"^(?P<name>\S.*?)\s+(?P<workers>\d+)\s+(?P<output>\S+ \S+)\s+(?P<rate>\d+)\s+[\d.]+x")


def read_table(path):
    rows = {}
    for line in open(path):
        m = ROW.match(line)
        if m:
            rows.setdefault(m["name"], {})[int(m["workers"])] = int(m["rate"])
    if not rows:
        sys.exit(f"plot_bench_data: no table rows in {path}")
    return rows


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = read_table(sys.argv[1])
    workers = sorted({w for by in rows.values() for w in by})
    names = list(rows)
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for i, name in enumerate(names):
        xs = [k + (i - (len(names) - 1) / 2) * width for k in range(len(workers))]
        ys = [rows[name].get(w, 0) for w in workers]
        peer = not name.startswith("sdp-train")
        bars = ax.bar(xs, ys, width, label=name, hatch="//" if peer else None)
        ax.bar_label(bars, fmt="%d", fontsize=7, padding=1)
    ax.set_xticks(range(len(workers)), [f"{w} worker{'s' if w > 1 else ''}" for w in workers])
    ax.set_ylabel("images/s (RandomResizedCrop 224, flip, normalize)")
    ax.set_title("Input side alone: ImageNet-sized JPEGs on a 2-core machine")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
