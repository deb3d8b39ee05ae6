#!/usr/bin/python3
"""DeepFM, FM and logistic regression on sparse (id, value) features in PyTorch, with the tensor
names of sdp-train's model.safetensors, so that a model sdp-train wrote can be scored here:

  python3 scripts/deepfm_torch.py score --model-dir DIR --test FILE [--fields F] [--embedding-size K]
                                        [--hidden 256,128,64] [--model deepfm|fm|lr]

prints `test_auc=... test_logloss=... test_samples=N` for DIR/model.safetensors (or DIR itself
when it is a file) on the LibSVM file FILE. The model's kind, table rows, embedding size, hidden
widths and fields come from the file's tensors where they are there (fields of an FM or LR model
only from --fields, else the test file's longest line); a flag that disagrees with the file is an
error.

The model (the SageMaker DeepFM sample, aws-samples/deepfm-tensorflow-distributed-training-on-
amazon-sagemaker, 2-hvd-gpu/DeepFM-hvd-tfrecord-vectorized-map.py), for ids [B, F], values [B, F]:
  logit = bias + sum_f w[id_f] x_f                                       first order
        + 0.5 sum_k ((sum_f v[id_f,k] x_f)^2 - sum_f (v[id_f,k] x_f)^2)  FM (fm, deepfm)
        + output(mlp(concat_f v[id_f,:] x_f))                            deep (deepfm)
mlp: per hidden layer Linear -> ReLU -> Dropout(p) (p the drop probability), output: Linear to 1.
Tensors (float32):  bias [1], first_order.weight [V,1], embedding.weight [V,K], mlp.{i}.weight
[out,in], mlp.{i}.bias [out], output.weight [1,last], output.bias [1]; fm has no mlp/output, lr
only bias and first_order. Initialization as the sample's: bias 0; w and v Glorot normal
(truncated, as TensorFlow's), w as the sample's 1-D table [V] (std sqrt(1/V)); Linear weights
Glorot uniform, biases 0.

Library: CtrModel(kind, fields, rows, k, hidden, dropout, sparse), l2_penalty(model, ids, l2),
read_safetensors(path) -> {name: numpy array}, write_safetensors(path, {name: array}),
load_model(path, ...) -> CtrModel, predict(model, ids, values) -> numpy logits.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ctr_data  # noqa: E402

KINDS = ("deepfm", "fm", "lr")
_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64, "I32": np.int32,
           "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def read_safetensors(path):
    """{name: numpy array} of a .safetensors file: 8-byte little-endian header length, a JSON
    header {name: {dtype, shape, data_offsets: [begin, end]}} (offsets into the bytes after the
    header; "__metadata__" skipped), then the raw little-endian data. The `safetensors` package
    is used when installed."""
    try:
        from safetensors.numpy import load_file
        return dict(load_file(path))
    except ImportError:
        pass
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = memoryview(data)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] == "BF16":  # the high half of a float32
            raw = np.frombuffer(body[info["data_offsets"][0]:info["data_offsets"][1]], dtype="<u2")
            out[name] = (raw.astype(np.uint32) << 16).view(np.float32).reshape(info["shape"])
            continue
        dtype = np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<")
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(body[begin:end], dtype=dtype).reshape(info["shape"]).astype(dtype.newbyteorder("="))
    return out


def write_safetensors(path, tensors):
    """Writes {name: numpy array} (float32/64, int32/64) as a .safetensors file."""
    names = {np.dtype(v): k for k, v in _DTYPES.items()}
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        blob = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for blob in blobs:
            f.write(blob)


def _torch():
    import torch
    return torch


def _truncated_glorot_normal_(t, fan_in, fan_out, generator=None):
    """TensorFlow's glorot_normal: truncated normal at 2 std, std sqrt(2 / (fan_in + fan_out)) / 0.8796."""
    torch = _torch()
    std = math.sqrt(2.0 / (fan_in + fan_out)) / 0.87962566103423978
    with torch.no_grad():
        torch.nn.init.trunc_normal_(t, 0.0, std, -2 * std, 2 * std)
    return t


