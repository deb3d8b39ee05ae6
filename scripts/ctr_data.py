#!/usr/bin/python3
"""Synthetic Criteo-shaped CTR data in LibSVM, its reader, and the metrics the CTR benchmark reports.

  python3 scripts/ctr_data.py --fields 39 --rows 117581 --train 100000 --test 20000 --seed 1 --out DIR

writes DIR/train.libsvm and DIR/test.libsvm, one sample a line: `label id:1 id:1 ...` with
label 0 or 1 and exactly --fields pairs, the f-th pair from field f. Deterministic: the same
arguments give the same bytes, on any machine (numpy's PCG64 streams, seeded from --seed).

The data:
  ids       each field owns a contiguous range of ids; id 0 is never used (it is what readers
            pad short rows with), so the fields share ids 1 .. rows-1. --split criteo (default)
            sizes the ranges like Criteo's: fields 0-12 are its 13 integer columns, bucketized
            (64 buckets each), fields 13-38 its 26 categorical columns, each range proportional
            to the square root of that column's cardinality in the Criteo Kaggle set (10M
            values in C3, 3 in C9) and never larger than that cardinality (the ids a small
            column cannot use go to the others); more than 39 fields repeat the pattern.
            --split equal gives every field the same share. Within a field, ids are drawn from
            a Zipf law truncated to the field's range, P(rank r) ~ r^-1.1 (--zipf), the field's
            first id the most frequent.
  values    1 (Criteo's categorical features are one-hot).
  labels    Bernoulli(sigmoid(logit)) of a planted random DeepFM-like model: per-id first-order
            weights (field scale lognormal), 8-dim per-id factors in a pairwise FM term and a
            small tanh MLP over the concatenated factors. Its three parts are scaled to
            variances 0.55 / 0.25 / 0.20 of the logit, the logit to standard deviation --signal
            (1.7), and the bias so that 25% of labels are 1 (Criteo's rate is 26%). The planted
            model's own test AUC (the best possible, about 0.83) is printed; a DeepFM learns
            less, rare ids' weights least (PyTorch, 1 epoch of 60,000 lines at the sample's
            shape: test AUC 0.73).
Train and test lines come from separate streams in chunks of 65,536 lines: --train 5000 gives
the first 5000 lines of --train 100000, and the test file does not depend on --train.

As a library (numpy only, for Debian's python3 and the TF virtual environment alike):
  load_libsvm(path, fields)   -> (ids int64 [N, F], values float32 [N, F], labels float32 [N])
  auc(labels, scores)         exact ROC AUC (rank-based, tied scores share their average rank)
  logloss(labels, logits)     mean sigmoid cross-entropy
"""
import argparse
import os
import sys
import time

import numpy as np

CHUNK = 65536
VERSION = 1  # of the generator: a change of its output bumps it (bench_ctr.py names its data by it)
# Criteo Kaggle (Display Advertising Challenge) categorical cardinalities C1..C26.
CRITEO_CATEGORICAL = [1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27,
                      14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572]
CRITEO_INTEGER_BUCKETS = 64
PLANTED_K, PLANTED_HIDDEN = 8, 16
PART_VARIANCE = (0.55, 0.25, 0.20)  # first order, FM, deep
POSITIVE_RATE = 0.25


def _apportion(total, weights, minimum=0):
    """total split in proportion to weights (largest remainders), each part at least minimum."""
    want = weights / weights.sum() * (total - minimum * len(weights))
    parts = np.floor(want).astype(np.int64) + minimum
    rest = total - int(parts.sum())
    parts[np.argsort(-(want - np.floor(want)), kind="stable")[:rest]] += 1
    return parts


def field_sizes(fields, rows, split="criteo"):
    """Ids per field (they sum to rows - 1: id 0 is left for padding)."""
    n = rows - 1
    if n < fields:
        raise ValueError(f"--rows {rows}: needs at least fields + 1 = {fields + 1} rows")
    if split == "equal":
        return _apportion(n, np.ones(fields), 1)
    pattern = [CRITEO_INTEGER_BUCKETS] * 13 + CRITEO_CATEGORICAL
    card = np.array([pattern[f % len(pattern)] for f in range(fields)], dtype=np.float64)
    weight = np.sqrt(card)
    sizes = np.zeros(fields, dtype=np.int64)
    free = np.ones(fields, dtype=bool)
    while free.any():  # proportional to sqrt(cardinality), capped at the cardinality; re-share what the caps leave
        left = n - int(sizes[~free].sum())
        want = weight[free] / weight[free].sum() * left
        capped = want >= card[free]
        if not capped.any():
            sizes[free] = _apportion(left, weight[free], 1)
            break
        idx = np.flatnonzero(free)[capped]
        sizes[idx] = card[idx]
        free[idx] = False
    if sizes.sum() < n:  # more rows than all the cardinalities: the rest in proportion, past the caps
        sizes += _apportion(n - int(sizes.sum()), weight)
    return sizes


