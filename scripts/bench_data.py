#!/usr/bin/python3
"""The input side alone, sdp-train vs PyTorch, on the same JPEGs and the same transforms.

Makes ImageNet-sized JPEGs once (CIFAR-10 images upscaled to 375 x 375 by `sdp-train data
convert --resize 375 --quality 90`, in an image folder, in TFRecord shards and in WebDataset tar
shards), then for each
worker count times, alternately and --rounds times:
  sdp-train   `sdp-train bench data` (image-folder, tfrecord, tar-shards streamed through the
              shuffle buffer): read, decode (libjpeg-turbo,
              DCT-scaled region decode), RandomResizedCrop(224) + flip, normalize, batch of 64
  pytorch     DataLoader(ImageFolder(root, Compose([RandomResizedCrop(224), RandomHorizontalFlip(),
              ToTensor(), Normalize(...)])), batch_size=64, shuffle=True, num_workers=w)
Prints images/s (median of the rounds) and sdp-train / PyTorch.

  scripts/bench-data.sh [--images 2000] [--workers 1,2] [--batches 20] [--rounds 3] [--work DIR]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "sdp-train")
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
FORMAT_DIRS = {"image-folder": "folder", "tfrecord": "tf", "tar-shards": "tar"}


def make_data(work, images, data_dir):
    cifar = os.path.join(data_dir, "cifar10")
    if not os.path.isdir(cifar):
        sys.exit(f"bench-data: no CIFAR-10 at {cifar} (set SDP_DATA_DIR): the JPEGs are made from it")
    for fmt, out in FORMAT_DIRS.items():
        path = os.path.join(work, out)
        if os.path.isdir(path):
            continue
        subprocess.run([BIN, "data", "convert", "--from", "cifar10", "--input", cifar, "--resize", "375",
                        "--quality", "90", "--format", fmt, "--output", path, "--limit", str(images), "--shards", "4"],
                       check=True, stdout=subprocess.DEVNULL)


def sdp_rate(work, fmt, workers, batches):
    path = os.path.join(work, FORMAT_DIRS[fmt])
    out = subprocess.run([BIN, "bench", "data", "--config", os.path.join(work, "job.yaml"), "--set",
                          f"data.format={fmt}", "--set", f"data.train={path}", "--set", f"data.test={path}",
                          "--workers", str(workers), "--batches", str(batches)],
                         check=True, capture_output=True, text=True).stdout
    rows = [line.split() for line in out.splitlines() if re.match(r"^(image-folder|tfrecord|tar-shards) ", line)]
    return float(rows[-1][4])


def torch_rate(work, workers, batches):
    import torch
    import torchvision.datasets as datasets
    import torchvision.transforms as T
    torch.set_num_threads(1)
    transform = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
    dataset = datasets.ImageFolder(os.path.join(work, "folder"), transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True, num_workers=workers, drop_last=True)
    warmup, taken, images, start = 2, 0, 0, time.perf_counter()
    while taken < warmup + batches:
        for x, _ in loader:
            taken += 1
            if taken == warmup:
                start = time.perf_counter()
            elif taken > warmup:
                images += x.shape[0]
            if taken >= warmup + batches:
                break
    return images / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", default="/tmp/sdp-bench-data")
    args = parser.parse_args()
    data_dir = os.environ.get("SDP_DATA_DIR", os.path.join(ROOT, "..", "shared", "data"))
    os.makedirs(args.work, exist_ok=True)
    make_data(args.work, args.images, data_dir)
    with open(os.path.join(args.work, "job.yaml"), "w") as f:
        f.write("model: {name: resnet50, num_classes: 10}\n"
                "data: {format: image-folder, train: x, test: x, batch_size: 64, prefetch: 2, image_size: 224, "
                "resize: 256}\n")
    workers = [int(w) for w in args.workers.split(",")]
    results = {}
    for r in range(args.rounds):
        for w in workers:
            runs = [("sdp-train image-folder", lambda: sdp_rate(args.work, "image-folder", w, args.batches)),
                    ("sdp-train tfrecord", lambda: sdp_rate(args.work, "tfrecord", w, args.batches)),
                    ("sdp-train tar-shards", lambda: sdp_rate(args.work, "tar-shards", w, args.batches)),
                    ("pytorch image-folder", lambda: torch_rate(args.work, w, args.batches))]
            if r % 2:
                runs.reverse()  # a drift of the host's speed hits both sides
            for name, run in runs:
                results.setdefault((name, w), []).append(run())
        print(f"# round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  {args.images} JPEGs 375x375 q90 (CIFAR-10 upscaled), "
          f"RandomResizedCrop(224) + flip + normalize, batch 64, {args.batches} batches, {args.rounds} rounds")
    print(f"{'loader':<24}{'workers':>8}{'images/s':>11}{'vs pytorch':>12}")
    for w in workers:
        peer = statistics.median(results[("pytorch image-folder", w)])
        for name in ("sdp-train image-folder", "sdp-train tfrecord", "sdp-train tar-shards", "pytorch image-folder"):
            rate = statistics.median(results[(name, w)])
            print(f"{name:<24}{w:>8}{rate:>11.0f}{rate / peer:>11.2f}x")


if __name__ == "__main__":
    main()
