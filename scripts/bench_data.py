#!/usr/bin/python3
"""The input side alone, sdp-train vs PyTorch, tf.data and DALI, on the same JPEGs and transforms.

Makes ImageNet-sized JPEGs once (CIFAR-10 images upscaled to 375 x 375 by `sdp-train data
convert --resize 375 --quality 90`, in an image folder, in TFRecord shards and in WebDataset tar
shards), then for each
worker count times, alternately and --rounds times:
  sdp-train   `sdp-train bench data` (image-folder, tfrecord, tar-shards streamed through the
              shuffle buffer): read, decode (libjpeg-turbo,
              DCT-scaled region decode), RandomResizedCrop(224) + flip, normalize, batch of 64
  pytorch     DataLoader(ImageFolder(root, Compose([RandomResizedCrop(224), RandomHorizontalFlip(),
              ToTensor(), Normalize(...)])), batch_size=64, shuffle=True, num_workers=w)
  tf.data     the same TFRecord shards: interleave(TFRecordDataset), shuffle(1024), map(parse_single_example,
              sample_distorted_bounding_box + decode_and_crop_jpeg (decodes only the crop, as the
              official ResNet input pipeline), resize 224 bilinear, random flip, normalize,
              num_parallel_calls=w), batch(64), prefetch; tf.config.threading intra/inter op = w, the
              dataset's private thread pool = w. Output float32 NHWC (no transpose)
  dali        NVIDIA DALI's CPU pipeline (device_id=None, device="cpu"): readers.tfrecord over the same
              shards (DALI index files made by its tfrecord2idx), decoders.image_random_crop (same
              area and aspect ranges), resize 224, crop_mirror_normalize (random mirror, float CHW),
              batch 64, num_threads=w. Falls back to readers.file on the image folder if the TFRecord
              reader cannot run (the row then says "dali image-folder")
Prints images/s (median of the rounds), the ratio to PyTorch and to the fastest peer of the row's
worker count. tf.data and DALI run in the bench virtual environment ($SDP_BENCH_VENV, default
/opt/sdp-bench-venv, made by `scripts/install-deps.sh --bench`), each timed run in a process of its
own (their numpy/protobuf are not Debian's, which PyTorch uses); a peer that is not installed or
cannot run gets a row saying so and the others still run. Each peer's first batch is checked once
(shape, dtype, value range after normalization, labels) before any timing.

  scripts/bench-data.sh [--images 2000] [--workers 1,2] [--batches 20] [--rounds 3] [--work DIR]
  SDP_TRAIN=/path/to/sdp-train (default build/sdp-train), SDP_BENCH_VENV=/path/to/venv
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("SDP_TRAIN") or os.path.join(ROOT, "build", "sdp-train")
VENV = os.environ.get("SDP_BENCH_VENV", "/opt/sdp-bench-venv")
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
FORMAT_DIRS = {"image-folder": "folder", "tfrecord": "tf", "tar-shards": "tar"}
WARMUP, SHUFFLE = 2, 1024  # batches not timed; tf.data's shuffle buffer and DALI's initial_fill (its default)
NOT_INSTALLED = "not installed: bash scripts/install-deps.sh --bench"
SDP_ROWS = ("sdp-train image-folder", "sdp-train tfrecord", "sdp-train tar-shards")


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


def check_batch(x, y, shapes):
    """One batch's shape, dtype, value range after ImageNet normalization and labels, as one line."""
    import numpy as np
    x, y = np.asarray(x), np.asarray(y).reshape(-1)
    lo, hi = float(x.min()), float(x.max())
    line = (f"batch {'x'.join(map(str, x.shape))} {x.dtype}, values {lo:.3f}..{hi:.3f}, "
            f"labels {int(y.min())}..{int(y.max())} ({len(set(y.tolist()))} distinct)")
    ok = (tuple(x.shape) in shapes and str(x.dtype) == "float32" and -2.2 < lo < -1.5 and 2.0 < hi < 2.7
          and y.shape[0] == x.shape[0] and 0 <= y.min() and y.max() <= 9)
    return line, bool(ok)


def torch_rate(work, workers, batches, check=False):
    import torch
    import torchvision.datasets as datasets
    import torchvision.transforms as T
    torch.set_num_threads(1)
    transform = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
    dataset = datasets.ImageFolder(os.path.join(work, "folder"), transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True, num_workers=workers, drop_last=True)
    if check:
        x, y = next(iter(loader))
        return check_batch(x.numpy(), y.numpy(), [(64, 3, 224, 224)])
    warmup, taken, images, start = WARMUP, 0, 0, time.perf_counter()
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


# ---- peers run in the bench virtual environment, one process per timed run (`--peer NAME`) ----

def tfrecord_files(work):
    return sorted(f for f in glob.glob(os.path.join(work, "tf", "*")) if not f.endswith(".idx"))


def time_batches(next_batch, batches):
    for _ in range(WARMUP):
        next_batch()
    start = time.perf_counter()
    images = sum(next_batch() for _ in range(batches))
    return images / (time.perf_counter() - start)