def build(kind="deepfm", fields=39, rows=117581, k=32, hidden=(256, 128, 64), dropout=0.0, sparse=False,
          batch_norm=False):
    torch = _torch()
    nn = torch.nn

    class Hidden(nn.Linear):
        """Linear -> ReLU [-> BatchNorm] (sdp-train's model.batch_norm: mlp.{i}.bn.*)."""

        def __init__(self, a, b):
            super().__init__(a, b)
            if batch_norm:
                self.bn = nn.BatchNorm1d(b, eps=1e-3)

        def forward(self, h):
            h = torch.relu(super().forward(h))
            return self.bn(h) if batch_norm else h

    class CtrModel(nn.Module):
        def __init__(self):
            super().__init__()
            if kind not in KINDS:
                raise ValueError(f"model kind '{kind}': one of {', '.join(KINDS)}")
            self.kind, self.fields, self.rows, self.k = kind, fields, rows, k
            self.hidden = list(hidden) if kind == "deepfm" else []
            self.bias = nn.Parameter(torch.zeros(1))
            self.first_order = nn.Embedding(rows, 1, sparse=sparse)
            _truncated_glorot_normal_(self.first_order.weight, rows, rows)  # the sample's w is 1-D [V]
            if kind != "lr":
                self.embedding = nn.Embedding(rows, k, sparse=sparse)
                _truncated_glorot_normal_(self.embedding.weight, rows, k)
            if kind == "deepfm":
                widths = [fields * k] + self.hidden
                self.mlp = nn.ModuleList(Hidden(a, b) for a, b in zip(widths[:-1], widths[1:]))
                self.output = nn.Linear(widths[-1], 1)
                for layer in list(self.mlp) + [self.output]:
                    nn.init.xavier_uniform_(layer.weight)
                    nn.init.zeros_(layer.bias)
                self.drop = nn.Dropout(dropout)

        def forward(self, ids, values):
            """Logits [B] of ids [B, F] (int64) and values [B, F]."""
            y = self.bias + (self.first_order(ids).squeeze(-1) * values).sum(1)
            if self.kind == "lr":
                return y
            e = self.embedding(ids) * values.unsqueeze(-1)  # B, F, K
            s = e.sum(1)
            y = y + 0.5 * (s * s - (e * e).sum(1)).sum(1)
            if self.kind == "fm":
                return y
            h = e.reshape(e.shape[0], -1)
            for layer in self.mlp:
                h = self.drop(layer(h))
            return y + self.output(h).squeeze(-1)

    return CtrModel()


def l2_penalty(model, ids, l2):
    """The sample's table L2: l2 * 0.5 * (sum w^2 + sum v^2) over the whole tables; with sparse
    tables (gradients of the batch's rows only) over the batch's distinct rows instead."""
    torch = _torch()
    if not l2:
        return 0.0
    tables = [model.first_order] + ([model.embedding] if model.kind != "lr" else [])
    if tables[0].sparse:
        rows = torch.unique(ids)
        return l2 * 0.5 * sum((t(rows) ** 2).sum() for t in tables)
    return l2 * 0.5 * sum((t.weight ** 2).sum() for t in tables)


def describe(tensors):
    """(kind, rows, k, hidden, fields or None) from a model file's tensors."""
    if "first_order.weight" not in tensors or "bias" not in tensors:
        raise ValueError("not a CTR model: no bias / first_order.weight")
    rows = tensors["first_order.weight"].shape[0]
    if "embedding.weight" not in tensors:
        return "lr", rows, 0, [], None
    k = tensors["embedding.weight"].shape[1]
    if "output.weight" not in tensors:
        return "fm", rows, k, [], None
    hidden = []
    while f"mlp.{len(hidden)}.weight" in tensors:
        hidden.append(tensors[f"mlp.{len(hidden)}.weight"].shape[0])
    first_in = tensors["mlp.0.weight"].shape[1] if hidden else tensors["output.weight"].shape[1]
    if first_in % k:
        raise ValueError(f"the deep part's input width {first_in} is not fields x {k}")
    return "deepfm", rows, k, hidden, first_in // k


