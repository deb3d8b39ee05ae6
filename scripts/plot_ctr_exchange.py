#!/usr/bin/env python3
"""Draws the table of scripts/bench-ctr-exchange.sh: samples/s against the hosts for each way of
exchanging the CTR table's rows (sparse, dense, auto), one panel per table size; the one-host
run ("none": nothing exchanged) starts every way's line. Where the table has the plan's
predicted step (--plan), the prediction is drawn as a dashed line beside each measured one.

    sudo scripts/bench-ctr-exchange.sh --plan | python3 scripts/plot_ctr_exchange.py -o ctr.png
    python3 scripts/plot_ctr_exchange.py docs/benchmarks.md -o docs/img/ctr-exchange-hosts.png

Reads the markdown rows `| 1,000,000 | 2x1 | sparse | 52,993 | 155 | ... |` and ignores every
other line (so a whole docs page can be the input; its first such table is drawn). Needs
matplotlib (scripts/install-deps.sh --bench). Exit status: 0 ok, 1 matplotlib missing or the PNG
not writable, 2 no rows or unreadable input.
"""
import argparse
import re
import sys

PROG = "plot_ctr_exchange"
ROW = re.compile(r"^\|\s*([\d,]+)\s*\|\s*(\d+)x(\d+)\s*\|\s*(sparse|dense|auto|none)\s*\|\s*([\d,]+)\s*\|\s*([\d,]+)\s*\|(.*)$")


def die(message, status=2):
    print(f"{PROG}: error: {message}", file=sys.stderr)
    sys.exit(status)


def number(text):
    return float(text.replace(",", ""))


def read_rows(stream):
    """The first table's rows: a line that is not a row after rows ends it."""
    rows = []
    for line in stream:
        m = ROW.match(line.strip())
        if not m:
            if rows and not line.strip().startswith("|"):
                break
            continue
        table_rows, hosts, ranks, way, rate, step_ms, rest = m.groups()
        cells = [c.strip() for c in rest.strip().strip("|").split("|")]
        # With --plan: the plan's step ms and its ratio come next.
        planned = number(cells[0]) if len(cells) >= 6 and re.fullmatch(r"[\d,.]+", cells[0]) else None
        ranks_all = int(hosts) * int(ranks)
        rows.append({"table_rows": int(number(table_rows)), "hosts": int(hosts), "ranks": ranks_all,
                     "topology": f"{hosts}x{ranks}", "way": way, "rate": number(rate), "step_ms": number(step_ms),
                     # the same samples a step in the plan's time
                     "planned_rate": number(rate) * number(step_ms) / planned if planned else None})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input", nargs="?", help="the table (default: stdin)")
    ap.add_argument("-o", "--output", required=True, help="the PNG to write")
    args = ap.parse_args()
    try:
        stream = open(args.input) if args.input else sys.stdin
    except OSError as e:
        die(f"{args.input}: {e.strerror}")
    rows = read_rows(stream)
    if not rows:
        die("no rows of scripts/bench-ctr-exchange.sh's table in the input")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        die("matplotlib is missing (scripts/install-deps.sh --bench)", 1)
    sizes = sorted({r["table_rows"] for r in rows})
    topologies = sorted({(r["ranks"], r["topology"]) for r in rows})
    fig, axes = plt.subplots(1, len(sizes), figsize=(5.5 * len(sizes), 4.2), squeeze=False)
    colours = {"sparse": "tab:blue", "dense": "tab:red", "auto": "tab:green"}
    for ax, size in zip(axes[0], sizes):
        mine = [r for r in rows if r["table_rows"] == size]
        base = [r for r in mine if r["way"] == "none"]
        for way, colour in colours.items():
            line = sorted(base + [r for r in mine if r["way"] == way], key=lambda r: r["ranks"])
            if len(line) < 1:
                continue
            xs = [[t for _, t in topologies].index(r["topology"]) for r in line]
            ax.plot(xs, [r["rate"] for r in line], "o-", color=colour, label=f"{way}, measured")
            planned = [(x, r["planned_rate"]) for x, r in zip(xs, line) if r["planned_rate"]]
            if planned:
                ax.plot([p[0] for p in planned], [p[1] for p in planned], "x--", color=colour, alpha=0.6,
                        label=f"{way}, plan")
        ax.set_xticks(range(len(topologies)), [t for _, t in topologies])
        ax.set_xlabel("hosts x ranks")
        ax.set_ylabel("samples/s")
        ax.set_yscale("log")
        ax.set_title(f"DeepFM, {size:,} table rows")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(args.output, dpi=110)
    except OSError as e:
        die(f"{args.output}: {e.strerror}", 1)
    print(f"{PROG}: {len(rows)} rows, {len(sizes)} panels -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
