#!/usr/bin/python3
"""The PyTorch and TensorFlow peers of sdp-train's CTR models (DeepFM, FM, LR), one training
run per call, one JSON line out:

  python3 scripts/ctr_peers.py --peer torch-sparse --train T.libsvm --test E.libsvm --fields 39 \\
      --rows 117581 --embedding-size 32 --hidden 256,128,64 --batch 1024 --epochs 1 --lr 1e-3 \\
      --threads 1 --dropout 0.5
  /opt/sdp-bench-venv/bin/python scripts/ctr_peers.py --peer tf ...     (TensorFlow's own venv)

Peers (the model: scripts/deepfm_torch.py's docstring; the same initialization in all):
  torch-sparse  nn.Embedding(sparse=True) tables with torch.optim.SparseAdam (lazy: the batch's
                rows and their moments only), Adam for bias, MLP and output
  torch-dense   dense nn.Embedding tables, Adam on everything
  tf            the SageMaker sample's model_fn in TF2: tf.Variables FM_B [1], FM_W [V], FM_V
                [V,K], tf.nn.embedding_lookup scaled by the values, FM and deep parts (matmul +
                relu + tf.nn.dropout), sigmoid cross-entropy, the sample's optimizer
                tf.compat.v1.train.AdamOptimizer (--tf-optimizer keras: tf.keras.optimizers.Adam;
                both update the whole tables' moments every step, as the sample's did) in a
                tf.function step; threads: tf.config.threading intra and inter op = --threads.
                Input: the data stays in memory as tensors; each epoch a shuffled index
                tf.data pipeline gathers whole batches (the sample's batch-then-vectorized-map),
                num_parallel_calls and prefetch AUTOTUNE, its private thread pool --threads.
                --tf-jit compiles the step with XLA (slower on this model on CPU, so off).
Every peer loads the LibSVM files into arrays first (not timed; --cache-dir keeps the parsed
arrays for the next run), shuffles each epoch (seeded), drops the last partial batch (as the
sample), and times the training loop only: samples_per_sec counts the steps after the first
--warmup-steps (steady state; at most a fifth of the steps), samples_per_sec_all every step.
Then test AUC (exact, ties averaged) and log loss over the whole test file in eval mode (no dropout). peak_rss_mb is this
process's maximum RSS (getrusage). --threads also sets OMP_NUM_THREADS and, unless --blas-threads
says otherwise, OPENBLAS_NUM_THREADS (Debian's PyTorch runs its matrix products in OpenBLAS,
its other kernels in OpenMP threads) before the framework loads.
--l2: the sample's l2 * 0.5 * (sum FM_W^2 + sum FM_V^2) over the whole tables (torch-sparse: over
the batch's distinct rows, a sparse gradient); 0 by default.
--save-model DIR (torch peers): DIR/model.safetensors with sdp-train's tensor names.
"""
import argparse
import json
import os
import resource
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ctr_data  # noqa: E402

PEERS = ("torch-sparse", "torch-dense", "tf")