def load_model(path, kind=None, fields=None, k=None, hidden=None):
    """A CtrModel holding the tensors of a model.safetensors (a directory: its model.safetensors)."""
    torch = _torch()
    if os.path.isdir(path):
        path = os.path.join(path, "model.safetensors")
    tensors = read_safetensors(path)
    fkind, rows, fk, fhidden, ffields = describe(tensors)
    for name, given, found in (("--model", kind, fkind), ("--embedding-size", k, fk if fkind != "lr" else None),
                               ("--hidden", hidden, fhidden if fkind == "deepfm" else None),
                               ("--fields", fields, ffields)):
        if given is not None and found is not None and given != found:
            raise ValueError(f"{name} {given}: {path} holds {found}")
    fields = ffields or fields
    if fields is None:
        raise ValueError("--fields: needed for an FM or LR model")
    model = build(fkind, fields, rows, fk or 1, fhidden, 0.0, batch_norm="mlp.0.bn.weight" in tensors)
    state = {n: t for n, t in model.state_dict().items() if not n.endswith("num_batches_tracked")}
    if set(state) != set(tensors):
        raise ValueError(f"{path}: tensors {sorted(tensors)}, a {fkind} model has {sorted(state)}")
    for name, t in state.items():
        if tuple(t.shape) != tuple(tensors[name].shape):
            raise ValueError(f"{path}: {name} is {list(tensors[name].shape)}, expected {list(t.shape)}")
    model.load_state_dict({n: torch.from_numpy(np.array(a, dtype=np.float32)) for n, a in tensors.items()},
                          strict=False)
    return model.eval()


def predict(model, ids, values, batch=16384):
    """Logits (numpy float64) in eval mode (no dropout)."""
    torch = _torch()
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(ids), batch):
            logits = model(torch.from_numpy(ids[i:i + batch]), torch.from_numpy(values[i:i + batch]))
            out.append(logits.double().numpy())
    return np.concatenate(out) if out else np.zeros(0)


def state_numpy(model):
    return {n: t.detach().cpu().numpy().astype(np.float32) for n, t in model.state_dict().items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    score = sub.add_parser("score", help="test AUC and log loss of a saved model")
    score.add_argument("--model-dir", required=True, help="directory with model.safetensors, or the file")
    score.add_argument("--test", required=True, help="LibSVM test file")
    score.add_argument("--model", choices=KINDS)
    score.add_argument("--fields", type=int)
    score.add_argument("--embedding-size", type=int)
    score.add_argument("--hidden", help="e.g. 256,128,64")
    score.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    torch = _torch()
    if args.threads:
        torch.set_num_threads(args.threads)
    hidden = [int(h) for h in args.hidden.split(",") if h] if args.hidden is not None else None
    try:
        fields = args.fields
        if fields is None:
            probe = read_safetensors(args.model_dir if os.path.isfile(args.model_dir)
                                     else os.path.join(args.model_dir, "model.safetensors"))
            fields = describe(probe)[4]
        ids, values, labels = ctr_data.load_libsvm(args.test, fields)
        model = load_model(args.model_dir, args.model, fields or ids.shape[1], args.embedding_size, hidden)
        if ids.max(initial=0) >= model.rows:
            raise ValueError(f"{args.test}: id {int(ids.max())} is beyond the model's {model.rows} rows")
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"deepfm_torch: {e}")
    logits = predict(model, ids, values)
    print(f"test_auc={ctr_data.auc(labels, logits):.6f} test_logloss={ctr_data.logloss(labels, logits):.6f} "
          f"test_samples={len(labels)} model={model.kind} rows={model.rows} fields={model.fields}"
          + (f" embedding_size={model.k}" if model.kind != "lr" else "")
          + (f" hidden={','.join(map(str, model.hidden))}" if model.kind == "deepfm" else ""))


if __name__ == "__main__":
    main()
