#!/usr/bin/python3
"""Training throughput of sdp-train against PyTorch on this machine, in one run.

For each model row: sdp-train and PyTorch alternate (--rounds times), each timing
forward + backward + optimizer step on synthetic data after a warm-up, median over
--steps steps. PyTorch gets its best configuration on the same cores (Debian's torch
runs matrix products in OpenBLAS, which follows OPENBLAS_NUM_THREADS, not
torch.set_num_threads): every configuration in TORCH_CONFIGS is tried, the best counts.
Prints a table with images/s, the ratio, achieved GFLOP/s as a fraction of the oneDNN
sgemm peak measured in the same run, and peak memory (max RSS) of each process.

--device cuda: both train on the GPU in fp32 (PyTorch with TF32 off, as sdp-train's cuDNN
and cuBLAS calls; cudnn.benchmark off and on, the better counts; one sync per step in both,
as sdp-train reads the loss every step). The peak is then PyTorch's fp32 matrix product on
that GPU, measured in the same run.
--precision amp-fp16 / amp-bf16 (GPU): sdp-train's mixed precision next to PyTorch's
(torch.autocast to that dtype, with a GradScaler for fp16); the peak is then the 16-bit matrix
product's.
On the GPU PyTorch also runs at its documented best: channels_last memory with
cudnn.benchmark on, eager and under torch.compile where this PyTorch has it (--no-compile
leaves it out; a model it cannot compile is skipped, and the table says so). The best of all
its configurations is the peer ("torch img/s", "ratio"); the plain NCHW one, the earlier peer,
stays as a second column ("torch nchw", "vs nchw").

--optimizers sgd,lamb,lars: each row once per optimizer on sdp-train's side (lamb and lars
with the shipped recipes' settings); PyTorch's side is always SGD with momentum, the fixed
peer, and a last column gives the row's step time over sdp-train's own SGD row. With
--steps in the hundreds on the default (easy) synthetic data the loss collapses, and an
optimizer whose state decays into subnormal floats shows it.

  scripts/bench-train.sh [--rounds 3] [--steps 30] [--threads 2] [--rows mlp:128,lenet5:64]
  scripts/bench-train.sh --rows lenet5:64 --optimizers sgd,lamb,lars --steps 400
  scripts/bench-train.sh --device cuda --rows resnet50:256,resnet20:128,lenet5:256
  scripts/bench-train.sh --device cuda --precision amp-fp16 --rows resnet50:256,resnet20:128
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = [("mlp", 128, (1, 28, 28)), ("lenet5", 64, (1, 28, 28)), ("lenet5", 256, (1, 28, 28)),
        ("resnet20", 128, (3, 32, 32)), ("resnet18", 64, (3, 32, 32))]
SHAPES = {"mlp": (1, 28, 28), "lenet5": (1, 28, 28), "resnet50": (3, 224, 224)}
WARMUP = 5
# sdp-train's optimizer per --optimizers name: lamb as configs/lenet-mnist.yaml and
# resnet20-cifar10.yaml set it, lars as docs/scaling.md's LARS rows.
OPTIMIZERS = {"sgd": "{name: sgd, lr: 0.01, momentum: 0.9}",
              "lamb": "{name: lamb, lr: 0.02, weight_decay: 0.01, eps: 1.0e-6}",
              "lars": "{name: lars, lr: 0.1, momentum: 0.9, weight_decay: 5.0e-4, trust_coefficient: 0.001}"}


def run_child(cmd, env):
    """Runs cmd, returns (stdout, max RSS in MiB)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed ({proc.returncode}):\n{out[-3000:]}")
    return out, usage.ru_maxrss / 1024.0


def sdp_images_per_sec(binary, model, batch, shape, steps, threads, ranks=1, device="cpu", precision="fp32",
                       optimizer="sgd", memory_format="auto"):
    """Median global images/s over the steps after warm-up (and, on several ranks, the
    median exposed communication time per step in ms), plus the max RSS."""
    run = sdp_run(binary, model, batch, shape, steps, threads, ranks, device, precision, optimizer, memory_format)
    if ranks > 1:
        return run["rate"], run["rss"], run["exposed_ms"]
    return run["rate"], run["rss"]


