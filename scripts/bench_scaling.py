#!/usr/bin/python3
"""Weak scaling of sdp-train on one machine and PyTorch DDP (gloo) as the peer, in one run.

Same per-rank batch everywhere, one thread per rank, synthetic data, median step rate
after a warm-up; sdp-train and DDP alternate over --rounds. Columns:
  sdp 1x1   1 rank x 1 thread            sdp 2x1   2 ranks x 1 thread (global images/s)
  scaling   sdp 2x1 / sdp 1x1             exposed   communication not hidden by backward (ms/step)
  ddp 2x1   torch DDP, 2 processes x 1 thread, gloo      ratio  sdp 2x1 / ddp 2x1

  scripts/bench-scaling.sh [--rounds 3] [--steps 30] [--rows lenet5:64,resnet20:128]
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_train  # noqa: E402

ROWS = [("lenet5", 64), ("resnet20", 128)]


def ddp_worker(rank, world, port, model_name, batch, shape, steps):
    import torch
    import torch.distributed as dist
    import torch_models
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch_models.build(model_name, shape))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(batch, *shape), torch.randint(0, 10, (batch,))
    loss_fn = torch.nn.CrossEntropyLoss()
    rates = []
    for i in range(steps + bench_train.WARMUP):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()  # DDP overlaps its bucketed allreduce with this
        opt.step()
        if i >= bench_train.WARMUP:
            rates.append(world * batch / (time.perf_counter() - t0))
    if rank == 0:
        print(f"images_per_sec={statistics.median(rates)}", flush=True)
    dist.destroy_process_group()


def ddp_images_per_sec(model, batch, shape, steps):
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--ddp-worker", str(r), "2", str(port), model,
                               str(batch), "x".join(map(str, shape)), str(steps)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True) for r in range(2)]
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        sys.exit("bench: DDP run failed:\n" + "\n".join(o[-2000:] for o in outs))
    return float(outs[0].split("images_per_sec=")[1].split()[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=os.path.join(bench_train.ROOT, "build", "sdp-train"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rows", default="")
    parser.add_argument("--ddp-worker", nargs=7, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ddp_worker:
        rank, world, port, model, batch, shape, steps = args.ddp_worker
        ddp_worker(int(rank), int(world), int(port), model, int(batch), tuple(map(int, shape.split("x"))), int(steps))
        return
    rows = [(m, int(b)) for m, b in (r.split(":") for r in args.rows.split(","))] if args.rows else ROWS
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  host {os.uname().nodename}  {os.cpu_count()} cores  "
          f"rounds {args.rounds}  steps {args.steps}  (1 thread per rank)")
    print(f"# command: {' '.join(sys.argv)}")
    header = (f"{'model':<9} {'batch/rank':>10} {'sdp 1x1':>9} {'sdp 2x1':>9} {'scaling':>8} {'exposed ms':>10} "
              f"{'ddp 2x1':>9} {'ratio':>7}")
    print(header)
    print("-" * len(header))
    for model, batch in rows:
        shape = bench_train.SHAPES.get(model, (3, 32, 32))
        one, two, exposed, ddp = [], [], [], []
        for _ in range(args.rounds):
            one.append(bench_train.sdp_images_per_sec(args.binary, model, batch, shape, args.steps, 1)[0])
            rate, _, exp = bench_train.sdp_images_per_sec(args.binary, model, batch, shape, args.steps, 1, ranks=2)
            two.append(rate)
            exposed.append(exp)
            ddp.append(ddp_images_per_sec(model, batch, shape, args.steps))
        m1, m2, md = statistics.median(one), statistics.median(two), statistics.median(ddp)
        print(f"{model:<9} {batch:>10} {m1:>9.0f} {m2:>9.0f} {m2 / m1:>7.2f}x {statistics.median(exposed):>10.3f} "
              f"{md:>9.0f} {m2 / md:>6.2f}x", flush=True)
    print("# images/s are global (all ranks), medians over rounds of per-run step medians.")


if __name__ == "__main__":
    main()
