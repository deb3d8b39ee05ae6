#!/usr/bin/env python3
"""Draws scripts/bench-plan.sh's table: each row's predicted step against its measured step,
on log axes, with the line of perfect prediction and the +-10 % band, one marker per model
and one colour per topology.

    scripts/bench-plan.sh | python3 scripts/plot_plan.py -o plan.png
    python3 scripts/plot_plan.py docs/records/plan-record.md -o docs/img/plan-accuracy.png

Reads the markdown rows `| 2x1 (1gbit) | lenet5 | flat | 17.53 ms | 2.09 ms | 14.19 ms | +23.5 % |`
and ignores every other line (so a whole docs page can be the input). Needs matplotlib
(scripts/install-deps.sh --bench). Exit status: 0 ok, 1 matplotlib missing or the PNG not
writable, 2 no rows or unreadable input.
"""
import argparse
import re
import sys

PROG = "plot_plan"
ROW = re.compile(r"^\|\s*(\d+x\d+)[^|]*\|\s*([a-z0-9]+)\s*\|\s*([a-z]+)\s*\|\s*([\d.]+) ms\s*\|\s*([\d.]+) ms\s*\|"
                 r"\s*([\d.]+) ms\s*\|\s*([+-][\d.]+) %\s*\|")


def die(message, status=2):
    print(f"{PROG}: error: {message}", file=sys.stderr)
    sys.exit(status)


def main():
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("table", nargs="?", help="file with the table (default: stdin)")
    parser.add_argument("-o", "--output", required=True, help="PNG to write")
    args = parser.parse_args()
    try:
        stream = open(args.table) if args.table else sys.stdin
    except OSError as e:
        die(f"{args.table}: {e.strerror}")
    rows = []
    for line in stream:
        m = ROW.match(line.strip())
        if m:
            topo, model, alg, predicted, _, measured, _ = m.groups()
            rows.append((topo, model, alg, float(predicted), float(measured)))
    if not rows:
        die(f"{args.table or 'stdin'}: no bench-plan rows (| HxR | model | allreduce | N ms | N ms | N ms | +N % |)")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        die("matplotlib is not installed (scripts/install-deps.sh --bench)", 1)

    fig, ax = plt.subplots(figsize=(6, 5.5))
    topologies = sorted({r[0] for r in rows})
    models = sorted({r[1] for r in rows})
    markers = dict(zip(models, "os^Dv"))
    colours = dict(zip(topologies, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for topo, model, alg, predicted, measured in rows:
        ax.scatter(measured, predicted, marker=markers[model], color=colours[topo], s=40)
    lo = min(min(r[3], r[4]) for r in rows) * 0.8
    hi = max(max(r[3], r[4]) for r in rows) * 1.25
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=1, label="predicted = measured")
    ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="grey", alpha=0.2, label="+-10 %")
    for topo in topologies:
        ax.scatter([], [], color=colours[topo], marker="o", label=f"{topo} (hosts x ranks)")
    for model in models:
        ax.scatter([], [], color="grey", marker=markers[model], label=model)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured step (ms)")
    ax.set_ylabel("predicted step, sdp-train plan (ms)")
    ax.set_title("sdp-train plan against measured training steps")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    try:
        fig.savefig(args.output, dpi=110)
    except OSError as e:
        die(f"{args.output}: {e.strerror}", 1)
    print(f"{PROG}: {len(rows)} rows -> {args.output}")


if __name__ == "__main__":
    main()