def sdp_run(binary, model, batch, shape, steps, threads, ranks=1, device="cpu", precision="fp32", optimizer="sgd",
            memory_format="auto", cuda_graphs="auto", sets=()):
    """One sdp-train run: rate (median images/s after warm-up), rss (max RSS, MiB), exposed_ms
    (several ranks: median exposed communication per step), gpu_mb (the runner's own peak
    GPU allocations, MiB, from its [done] line; 0 on the CPU) and replayed (the steps replayed
    from a CUDA graph, train.cuda_graphs; -1 where the line has no count). `sets`: KEY=VALUE
    overrides of the job, passed as sdp-train's --set."""
    c, h, w = shape
    # Large images: 4 batches of them, repeated over the epochs (generating a synthetic image
    # of 224 x 224 takes ~7 ms, far more than a step).
    steps_per_epoch = steps + WARMUP + 1 if c * h * w < 50000 else 4
    epochs = -(-(steps + WARMUP) // steps_per_epoch)
    with tempfile.TemporaryDirectory() as tmp:
        job = os.path.join(tmp, "bench.yaml")
        # Named only when asked for: builds before the key (bench-compare's BEFORE) reject it.
        layout = "" if memory_format == "auto" else f", memory_format: {memory_format}"
        graphs = "" if cuda_graphs == "auto" else f", cuda_graphs: {cuda_graphs}"
        with open(job, "w") as f:
            f.write(f"""name: bench-{model}
model: {{name: {model}, num_classes: 10{layout}}}
threads: {threads}
device: {device}
precision: {precision}
data:
  format: synthetic
  batch_size: {batch}
  synthetic: {{train_samples: {batch * ranks * steps_per_epoch}, test_samples: {batch}, channels: {c}, height: {h}, width: {w}}}
train: {{epochs: {epochs}, max_steps: {steps + WARMUP}, log_every: 1, eval_every_epochs: 0{graphs}}}
optimizer: {OPTIMIZERS[optimizer]}
checkpoint: {{dir: {tmp}/ckpt, every_steps: 0}}
output: {{model_dir: {tmp}/model, metrics: ""}}
""")
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        cmd = [binary, "--config", job] + [arg for s in sets for arg in ("--set", s)]
        if ranks > 1:
            cmd = ["mpirun", "-np", str(ranks), "--bind-to", "core"] + cmd
        out, rss = run_child(cmd, env)
    rates = [float(m) for m in re.findall(r"^\[step \d+\].*images_per_sec=([0-9.]+)", out, re.M)]
    exposed = [float(m) for m in re.findall(r"^\[step \d+\].*exposed_comm_ms=([0-9.]+)", out, re.M)]
    gpu_mb = re.search(r"^\[done\].*gpu_memory_peak_mb=([0-9.]+)", out, re.M)
    replayed = re.search(r"^\[done\].*graph_replayed_steps=([0-9]+)", out, re.M)
    return {"rate": statistics.median(rates[WARMUP:]), "rss": rss,
            "exposed_ms": statistics.median(exposed[WARMUP:]) if ranks > 1 else 0.0,
            "gpu_mb": float(gpu_mb.group(1)) if gpu_mb else 0.0,
            "replayed": int(replayed.group(1)) if replayed else -1}


def torch_worker(model_name, batch, shape, steps, threads, device="cpu", benchmark=False, precision="fp32",
                 memory_format="nchw", compiled=False):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import torch_models
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if device == "cuda":  # fp32 arithmetic, as sdp-train's (precision tf32: TF32 in both)
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.benchmark = benchmark
    model = torch_models.build(model_name, shape)
    flops = torch_models.forward_flops(model, shape)  # on the CPU, before the move
    params = sum(p.numel() for p in model.parameters())
    model = model.to(device)
    x = torch.randn(batch, *shape, device=device)
    if memory_format == "channels_last":
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if compiled:
        if not hasattr(torch, "compile"):
            print(f"unsupported=torch.compile is not in PyTorch {torch.__version__}")
            return
        model = torch.compile(model)
    y = torch.randint(0, 10, (batch,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()
    amp_dtype = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(precision)  # None: fp32, tf32
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "amp-fp16") if amp_dtype else None
    rates = []
    for i in range(steps + WARMUP):
        t0 = time.perf_counter()
        if compiled and i == 0:  # compiles here: a model it cannot compile is skipped, not fatal
            try:
                loss_fn(model(x), y).backward()
            except Exception as e:  # noqa: BLE001 (torch's compiler raises many kinds)
                print(f"unsupported=torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
                return
            opt.zero_grad(set_to_none=True)
        opt.zero_grad(set_to_none=True)
        if amp_dtype is None:
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
        else:
            with torch.autocast("cuda", dtype=amp_dtype):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        if device == "cuda":
            loss.item()  # the step's end, as sdp-train's loss read
        if i >= WARMUP:
            rates.append(batch / (time.perf_counter() - t0))
    # The peer's peak GPU memory as PyTorch counts it (its allocator's live bytes, MiB).
    gpu_mb = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else 0.0
    print(f"images_per_sec={statistics.median(rates)} forward_flops={flops} params={params} gpu_memory_mb={gpu_mb}")


def torch_gpu_peak(precision="fp32"):
    """fp32 (no TF32) or 16-bit matrix product rate of this GPU through PyTorch: the GPU rows' peak."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    dtype = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(precision, torch.float32)
    a = torch.randn(8192, 8192, device="cuda", dtype=dtype)
    b = torch.randn(8192, 8192, device="cuda", dtype=dtype)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    print(f"gflops={10 * 2 * 8192 ** 3 / (time.perf_counter() - t0) / 1e9} gpu={torch.cuda.get_device_name()}")


def torch_images_per_sec(model, batch, shape, steps, torch_threads, blas_threads, memory_format="nchw", compiled=0,
                         device="cpu", precision="fp32"):
    """On the GPU blas_threads is cudnn.benchmark (0/1). None (and the reason printed) when
    this configuration cannot run here (torch.compile missing or failing)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(blas_threads if device == "cpu" else torch_threads),
               OMP_NUM_THREADS=str(torch_threads))
    shape_arg = "x".join(map(str, shape))
    out, rss = run_child([sys.executable, os.path.abspath(__file__), "--torch-worker", model, str(batch),
                          shape_arg, str(steps), str(torch_threads), device, str(blas_threads), precision,
                          memory_format, str(compiled)], env)
    unsupported = re.search(r"^unsupported=(.*)$", out, re.M)
    if unsupported:
        print(f"# {model} {batch}: PyTorch {memory_format}{' compiled' if compiled else ''} skipped: "
              f"{unsupported.group(1)}", flush=True)
        return None
    values = dict(re.findall(r"(\w+)=([0-9.e+-]+)", out))
    return (float(values["images_per_sec"]), rss, int(values["forward_flops"]), int(values["params"]),
            float(values.get("gpu_memory_mb", 0.0)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=os.path.join(ROOT, "build", "sdp-train"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--rows", default="", help="e.g. mlp:128,lenet5:64 (default: the issue's five rows)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--precision", choices=["fp32", "tf32", "amp-fp16", "amp-bf16"], default="fp32",
                        help="mixed precision or TF32 on both sides (--device cuda only)")
    parser.add_argument("--optimizers", default="sgd", help="sdp-train's optimizers, e.g. sgd,lamb,lars")
    parser.add_argument("--memory-format", choices=["auto", "channels_last", "nchw"], default="auto",
                        help="sdp-train's model.memory_format (GPU, 16-bit)")
    parser.add_argument("--cuda-graphs", choices=["auto", "on", "off"], default="auto",
                        help="sdp-train's train.cuda_graphs (auto: the job's default, not written)")
    parser.add_argument("--sdp-set", action="append", default=[], metavar="KEY=VALUE",
                        help="a job key for sdp-train's runs (its --set; repeatable), e.g. train.deterministic=false "
                             "or model.batchnorm=folded: sdp-train at its best against PyTorch at its best")
    parser.add_argument("--torch-formats", default="nchw,channels_last",
                        help="GPU: PyTorch's memory formats to run (nchw: with and without cudnn.benchmark)")
    parser.add_argument("--no-compile", action="store_true",
                        help="GPU: leave torch.compile out of PyTorch's configurations (it compiles for a minute per model)")
    parser.add_argument("--torch-worker", nargs=10, help=argparse.SUPPRESS)
    parser.add_argument("--torch-peak", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_worker:
        model, batch, shape, steps, threads, device, benchmark, precision, memory_format, compiled = args.torch_worker
        torch_worker(model, int(batch), tuple(map(int, shape.split("x"))), int(steps), int(threads), device,
                     benchmark == "1", precision, memory_format, compiled == "1")
        return
    if args.torch_peak:
        torch_gpu_peak(args.precision)
        return
    if args.precision != "fp32" and args.device != "cuda":
        parser.error("--precision amp-* and tf32 need --device cuda (the CPU backend trains in fp32)")

    rows = ROWS
    if args.rows:
        rows = []
        for item in args.rows.split(","):
            name, batch = item.split(":")
            rows.append((name, int(batch), SHAPES.get(name, (3, 32, 32))))
    t = args.threads
    if args.device == "cuda":
        # (torch threads, cudnn.benchmark, memory format, compiled): NCHW as before, then PyTorch's
        # documented best: channels_last with cudnn.benchmark, eager and compiled.
        formats = args.torch_formats.split(",")
        torch_configs = [(t, 0, "nchw", 0), (t, 1, "nchw", 0)] if "nchw" in formats else []
        if "channels_last" in formats:
            torch_configs.append((t, 1, "channels_last", 0))
        if not args.no_compile and "channels_last" in formats:
            torch_configs.append((t, 1, "channels_last", 1))
        out, _ = run_child([sys.executable, os.path.abspath(__file__), "--torch-peak", "--precision", args.precision],
                           dict(os.environ))
        peak_name = (f"PyTorch {args.precision if args.precision in ('fp32', 'tf32') else args.precision[4:]} matmul peak on "
                     f"{re.search(r'gpu=(.*)', out).group(1)}")
    else:
        torch_configs = [(c, b, "nchw", 0) for c, b in sorted({(t, t), (1, t)})]  # (torch threads, OpenBLAS threads)
        out, _ = run_child([args.binary, "bench", "gemm", "--threads", str(t)], dict(os.environ))
        peak_name = "oneDNN sgemm peak"
    peak = float(re.search(r"gflops=([0-9.]+)", out).group(1))
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  host {os.uname().nodename}  {os.cpu_count()} cores  "
          f"threads {t}  device {args.device}  precision {args.precision}  {peak_name} {peak:.0f} GFLOP/s  rounds {args.rounds}  steps {args.steps}")
    print(f"# command: {' '.join(sys.argv)}")
    optimizers = args.optimizers.split(",")
    for name in optimizers:
        if name not in OPTIMIZERS:
            parser.error(f"--optimizers: unknown '{name}' (one of {', '.join(OPTIMIZERS)})")
    gpu = args.device == "cuda"
    header = (f"{'model':<9} {'batch':>5} {'opt':>4} {'sdp img/s':>10} {'torch img/s':>11} {'torch cfg':>12} {'ratio':>6} "
              + (f"{'torch nchw':>10} {'vs nchw':>7} " if gpu else "")
              + f"{'sdp GFLOP/s':>11} {'%peak':>6} {'sdp RSS MB':>10} {'torch RSS MB':>12} {'step/sgd':>8}"
              + (f" {'sdp GPU MiB':>11} {'torch GPU MiB':>13} {'sdp graphs':>10}" if gpu else ""))
    print(header)
    print("-" * len(header))
    skipped = set()
    for model, batch, shape in rows:
        sdp_rates, torch_rates, sdp_rss, torch_rss = {}, {}, 0.0, 0.0
        sdp_gpu_mb, torch_gpu_mb = 0.0, {}  # peak GPU memory: the runner's, and each PyTorch configuration's
        sdp_replayed = -1  # the fewest steps replayed from a CUDA graph in a run (-1: not counted)
        flops = 0
        for _ in range(args.rounds):  # alternate, so drift in the host's speed hits both
            for name in optimizers:
                run = sdp_run(args.binary, model, batch, shape, args.steps, t, device=args.device,
                              precision=args.precision, optimizer=name, memory_format=args.memory_format,
                              cuda_graphs=args.cuda_graphs, sets=args.sdp_set)
                if run["replayed"] >= 0:
                    sdp_replayed = run["replayed"] if sdp_replayed < 0 else min(sdp_replayed, run["replayed"])
                sdp_rates.setdefault(name, []).append(run["rate"])
                sdp_rss = max(sdp_rss, run["rss"])
                sdp_gpu_mb = max(sdp_gpu_mb, run["gpu_mb"])
            for cfg in torch_configs:
                if (model, cfg) in skipped:
                    continue
                result = torch_images_per_sec(model, batch, shape, args.steps, *cfg, device=args.device,
                                              precision=args.precision)
                if result is None:
                    skipped.add((model, cfg))
                    continue
                rate, rss, flops, _, gpu_mb = result
                torch_rates.setdefault(cfg, []).append(rate)
                torch_rss = max(torch_rss, rss)
                torch_gpu_mb[cfg] = max(torch_gpu_mb.get(cfg, 0.0), gpu_mb)
        best_cfg = max(torch_rates, key=lambda c: statistics.median(torch_rates[c]))
        torch_rate = statistics.median(torch_rates[best_cfg])
        nchw = max((statistics.median(r) for c, r in torch_rates.items() if c[2] == "nchw" and not c[3]),
                   default=float("nan"))
        if gpu:
            cfg_name = ("cl" if best_cfg[2] == "channels_last" else "nchw") + ("+compile" if best_cfg[3] else "") + \
                ("+bench" if best_cfg[1] else "")
        else:
            cfg_name = f"{best_cfg[0]}t/{best_cfg[1]}b"
        for name in optimizers:
            sdp = statistics.median(sdp_rates[name])
            gflops = sdp * 3 * flops / 1e9
            vs_sgd = f"{statistics.median(sdp_rates['sgd']) / sdp:>7.2f}x" if "sgd" in sdp_rates else f"{'-':>8}"
            print(f"{model:<9} {batch:>5} {name:>4} {sdp:>10.0f} {torch_rate:>11.0f} {cfg_name:>12} "
                  f"{sdp / torch_rate:>5.2f}x " + (f"{nchw:>10.0f} {sdp / nchw:>6.2f}x " if gpu else "")
                  + f"{gflops:>11.1f} {100 * gflops / peak:>5.1f}% {sdp_rss:>10.0f} {torch_rss:>12.0f} "
                  f"{vs_sgd}" + (f" {sdp_gpu_mb:>11.0f} {torch_gpu_mb[best_cfg]:>13.0f} "
                                 f"{(str(sdp_replayed) + '/' + str(args.steps + WARMUP)) if sdp_replayed >= 0 else '-':>10}"
                                 if gpu else ""), flush=True)
    print("# images/s: median over rounds of per-run medians; torch cfg = torch threads / OpenBLAS threads"
          " (GPU: nchw or cl = channels_last, +compile = torch.compile, +bench = cudnn.benchmark on);")
    if gpu:
        print("# ratio: against PyTorch's best configuration; vs nchw: against its best NCHW eager one (the earlier peer);")
    print("# GFLOP/s = images/s x 3 x forward FLOPs (conv + linear) per image; torch is SGD with momentum in every row;")
    print("# step/sgd = this row's step time over sdp-train's SGD row (same model and batch).")
    if gpu:
        print("# GPU MiB: peak GPU memory, sdp-train's own allocations ([done] gpu_memory_peak_mb) and PyTorch's"
              " torch.cuda.max_memory_allocated() in its best configuration (neither counts the CUDA context);")
        print("# sdp graphs: of sdp-train's steps, those replayed from a CUDA graph (train.cuda_graphs; the fewest of the"
              " rounds; '-': no count, a build before graphs or train.cuda_graphs: off).")


if __name__ == "__main__":
    main()