def tf_peer(work, workers, batches, check):
    """tf.data over the TFRecord shards, as the official ResNet ImageNet input pipeline reads them."""
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(workers)
    tf.config.threading.set_inter_op_parallelism_threads(workers)
    files = tfrecord_files(work)
    features = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
                "image/class/label": tf.io.FixedLenFeature([], tf.int64)}
    mean, std = tf.constant(MEAN), tf.constant(STD)
    whole = tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4])

    def parse(record):
        example = tf.io.parse_single_example(record, features)
        jpeg = example["image/encoded"]
        # RandomResizedCrop(224, scale 0.08-1, ratio 3/4-4/3): sample the box from the JPEG's header,
        # decode only that box (libjpeg-turbo region decode), then resize.
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.image.extract_jpeg_shape(jpeg), bounding_boxes=whole, min_object_covered=0.0,
            aspect_ratio_range=[3 / 4, 4 / 3], area_range=[0.08, 1.0], max_attempts=10,
            use_image_if_no_bounding_boxes=True)
        y0, x0, _ = tf.unstack(begin)
        h, w, _ = tf.unstack(size)
        image = tf.image.decode_and_crop_jpeg(jpeg, tf.stack([y0, x0, h, w]), channels=3)
        image = tf.image.resize(image, [224, 224], method="bilinear")
        image = tf.image.random_flip_left_right(image)
        return (image / 255.0 - mean) / std, example["image/class/label"]

    ds = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files))
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=len(files), num_parallel_calls=workers,
                       deterministic=False)
    ds = ds.shuffle(SHUFFLE).repeat()
    ds = ds.map(parse, num_parallel_calls=workers, deterministic=False)
    ds = ds.batch(64, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.threading.private_threadpool_size = workers  # tf.data's own pool: w threads, not one per core
    options.threading.max_intra_op_parallelism = 1       # as the official ImageNet pipeline: throughput
    ds = ds.with_options(options)
    it = iter(ds)
    if check:
        x, y = next(it)
        return check_batch(x.numpy(), y.numpy(), [(64, 224, 224, 3)])

    def next_batch():
        x, _ = next(it)
        return int(x.shape[0])
    return time_batches(next_batch, batches)


def dali_index(work):
    """DALI's readers.tfrecord needs an index per file, made by the tfrecord2idx script its wheel ships.
    Kept apart from the tf directory, where sdp-train keeps indexes of its own under the same names."""
    out = os.path.join(work, "dali-idx")
    os.makedirs(out, exist_ok=True)
    indexes = []
    for f in tfrecord_files(work):
        idx = os.path.join(out, os.path.basename(f) + ".idx")
        if not os.path.exists(idx):
            subprocess.run([os.path.join(os.path.dirname(sys.executable), "tfrecord2idx"), f, idx + ".tmp"],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            os.replace(idx + ".tmp", idx)
        indexes.append(idx)
    return indexes


def dali_peer(work, workers, batches, check, source):
    """NVIDIA DALI's CPU pipeline: no GPU, device="cpu" for every operator."""
    from nvidia.dali import fn, pipeline_def, types
    import nvidia.dali.tfrecord as tfrec

    @pipeline_def(batch_size=64, num_threads=workers, device_id=None)
    def pipeline():
        if source == "tfrecord":
            record = fn.readers.tfrecord(
                path=tfrecord_files(work), index_path=dali_index(work), random_shuffle=True, initial_fill=SHUFFLE,
                features={"image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                          "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1)})
            jpegs, labels = record["image/encoded"], record["image/class/label"]
        else:
            jpegs, labels = fn.readers.file(file_root=os.path.join(work, "folder"), random_shuffle=True,
                                            initial_fill=SHUFFLE)
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB, random_area=[0.08, 1.0],
                                               random_aspect_ratio=[3 / 4, 4 / 3], num_attempts=10)
        images = fn.resize(images, device="cpu", resize_x=224, resize_y=224)
        images = fn.crop_mirror_normalize(images, device="cpu", dtype=types.FLOAT, output_layout="CHW",
                                          mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD],
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, labels

    pipe = pipeline()
    pipe.build()
    if check:
        x, y = pipe.run()
        return check_batch(x.as_tensor(), y.as_tensor(), [(64, 3, 224, 224)])

    def next_batch():
        x, _ = pipe.run()
        return len(x)
    return time_batches(next_batch, batches)


PEERS = {"tf": ("tensorflow", lambda a: tf_peer(a.work, a.workers_n, a.batches, a.check)),
         "dali-tfrecord": ("nvidia.dali", lambda a: dali_peer(a.work, a.workers_n, a.batches, a.check, "tfrecord")),
         "dali-folder": ("nvidia.dali", lambda a: dali_peer(a.work, a.workers_n, a.batches, a.check, "folder"))}


