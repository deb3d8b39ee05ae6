#!/usr/bin/env python3
"""Draws the simulated-cluster AllReduce table of scripts/bench-simcluster.sh: for each
topology and size, the time of every algorithm as a bar, with the link bound of the least
bytes any algorithm can send (2(H-1)/H S per host) as a line, and each bar labelled with its
share of the link and the bytes it sent out of a host.

    sudo scripts/bench-simcluster.sh --topologies 2x2 | python3 scripts/plot_simcluster.py -o sim.png
    python3 scripts/plot_simcluster.py docs/records/benchmarks-history.md -o docs/img/simcluster.png

Reads the markdown rows `| 2x2 | hierarchical | 16 MiB | 16.8 MB = 1.00 S | 0.135 s | 0.150 s |
89 % | 0 |` and ignores every other line (so a whole docs page can be the input).
Needs matplotlib (scripts/install-deps.sh --bench). Exit status: 0 ok, 1 matplotlib missing
or the PNG not writable, 2 no rows or unreadable input.
"""
import argparse
import re
import sys

PROG = "plot_simcluster"
ROW = re.compile(
    r"^\|\s*(\d+)x(\d+)\s*\|\s*([a-z() ]+?)\s*\|\s*(\d+) MiB\s*\|\s*([\d.]+) MB = ([\d.]+) S\s*\|"
    r"\s*([\d.]+) s\s*\|\s*([\d.]+) s\s*\|\s*(\d+) %\s*\|")


def die(message, status=2):
    print(f"{PROG}: error: {message}", file=sys.stderr)
    sys.exit(status)


def read_rows(stream):
    rows = []
    for line in stream:
        m = ROW.match(line.strip())
        if m:
            hosts, ranks, algo, mib, _, s_units, _, time_s, share = m.groups()
            rows.append({"topology": f"{hosts}x{ranks}", "hosts": int(hosts), "algorithm": algo,
                         "mib": int(mib), "s_units": float(s_units), "time": float(time_s),
                         "share": int(share)})
    return rows


def main():
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("table", nargs="?", help="file with the table (default: stdin)")
    parser.add_argument("-o", "--output", required=True, help="PNG to write")
    parser.add_argument("--rate-mbps", type=float, default=125.0,
                        help="link rate in MB/s each way (default 125 = 1 Gbit/s)")
    args = parser.parse_args()
    try:
        stream = open(args.table) if args.table else sys.stdin
    except OSError as e:
        die(f"{args.table}: {e.strerror}")
    rows = read_rows(stream)
    if not rows:
        die(f"{args.table or 'stdin'}: no simulated-cluster rows (| HxR | algorithm | N MiB | ... |)")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        die("matplotlib is not installed (scripts/install-deps.sh --bench)", 1)

    panels = sorted({(r["topology"], r["mib"]) for r in rows},
                    key=lambda p: (int(p[0].split("x")[0]), p[1]))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4), squeeze=False)
    for ax, (topology, mib) in zip(axes[0], panels):
        sel = [r for r in rows if r["topology"] == topology and r["mib"] == mib]
        names = [r["algorithm"] for r in sel]
        bars = ax.bar(range(len(sel)), [r["time"] for r in sel], color="#4c72b0")
        for bar, r in zip(bars, sel):
            ax.annotate(f"{r['share']} %\n{r['s_units']:.2f} S", (bar.get_x() + bar.get_width() / 2,
                        bar.get_height()), ha="center", va="bottom", fontsize=8)
        hosts = sel[0]["hosts"]
        least = 2 * (hosts - 1) / hosts * mib * 2**20 / (args.rate_mbps * 1e6)
        ax.axhline(least, color="#c44e52", linestyle="--", label="link bound, least bytes")
        ax.set_xticks(range(len(sel)))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        ax.set_title(f"{topology} (hosts x ranks), {mib} MiB")
        ax.set_ylabel("time per AllReduce (s)")
        ax.set_ylim(0, max(r["time"] for r in sel) * 1.25)
        ax.legend(fontsize=8, loc="upper right")
    fig.suptitle("AllReduce on simulated hosts, links at %.0f MB/s each way" % args.rate_mbps)
    fig.tight_layout()
    try:
        fig.savefig(args.output, dpi=100)
    except OSError as e:
        die(f"{args.output}: {e.strerror}", 1)
    print(f"{PROG}: {len(rows)} rows, {len(panels)} panels -> {args.output}")


if __name__ == "__main__":
    main()
