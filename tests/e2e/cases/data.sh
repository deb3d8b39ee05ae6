# shellcheck shell=bash
# Data-set tools: `sdp-train data inspect` on files written here by an independent writer
# (Python: TFRecord framing with masked CRC-32C, a tf.train.Example by hand on the protobuf
# wire format), so the reader is checked against the format, not against itself.

# write_tfrecord PATH LABEL... : one Example per label, an image of 40 bytes each.
write_tfrecord() {
    python3 - "$@" <<'PY'
import struct, sys

def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)

def field(number, payload):  # a length-delimited field
    return varint(number << 3 | 2) + varint(len(payload)) + payload

def feature_entry(key, feature):
    return field(1, field(1, key.encode()) + field(2, feature))

def example(image, label):
    bytes_list = field(1, field(1, image))
    int64_list = field(3, field(1, varint(label)))  # packed
    features = feature_entry("image/encoded", bytes_list) + feature_entry("image/class/label", int64_list)
    return field(1, features)

with open(sys.argv[1], "wb") as f:
    for i, label in enumerate(sys.argv[2:]):
        payload = example(bytes((i * 7 + k) % 256 for k in range(40)), int(label))
        length = struct.pack("<Q", len(payload))
        f.write(length + struct.pack("<I", masked(length)) + payload + struct.pack("<I", masked(payload)))
PY
}

case_data_inspect_tfrecord() {
    mkdir -p "$WORK/shards"
    write_tfrecord "$WORK/shards/train-00000-of-00002" 1 2 3
    write_tfrecord "$WORK/shards/train-00001-of-00002" 3 4
    expect_ok 0 data inspect "$WORK/shards"
    grep -q '^format        tfrecord' "$WORK/out" || fail "format not detected"
    grep -q '^files         2' "$WORK/out" || fail "not 2 files"
    grep -q '^records       5' "$WORK/out" || fail "not 5 records"
    grep -q '^labels        4 distinct, 1 .. 4' "$WORK/out" || fail "labels wrong"
    grep -q '^image bytes   40 .. 40' "$WORK/out" || fail "image sizes wrong"
    grep -q '^first bad     none' "$WORK/out" || fail "a good set reported bad"
}

case_data_inspect_bad_record() {
    write_tfrecord "$WORK/shard" 0 1 2
    # Truncate the last record's payload CRC: the file ends 2 bytes early.
    truncate -s -2 "$WORK/shard"
    expect_error 0 'shard: record 2 \(from 0\) .*truncated' data inspect "$WORK/shard"
    grep -q '^records       2' "$WORK/out" || fail "the good records were not counted"
}

case_data_inspect_missing() {
    expect_error 0 'no-such-dir does not exist' data inspect "$WORK/no-such-dir"
}