class Planted:
    """The random model the labels come from."""

    def __init__(self, fields, rows, seed, split="criteo", zipf=1.1, signal=1.7):
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0]))
        self.fields = fields
        self.sizes = field_sizes(fields, rows, split)
        self.starts = 1 + np.concatenate([[0], np.cumsum(self.sizes)[:-1]])
        self.cdfs = []
        for n in self.sizes:
            p = np.arange(1, n + 1, dtype=np.float64) ** -zipf
            c = np.cumsum(p)
            self.cdfs.append(c / c[-1])
        field_scale = np.exp(rng.normal(0.0, 0.5, fields))
        scale_of_id = np.zeros(rows)
        for f in range(fields):
            scale_of_id[self.starts[f]: self.starts[f] + self.sizes[f]] = field_scale[f]
        self.w = (rng.standard_normal(rows) * scale_of_id).astype(np.float32)
        self.v = (rng.standard_normal((rows, PLANTED_K)) / np.sqrt(PLANTED_K)).astype(np.float32)
        self.w1 = (rng.standard_normal((fields * PLANTED_K, PLANTED_HIDDEN)) / np.sqrt(fields)).astype(np.float32)
        self.w2 = rng.standard_normal(PLANTED_HIDDEN).astype(np.float32)
        # Scale the parts and place the bias on a calibration sample of its own stream.
        ids = self.draw_ids(np.random.default_rng(np.random.SeedSequence([seed, 3])), 20000)
        parts = self.parts(ids)
        self.part_scale = np.sqrt(np.array(PART_VARIANCE) / parts.var(axis=0)) * signal
        z = parts @ self.part_scale
        z -= z.mean()
        lo, hi = -20.0, 20.0
        for _ in range(60):  # bias with mean(sigmoid) = POSITIVE_RATE
            mid = (lo + hi) / 2
            if np.mean(1 / (1 + np.exp(-(z + mid)))) < POSITIVE_RATE:
                lo = mid
            else:
                hi = mid
        self.bias = (lo + hi) / 2 - (parts @ self.part_scale).mean()

    def draw_ids(self, rng, n):
        ids = np.empty((n, self.fields), dtype=np.int64)
        for f in range(self.fields):
            ids[:, f] = self.starts[f] + np.searchsorted(self.cdfs[f], rng.random(n), side="right").clip(
                0, self.sizes[f] - 1)
        return ids

    def parts(self, ids):
        first = self.w[ids].sum(axis=1, dtype=np.float64)
        e = self.v[ids]  # n, F, k
        s = e.sum(axis=1)
        fm = 0.5 * ((s * s).sum(axis=1) - (e * e).sum(axis=(1, 2)))
        deep = np.tanh(e.reshape(len(ids), -1) @ self.w1) @ self.w2
        return np.stack([first, fm, deep.astype(np.float64)], axis=1)

    def logits(self, ids):
        return self.parts(ids) @ self.part_scale + self.bias

    def chunk(self, seed, stream, index, n):
        """Lines [index * CHUNK, index * CHUNK + n) of a stream (1: train, 2: test): ids, labels, logits."""
        rng = np.random.default_rng(np.random.SeedSequence([seed, stream, index]))
        ids = self.draw_ids(rng, CHUNK)[:n]  # a whole chunk's draws, so a shorter file is a prefix
        u = rng.random(CHUNK)[:n]
        z = self.logits(ids)
        labels = (u < 1 / (1 + np.exp(-z))).astype(np.int64)
        return ids, labels, z