def load(path, fields, cache_dir):
    """load_libsvm, through a cache of the parsed arrays in cache_dir (keyed by path, size, mtime, fields)."""
    if not cache_dir:
        return ctr_data.load_libsvm(path, fields)
    st = os.stat(path)
    key = f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}|{fields}"
    import hashlib
    name = f"{os.path.basename(path)}.{hashlib.sha1(key.encode()).hexdigest()[:12]}.npz"
    cached = os.path.join(cache_dir, name)
    if os.path.exists(cached):
        with np.load(cached) as z:
            return z["ids"], z["values"], z["labels"]
    ids, values, labels = ctr_data.load_libsvm(path, fields)
    os.makedirs(cache_dir, exist_ok=True)
    tmp = cached + f".{os.getpid()}.tmp.npz"
    np.savez(tmp, ids=ids, values=values, labels=labels)
    os.replace(tmp, cached)
    return ids, values, labels


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def torch_peer(args, data):
    import torch
    import deepfm_torch
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    (tr_ids, tr_vals, tr_y), (te_ids, te_vals, te_y) = data
    sparse = args.peer == "torch-sparse"
    model = deepfm_torch.build(args.model, args.fields, args.rows, args.embedding_size, args.hidden_list,
                               args.dropout, sparse=sparse)
    tables = [model.first_order.weight] + ([model.embedding.weight] if args.model != "lr" else [])
    dense = [p for p in model.parameters() if all(p is not t for t in tables)]
    if sparse:
        opts = [torch.optim.SparseAdam(tables, lr=args.lr), torch.optim.Adam(dense, lr=args.lr)]
    else:
        opts = [torch.optim.Adam(model.parameters(), lr=args.lr)]
    ids_t, vals_t, y_t = torch.from_numpy(tr_ids), torch.from_numpy(tr_vals), torch.from_numpy(tr_y)
    n, b = len(tr_y), args.batch
    steps_per_epoch = n // b
    gen = torch.Generator().manual_seed(args.seed)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    step, losses, t_warm = 0, [], None
    t0 = time.perf_counter()
    for _ in range(args.epochs):
        perm = torch.randperm(n, generator=gen)
        for i in range(steps_per_epoch):
            idx = perm[i * b:(i + 1) * b]
            ids, vals, y = ids_t[idx], vals_t[idx], y_t[idx]
            for o in opts:
                o.zero_grad(set_to_none=True)
            loss = loss_fn(model(ids, vals), y)
            if args.l2:
                loss = loss + deepfm_torch.l2_penalty(model, ids, args.l2)
            loss.backward()
            for o in opts:
                o.step()
            losses.append(loss.detach())
            step += 1
            if step == args.warmup_steps:
                t_warm = time.perf_counter()
    t1 = time.perf_counter()
    logits = deepfm_torch.predict(model, te_ids, te_vals)
    if args.save_model:
        os.makedirs(args.save_model, exist_ok=True)
        deepfm_torch.write_safetensors(os.path.join(args.save_model, "model.safetensors"),
                                       deepfm_torch.state_numpy(model))
    tail = torch.stack(losses[-max(1, steps_per_epoch // 10):]).mean().item() if losses else float("nan")
    return dict(steps=step, train_seconds=t1 - t0, warm_seconds=(t1 - t_warm) if t_warm else 0.0,
                train_loss=tail, logits=logits, framework=f"torch {torch.__version__}")


def tf_peer(args, data):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    tf.random.set_seed(args.seed)
    (tr_ids, tr_vals, tr_y), (te_ids, te_vals, te_y) = data
    F, V, K = args.fields, args.rows, args.embedding_size
    glorot_normal = tf.keras.initializers.GlorotNormal(seed=args.seed)
    glorot_uniform = tf.keras.initializers.GlorotUniform(seed=args.seed + 1)
    fm_b = tf.Variable(tf.zeros([1]), name="fm_bias")
    fm_w = tf.Variable(glorot_normal([V]), name="fm_w")
    vars_ = [fm_b, fm_w]
    fm_v, mlp = None, []
    if args.model != "lr":
        fm_v = tf.Variable(glorot_normal([V, K]), name="fm_v")
        vars_.append(fm_v)
    if args.model == "deepfm":
        widths = [F * K] + args.hidden_list + [1]
        for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
            mlp.append((tf.Variable(glorot_uniform([a, b]), name=f"mlp{i}_w"),
                        tf.Variable(tf.zeros([b]), name=f"mlp{i}_b")))
        vars_ += [v for layer in mlp for v in layer]
    drop = float(args.dropout)

    def forward(ids, vals, training):
        y = fm_b + tf.reduce_sum(tf.multiply(tf.nn.embedding_lookup(fm_w, ids), vals), 1)
        if fm_v is None:
            return y
        e = tf.multiply(tf.nn.embedding_lookup(fm_v, ids), tf.expand_dims(vals, -1))  # B, F, K
        sum_square = tf.square(tf.reduce_sum(e, 1))
        square_sum = tf.reduce_sum(tf.square(e), 1)
        y = y + 0.5 * tf.reduce_sum(sum_square - square_sum, 1)
        if not mlp:
            return y
        h = tf.reshape(e, [-1, F * K])
        for w, b in mlp[:-1]:
            h = tf.nn.relu(tf.matmul(h, w) + b)
            if training and drop > 0:
                h = tf.nn.dropout(h, rate=drop)
        w, b = mlp[-1]
        return y + tf.reshape(tf.matmul(h, w) + b, [-1])

    if args.tf_optimizer == "keras":
        opt = tf.keras.optimizers.Adam(learning_rate=args.lr, beta_1=0.9, beta_2=0.999, epsilon=1e-8)
    else:
        opt = tf.compat.v1.train.AdamOptimizer(learning_rate=args.lr, beta1=0.9, beta2=0.999, epsilon=1e-8)

    @tf.function(jit_compile=args.tf_jit)
    def train_step(ids, vals, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=forward(ids, vals, True)))
            if args.l2:
                loss += args.l2 * tf.nn.l2_loss(fm_w) + (args.l2 * tf.nn.l2_loss(fm_v) if fm_v is not None else 0.0)
        grads = tape.gradient(loss, vars_)
        opt.apply_gradients(zip(grads, vars_))
        return loss

    @tf.function
    def infer(ids, vals):
        return forward(ids, vals, False)

    ids_t, vals_t, y_t = tf.constant(tr_ids), tf.constant(tr_vals), tf.constant(tr_y)
    n, b = len(tr_y), args.batch
    steps_per_epoch = n // b
    options = tf.data.Options()
    options.threading.private_threadpool_size = args.threads

    def epoch_dataset(epoch):
        perm = tf.random.shuffle(tf.range(n, dtype=tf.int64), seed=args.seed + epoch)[:steps_per_epoch * b]
        ds = tf.data.Dataset.from_tensor_slices(tf.reshape(perm, [steps_per_epoch, b]))
        ds = ds.map(lambda idx: (tf.gather(ids_t, idx), tf.gather(vals_t, idx), tf.gather(y_t, idx)),
                    num_parallel_calls=tf.data.AUTOTUNE)
        return ds.prefetch(tf.data.AUTOTUNE).with_options(options)

    step, losses, t_warm = 0, [], None
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        for ids, vals, y in epoch_dataset(epoch):
            losses.append(train_step(ids, vals, y))
            step += 1
            if step == args.warmup_steps:
                losses[-1].numpy()
                t_warm = time.perf_counter()
    if losses:
        losses[-1].numpy()
    t1 = time.perf_counter()
    out = []
    for i in range(0, len(te_y), 16384):
        out.append(infer(tf.constant(te_ids[i:i + 16384]), tf.constant(te_vals[i:i + 16384])).numpy())
    logits = np.concatenate(out).astype(np.float64) if out else np.zeros(0)
    tail = float(np.mean([l.numpy() for l in losses[-max(1, steps_per_epoch // 10):]])) if losses else float("nan")
    return dict(steps=step, train_seconds=t1 - t0, warm_seconds=(t1 - t_warm) if t_warm else 0.0,
                train_loss=tail, logits=logits, framework=f"tensorflow {tf.__version__}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peer", choices=PEERS, required=True)
    parser.add_argument("--model", choices=("deepfm", "fm", "lr"), default="deepfm")
    parser.add_argument("--train", required=True)
    parser.add_argument("--test", required=True)
    parser.add_argument("--fields", type=int, default=39)
    parser.add_argument("--rows", type=int, default=0, help="table rows V (default: the largest id + 1)")
    parser.add_argument("--embedding-size", type=int, default=32)
    parser.add_argument("--hidden", default="256,128,64")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dropout", type=float, default=0.5, help="drop probability (the sample keeps 0.5)")
    parser.add_argument("--l2", type=float, default=0.0)
    parser.add_argument("--blas-threads", type=int, default=0,
                        help="torch peers: OpenBLAS's threads (default --threads)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup-steps", type=int, default=10, help="steps not counted in samples_per_sec")
    parser.add_argument("--tf-optimizer", choices=("v1", "keras"), default="v1")
    parser.add_argument("--tf-jit", action="store_true", help="tf: compile the training step with XLA")
    parser.add_argument("--cache-dir", default="", help="keep parsed arrays here (npz) for later runs")
    parser.add_argument("--save-model", default="", help="torch peers: write DIR/model.safetensors")
    args = parser.parse_args()
    args.hidden_list = [int(h) for h in args.hidden.split(",") if h.strip()]
    blas = args.blas_threads or args.threads
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(blas)
    t0 = time.perf_counter()
    try:
        train = load(args.train, args.fields, args.cache_dir)
        test = load(args.test, args.fields, args.cache_dir)
    except (OSError, ValueError) as e:
        print(json.dumps({"error": f"data: {e}"}))
        sys.exit(2)
    load_seconds = time.perf_counter() - t0
    max_id = int(max(train[0].max(initial=0), test[0].max(initial=0)))
    if not args.rows:
        args.rows = max_id + 1
    if max_id >= args.rows:
        print(json.dumps({"error": f"data: id {max_id} is not below --rows {args.rows}"}))
        sys.exit(2)
    if len(train[2]) < args.batch:
        print(json.dumps({"error": f"data: {len(train[2])} training samples, fewer than one batch of {args.batch}"}))
        sys.exit(2)
    # Short runs: at most a fifth of the steps are warm-up.
    args.warmup_steps = min(args.warmup_steps, args.epochs * (len(train[2]) // args.batch) // 5)
    try:
        run = (tf_peer if args.peer == "tf" else torch_peer)(args, (train, test))
    except ImportError as e:
        print(json.dumps({"error": f"not installed: {e}"}))
        sys.exit(3)
    steps = run["steps"]
    timed = steps - args.warmup_steps
    result = {
        "peer": args.peer, "model": args.model, "threads": args.threads,
        "blas_threads": blas if args.peer != "tf" else None, "batch": args.batch, "epochs": args.epochs,
        "train_samples": len(train[2]), "steps": steps, "warmup_steps": args.warmup_steps,
        "samples_per_sec": (timed * args.batch / run["warm_seconds"]) if timed > 0 and run["warm_seconds"] > 0
        else steps * args.batch / run["train_seconds"],
        "samples_per_sec_all": steps * args.batch / run["train_seconds"],
        "train_seconds": run["train_seconds"], "train_loss": run["train_loss"],
        "test_auc": ctr_data.auc(test[2], run["logits"]), "test_logloss": ctr_data.logloss(test[2], run["logits"]),
        "test_samples": len(test[2]), "peak_rss_mb": peak_rss_mb(), "load_seconds": load_seconds,
        "framework": run["framework"],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
