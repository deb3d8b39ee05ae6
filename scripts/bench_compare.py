#!/usr/bin/python3
"""Two builds of sdp-train side by side: the "no speed lost" check for a change.

For every row of bench-train (1 rank, all cores) and bench-scaling (2 ranks x 1 thread),
runs the BEFORE and the AFTER binary alternately (the order flips every round, so a drift
of the host's speed hits both), --rounds times, on the same synthetic jobs as those scripts.
Prints images/s (median over rounds of per-run step medians), after/before, and peak RSS.

  scripts/bench-compare.sh BEFORE_BINARY [AFTER_BINARY=build/sdp-train] [--rounds 5] [--steps 30]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_train  # noqa: E402

SCALING_ROWS = [("lenet5", 64), ("resnet20", 128)]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before")
    parser.add_argument("after", nargs="?", default=os.path.join(bench_train.ROOT, "build", "sdp-train"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    for b in (args.before, args.after):
        if not os.access(b, os.X_OK):
            sys.exit(f"bench-compare: {b} is not an executable")

    rows = [(m, b, s, 1, args.threads) for m, b, s in bench_train.ROWS]
    rows += [(m, b, bench_train.SHAPES.get(m, (3, 32, 32)), 2, 1) for m, b in SCALING_ROWS]
    binaries = {"before": args.before, "after": args.after}
    results = {(row, which): [] for row in rows for which in binaries}
    rss = {(row, which): 0.0 for row in rows for which in binaries}
    for r in range(args.rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for row in rows:
            model, batch, shape, ranks, threads = row
            for which in order:
                out = bench_train.sdp_images_per_sec(binaries[which], model, batch, shape, args.steps, threads, ranks)
                results[(row, which)].append(out[0])
                rss[(row, which)] = max(rss[(row, which)], out[1])
        print(f"# round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  rounds {args.rounds}  steps {args.steps}")
    print(f"# before: {args.before}\n# after:  {args.after}")
    header = f"{'model':<9} {'batch':>5} {'ranks':>5} {'before img/s':>12} {'after img/s':>12} {'after/before':>12}" \
             f" {'before RSS MB':>13} {'after RSS MB':>12}"
    print(header)
    print("-" * len(header))
    for row in rows:
        model, batch, _, ranks, threads = row
        b = statistics.median(results[(row, "before")])
        a = statistics.median(results[(row, "after")])
        print(f"{model:<9} {batch:>5} {str(ranks) + 'x' + str(threads):>5} {b:>12.0f} {a:>12.0f} {a / b:>11.3f}x"
              + (f" {rss[(row, 'before')]:>13.0f} {rss[(row, 'after')]:>12.0f}" if ranks == 1 else f" {'-':>13} {'-':>12}"))
    print("# images/s: global, median over rounds of per-run step medians; RSS: max over rounds of each run's peak"
          " (1-rank rows; under mpirun only the launcher's would be seen)")


if __name__ == "__main__":
    main()
