#!/usr/bin/env python3
"""Draws allreduce bus bandwidth against message size, one line per algorithm, from the table
that `sdp-train bench allreduce` and scripts/bench-allreduce.sh print (docs/benchmarks.md).

    scripts/bench-allreduce.sh -np 2 --runs 3 | python3 scripts/plot_bench.py -o busbw.png
    python3 scripts/plot_bench.py allreduce.txt -o busbw.png

Table rows: size(B) count(elems) algorithm time(us) algbw(GB/s) busbw(GB/s) [more columns];
lines starting with # are comments (the one naming the bench titles the plot). `auto>hier` rows (auto
and the algorithm it ran) are drawn as `auto`, labelled with what ran; rows repeated for a
size and algorithm (tables of several runs concatenated) are drawn as their median.

Needs matplotlib (scripts/install-deps.sh --bench). Exit status: 0 ok, 1 matplotlib missing
or the PNG not writable, 2 bad input (unreadable file, a malformed row, no rows).
"""
import argparse
import math
import statistics
import sys

PROG = "plot_bench"
COLUMNS = "size(B) count(elems) algorithm time(us) algbw(GB/s) busbw(GB/s)"


def die(message, status=2):
    print(f"{PROG}: error: {message}", file=sys.stderr)
    sys.exit(status)


def read_table(name, stream):
    """{algorithm: {size: [busbw, ...]}}, {(algorithm, size): ran}, the title comment."""
    rows, ran, title = {}, {}, None
    try:
        lines = stream.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        die(f"cannot read {name}: {e}")
    for lineno, line in enumerate(lines, 1):
        text = line.strip()
        if not text:
            continue
        if text.startswith("#"):
            comment = text.lstrip("#").strip()
            if title is None or ("bench allreduce" in comment and "bench allreduce" not in title):
                title = comment
            continue
        fields = text.split()
        try:
            if len(fields) < 6:
                raise ValueError(f"{len(fields)} column(s)")
            size, count = int(fields[0]), int(fields[1])
            busbw = float(fields[5])
            for f in fields[3:6]:
                if not math.isfinite(float(f)):
                    raise ValueError(f"{f} is not finite")
            if size <= 0 or count <= 0 or busbw < 0:
                raise ValueError("sizes must be positive, busbw not negative")
        except ValueError as e:
            die(f"{name}:{lineno}: expected '{COLUMNS} ...' ({e}): {text[:100]}")
        requested, _, picked = fields[2].partition(">")
        rows.setdefault(requested, {}).setdefault(size, []).append(busbw)
        if picked:
            ran[(requested, size)] = picked
    if not rows:
        die(f"{name}: no table rows (expected lines '{COLUMNS} ...')")
    return rows, ran, title


def human(size):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


def plot(png, rows, ran, title):
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        die(f"needs matplotlib for {sys.executable} (scripts/install-deps.sh --bench installs "
            "python3-matplotlib for /usr/bin/python3)", status=1)

    fig, ax = plt.subplots(figsize=(8, 5))
    sizes = sorted({s for by_size in rows.values() for s in by_size})
    for algorithm, by_size in rows.items():
        xs = sorted(by_size)
        ys = [statistics.median(by_size[s]) for s in xs]
        mpi = algorithm == "mpi"
        ax.plot(xs, ys, marker="o", label="MPI_Allreduce (mpi)" if mpi else algorithm,
                linestyle="--" if mpi else "-", color="black" if mpi else None)
        for s, y in zip(xs, ys):
            if (algorithm, s) in ran:
                ax.annotate(ran[(algorithm, s)], (s, y), textcoords="offset points", xytext=(0, 6),
                            ha="center", fontsize=7)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([human(s) for s in sizes], rotation=45 if len(sizes) > 8 else 0)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(title or "allreduce bus bandwidth", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(png, dpi=110)
    except OSError as e:
        die(f"cannot write {png}: {e}", status=1)


def main():
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0],
        epilog="Exit status: 0 ok, 1 matplotlib missing or the PNG not writable, 2 bad input.")
    parser.add_argument("table", nargs="?", default="-",
                        help="the bench table (default: - , standard input)")
    parser.add_argument("-o", "--output", default="allreduce-busbw.png",
                        help="PNG to write (default: allreduce-busbw.png)")
    args = parser.parse_args()
    if args.table == "-":
        rows, ran, title = read_table("<stdin>", sys.stdin)
    else:
        try:
            stream = open(args.table, encoding="utf-8")
        except OSError as e:
            die(f"cannot read {args.table}: {e}")
        with stream:
            rows, ran, title = read_table(args.table, stream)
    plot(args.output, rows, ran, title)
    print(f"{PROG}: wrote {args.output} ({', '.join(rows)}; "
          f"{len({s for r in rows.values() for s in r})} sizes)")


if __name__ == "__main__":
    main()