def format_lines(ids, labels):
    """The LibSVM text of rows of ids with value 1, built without a Python loop per line."""
    n, fields = ids.shape
    ids = ids.astype(np.int64)
    nd = np.ones(ids.shape, dtype=np.int64)
    for p in range(1, 19):
        nd += ids >= 10 ** p
    tok = np.concatenate([np.full((n, 1), 2, dtype=np.int64), nd + 3], axis=1)  # "L " and "id:1 "
    ends = np.cumsum(tok.ravel())
    starts = (ends - tok.ravel()).reshape(n, fields + 1)
    out = np.empty(int(ends[-1]), dtype=np.uint8)
    out[starts[:, 0]] = ord("0") + labels
    out[starts[:, 0] + 1] = ord(" ")
    pos = starts[:, 1:]
    for j in range(int(nd.max())):
        m = nd > j
        digit = (ids[m] // 10 ** (nd[m] - 1 - j)) % 10
        out[pos[m] + j] = ord("0") + digit
    out[pos + nd] = ord(":")
    out[pos + nd + 1] = ord("1")
    out[pos + nd + 2] = ord(" ")
    out[pos[:, -1] + nd[:, -1] + 2] = ord("\n")
    return out.tobytes()


def write_split(planted, seed, stream, count, path):
    z_all, y_all = [], []
    with open(path, "wb") as f:
        for index in range(-(-count // CHUNK)):
            n = min(CHUNK, count - index * CHUNK)
            ids, labels, z = planted.chunk(seed, stream, index, n)
            f.write(format_lines(ids, labels))
            z_all.append(z)
            y_all.append(labels)
    return np.concatenate(z_all) if z_all else np.zeros(0), np.concatenate(y_all) if y_all else np.zeros(0)


_SEP = np.zeros(256, dtype=bool)
_SEP[list(b" \t\r\n:")] = True
_DIGIT = np.zeros(256, dtype=bool)
_DIGIT[list(b"0123456789")] = True
_READ_CHUNK = 1 << 23


class _BadLine(Exception):
    pass


def _parse_lines(buf):
    """One piece of a LibSVM file (whole lines, ending in a newline): the numbers of each
    nonempty line in order (label, id, value, id, value, ...) and the pairs of each line.
    Integers (with an optional sign) are parsed digit by digit, vectorized; any other token
    ("0.5", "1e-3") by float()."""
    raw = np.frombuffer(buf, dtype=np.uint8)
    sep = _SEP[raw]
    prev_sep = np.concatenate([[True], sep[:-1]])
    next_sep = np.concatenate([sep[1:], [True]])
    starts = np.flatnonzero(~sep & prev_sep)
    ends = np.flatnonzero(~sep & next_sep) + 1
    lens = ends - starts
    first = raw[starts]
    signed = (first == ord("-")) | (first == ord("+"))
    vals = np.zeros(len(starts), dtype=np.float64)
    off = signed.astype(np.int64)
    odd = np.flatnonzero(~sep & ~_DIGIT[raw])  # characters other than digits
    odd = odd[~(np.isin(raw[odd], np.frombuffer(b"+-", dtype=np.uint8)) & prev_sep[odd])]  # a leading sign is fine
    complex_tok = np.zeros(len(starts), dtype=bool)
    complex_tok[np.searchsorted(starts, odd, side="right") - 1] = True
    ndig = lens - off
    complex_tok |= ndig <= 0
    ndig[complex_tok] = 0
    for n in np.unique(ndig[ndig > 0]):  # the tokens of n digits at once
        t = np.flatnonzero(ndig == n)
        chars = raw[(starts[t] + off[t])[:, None] + np.arange(n)] - ord("0")
        vals[t] = chars @ (10.0 ** np.arange(n - 1, -1, -1))
    vals[signed & (first == ord("-"))] *= -1
    for t in np.flatnonzero(complex_tok):
        vals[t] = float(buf[starts[t]: ends[t]])
    nl = np.flatnonzero(raw == ord("\n"))
    tokens = np.diff(np.concatenate([[0], np.searchsorted(starts, nl)]))
    pairs = np.diff(np.concatenate([[0], np.searchsorted(np.flatnonzero(raw == ord(":")), nl)]))
    if not np.array_equal(tokens[tokens > 0], 1 + 2 * pairs[tokens > 0]) or pairs[tokens == 0].any():
        bad = int(np.argmax((tokens != 1 + 2 * pairs) & ((tokens > 0) | (pairs > 0))))
        raise _BadLine(bad)
    return vals, pairs[tokens > 0], tokens


def load_libsvm(path, fields=None):
    """A LibSVM file as arrays: ids int64 [N, F], values float32 [N, F], labels float32 [N] (0/1:
    a label > 0 is 1, so -1/+1 files read as 0/1). A line with fewer than F pairs is padded with
    id 0, value 0 at its end (as sdp-train's reader does); more than F is an error. fields None:
    the most pairs of any line. Vectorized (about 1 s per 100,000 Criteo-shaped lines)."""
    with open(path, "rb") as f:
        data = f.read()
    if data and not data.endswith(b"\n"):
        data += b"\n"
    nums, pair_list, lines_before = [], [], 0
    pos = 0
    while pos < len(data):
        cut = data.rfind(b"\n", pos, pos + _READ_CHUNK) + 1
        if cut <= pos:
            cut = data.index(b"\n", pos) + 1
        try:
            v, p, tokens = _parse_lines(data[pos:cut])
        except _BadLine as e:
            raise ValueError(f"{path}:{lines_before + e.args[0] + 1}: not a LibSVM line 'label id:value ...'") from None
        if fields is not None and len(p) and p.max() > fields:
            line = lines_before + int(np.flatnonzero(tokens > 0)[np.argmax(p > fields)]) + 1
            raise ValueError(f"{path}:{line}: {int(p.max())} pairs, more than the {fields} fields")
        nums.append(v)
        pair_list.append(p)
        lines_before += len(tokens)
        pos = cut
    nums = np.concatenate(nums) if nums else np.zeros(0)
    pairs = np.concatenate(pair_list) if pair_list else np.zeros(0, dtype=np.int64)
    n = len(pairs)
    if fields is None:
        fields = int(pairs.max()) if n else 0
    counts = 1 + 2 * pairs
    first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    labels = (nums[first] > 0).astype(np.float32)
    ids = np.zeros((n, fields), dtype=np.int64)
    values = np.zeros((n, fields), dtype=np.float32)
    row = np.repeat(np.arange(n), pairs)
    col = np.arange(int(pairs.sum())) - np.repeat(np.cumsum(pairs) - pairs, pairs)
    at = np.repeat(first + 1, pairs) + 2 * col
    ids[row, col] = nums[at].astype(np.int64)
    values[row, col] = nums[at + 1]
    if n and ids.min() < 0:
        raise ValueError(f"{path}: negative id")
    return ids, values, labels


def auc(labels, scores):
    """Exact ROC AUC: P(score of a random positive > a random negative), ties counted 1/2."""
    labels = np.asarray(labels).ravel() > 0.5
    scores = np.asarray(scores, dtype=np.float64).ravel()
    pos = int(labels.sum())
    neg = len(labels) - pos
    if pos == 0 or neg == 0:
        return float("nan")
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    avg_rank = ends - (counts - 1) / 2.0  # 1-based average rank of each distinct score
    rank_sum = avg_rank[inverse.ravel()][labels].sum()
    return float((rank_sum - pos * (pos + 1) / 2.0) / (pos * neg))


def logloss(labels, logits):
    """Mean sigmoid cross-entropy of logits against 0/1 labels (log(1 + e^z) - y z, stable)."""
    y = np.asarray(labels, dtype=np.float64).ravel()
    z = np.asarray(logits, dtype=np.float64).ravel()
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fields", type=int, default=39)
    parser.add_argument("--rows", type=int, default=117581, help="table rows V: ids are 1 .. V-1")
    parser.add_argument("--train", type=int, default=100000)
    parser.add_argument("--test", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--split", choices=["criteo", "equal"], default="criteo")
    parser.add_argument("--zipf", type=float, default=1.1)
    parser.add_argument("--signal", type=float, default=1.7, help="standard deviation of the planted logit")
    parser.add_argument("--out", required=True)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    t0 = time.time()
    os.makedirs(args.out, exist_ok=True)
    planted = Planted(args.fields, args.rows, args.seed, args.split, args.zipf, args.signal)
    _, ytr = write_split(planted, args.seed, 1, args.train, os.path.join(args.out, "train.libsvm"))
    zte, yte = write_split(planted, args.seed, 2, args.test, os.path.join(args.out, "test.libsvm"))
    if not args.quiet:
        print(f"ctr_data: {args.out}: train {args.train} (positives {ytr.mean() if len(ytr) else 0:.3f}), "
              f"test {args.test}, {args.fields} fields, ids 1..{args.rows - 1} (field sizes {planted.sizes.min()}.."
              f"{planted.sizes.max()}), planted model's test AUC {auc(yte, zte):.4f} logloss {logloss(yte, zte):.4f}, "
              f"{time.time() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