def peer_main(args):
    """In the venv's python: one check or one timed run; prints one JSON line, exit 3 when not installed."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    module, run = PEERS[args.peer]
    try:
        __import__(module)
    except ImportError as e:
        print(json.dumps({"error": f"{NOT_INSTALLED} ({e})"}))
        sys.exit(3)
    out = run(args)
    print(json.dumps({"check": out[0], "ok": out[1]} if args.check else {"rate": out}))


class PeerError(Exception):
    pass


def peer_call(peer, work, workers, batches, check=False):
    python = os.path.join(VENV, "bin", "python")
    if not os.access(python, os.X_OK):
        raise PeerError(f"{NOT_INSTALLED} (no {python})")
    cmd = [python, os.path.abspath(__file__), "--peer", peer, "--work", work, "--workers", str(workers),
           "--batches", str(batches)] + (["--check"] if check else [])
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    lines = p.stdout.strip().splitlines()
    try:
        out = json.loads(lines[-1])
    except (IndexError, ValueError):
        err = [line for line in p.stderr.strip().splitlines() if line.strip()]
        raise PeerError(f"not run: exit {p.returncode}: {err[-1] if err else 'no output'}"[:300])
    if "error" in out:
        raise PeerError(out["error"])
    return out


def probe_peers(work, workers):
    """Which peers run: {row name: peer} and {row name: why not}, after checking each one's first batch."""
    runnable, skipped = {}, {}
    candidates = [("tf.data tfrecord", ["tf"]), ("dali tfrecord (cpu)", ["dali-tfrecord", "dali-folder"])]
    for name, peers in candidates:
        why = None
        for peer in peers:
            row = "dali image-folder (cpu)" if peer == "dali-folder" else name
            try:
                out = peer_call(peer, work, workers, 1, check=True)
            except PeerError as e:
                why = why or str(e)
                if str(e).startswith("not installed"):
                    break
                print(f"# check {row}: {e}", flush=True)
                continue
            print(f"# check {row}: {out['check']}: {'ok' if out['ok'] else 'WRONG'}", flush=True)
            if out["ok"]:
                runnable[row] = peer
                why = None
            else:
                why = f"not run: output check failed ({out['check']})"
            break
        if why:
            skipped[name] = why
    return runnable, skipped


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", default="/tmp/sdp-bench-data")
    parser.add_argument("--peer", choices=sorted(PEERS), help=argparse.SUPPRESS)  # internal: one peer run
    parser.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        args.workers_n = int(args.workers)
        return peer_main(args)
    data_dir = os.environ.get("SDP_DATA_DIR", os.path.join(ROOT, "..", "shared", "data"))
    os.makedirs(args.work, exist_ok=True)
    make_data(args.work, args.images, data_dir)
    with open(os.path.join(args.work, "job.yaml"), "w") as f:
        f.write("model: {name: resnet50, num_classes: 10}\n"
                "data: {format: image-folder, train: x, test: x, batch_size: 64, prefetch: 2, image_size: 224, "
                "resize: 256}\n")
    workers = [int(w) for w in args.workers.split(",")]
    line, ok = torch_rate(args.work, max(workers), 1, check=True)
    print(f"# check pytorch image-folder: {line}: {'ok' if ok else 'WRONG'}", flush=True)
    peers, skipped = probe_peers(args.work, max(workers))
    layout = {"tf.data tfrecord": "NHWC f32"}
    results = {}
    for r in range(args.rounds):
        for w in workers:
            runs = [("sdp-train image-folder", lambda: sdp_rate(args.work, "image-folder", w, args.batches)),
                    ("sdp-train tfrecord", lambda: sdp_rate(args.work, "tfrecord", w, args.batches)),
                    ("sdp-train tar-shards", lambda: sdp_rate(args.work, "tar-shards", w, args.batches)),
                    ("pytorch image-folder", lambda: torch_rate(args.work, w, args.batches))]
            runs += [(name, lambda peer=peer: peer_call(peer, args.work, w, args.batches)["rate"])
                     for name, peer in peers.items()]
            if r % 2:
                runs.reverse()  # a drift of the host's speed hits every side
            for name, run in runs:
                try:
                    results.setdefault((name, w), []).append(run())
                except PeerError as e:  # a peer that passed its check but failed a timed run
                    skipped[name] = str(e)
                    peers.pop(name, None)
        print(f"# round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  {args.images} JPEGs 375x375 q90 (CIFAR-10 upscaled), "
          f"RandomResizedCrop(224) + flip + normalize, batch 64, {args.batches} batches, {args.rounds} rounds")
    print("# vs best peer: images/s over the fastest of PyTorch, tf.data and DALI at the same worker count")
    print(f"{'loader':<26}{'workers':>8}{'output':>10}{'images/s':>10}{'vs pytorch':>12}{'vs best peer':>14}")
    for w in workers:
        torch_peer = statistics.median(results[("pytorch image-folder", w)])
        names = [*SDP_ROWS, "pytorch image-folder", *(n for n in peers if (n, w) in results)]
        best = max(statistics.median(results[(n, w)]) for n in names if n not in SDP_ROWS)
        for name in names:
            rate = statistics.median(results[(name, w)])
            print(f"{name:<26}{w:>8}{layout.get(name, 'NCHW f32'):>10}{rate:>10.0f}{rate / torch_peer:>11.2f}x"
                  f"{rate / best:>13.2f}x")
    for name, why in skipped.items():
        print(f"{name:<26}{'-':>8}  {why}")


if __name__ == "__main__":
    main()
