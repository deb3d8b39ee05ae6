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

case_data_inspect_image_folder() {
    # An image folder: each class with the label it trains as, in torchvision's order (class
    # folder names sorted by code point: 'Zebra' before 'cat'), and its image count; a PNG in
    # a nested folder counts, a text file does not.
    convert_synthetic image-folder "$WORK/made" --synthetic-samples 40
    mkdir -p "$WORK/pets/cat" "$WORK/pets/dog/puppies" "$WORK/pets/Zebra"
    cp "$WORK"/made/0/*.jpg "$WORK/pets/cat/"
    cp "$(ls "$WORK"/made/1/*.jpg | head -1)" "$WORK/pets/dog/"
    cp "$(ls "$WORK"/made/1/*.jpg | tail -1)" "$WORK/pets/dog/puppies/p.JPG"
    cp "$(ls "$WORK"/made/2/*.jpg | head -1)" "$WORK/pets/Zebra/z.jpeg"
    echo notes >"$WORK/pets/cat/README.txt"
    cats=$(ls "$WORK"/made/0/*.jpg | wc -l)
    expect_ok 0 data inspect "$WORK/pets"
    grep -q '^format        image-folder' "$WORK/out" || fail "image folder not detected"
    grep -q "^records       $((cats + 3))$" "$WORK/out" || fail "not $((cats + 3)) images"
    grep -q '^class 0       Zebra (1 images)$' "$WORK/out" || fail "class 0 is not Zebra with 1 image"
    grep -q "^class 1       cat ($cats images)$" "$WORK/out" || fail "class 1 is not cat with $cats images"
    grep -q '^class 2       dog (2 images)$' "$WORK/out" || fail "class 2 is not dog with 2 images (one nested)"
    grep -q '^first bad     none' "$WORK/out" || fail "a good folder reported bad"
    expect_error 0 "holds no data file" data inspect "$WORK/pets" --format tfrecord
}

case_data_image_folder_model_names_its_classes() {
    # A model trained from an image folder carries its class names (torchvision's order: code
    # point, so 'Dog' before 'cat'): labels.txt beside model.safetensors and the file's
    # metadata; evaluate --per-class prints each class with its name, samples and accuracy;
    # a later job on unnamed data leaves no stale labels.txt.
    convert_synthetic image-folder "$WORK/train" --synthetic-samples 512
    convert_synthetic image-folder "$WORK/test" --split test --synthetic-samples 128
    for d in train test; do mv "$WORK/$d/3" "$WORK/$d/cat" && mv "$WORK/$d/7" "$WORK/$d/Dog"; done
    local job=(--config "$SRC/configs/quickstart.yaml" --set data.format=image-folder --set data.train="$WORK/train"
               --set data.test="$WORK/test" --set data.image_size=32 --set data.resize=32 --set data.normalize=cifar10
               --set output.model_dir="$WORK/m" --set output.metrics= --set threads=1)
    expect_ok 0 "${job[@]}" --set train.epochs=1 --set checkpoint.dir="$WORK/ck"
    [ "$(tr '\n' ' ' <"$WORK/m/labels.txt")" = "0 1 2 4 5 6 8 9 Dog cat " ] ||
        fail "labels.txt: $(tr '\n' ' ' <"$WORK/m/labels.txt")"
    python3 - "$WORK/m/model.safetensors" <<'PY' || fail "the model's metadata does not name its classes"
import json, struct, sys
f = open(sys.argv[1], "rb")
header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
names = json.loads(header["__metadata__"]["class_names"])
assert names == ["0", "1", "2", "4", "5", "6", "8", "9", "Dog", "cat"], names
PY
    expect_ok 0 evaluate "${job[@]}" --model "$WORK/m/model.safetensors" --per-class
    grep -q '^# per class' "$WORK/out" || fail "no per-class table"
    [ "$(grep -cE '^[0-9]+ +[^ ]+ +[0-9]+ +[0-9.]+$' "$WORK/out")" -eq 10 ] || fail "not 10 class rows"
    grep -qE '^9 +cat +[0-9]+ +[0-9.]+$' "$WORK/out" || fail "label 9 is not cat"
    grep -qE '^8 +Dog +[0-9]+ +[0-9.]+$' "$WORK/out" || fail "label 8 is not Dog"
    local samples
    samples=$(grep -E '^[0-9]+ +[^ ]+ +[0-9]+ +[0-9.]+$' "$WORK/out" | awk '{s += $3} END {print s}')
    [ "$samples" -eq 128 ] || fail "the classes hold $samples test samples, not 128"
    expect_ok 0 --config "$SRC/configs/quickstart.yaml" --set train.max_steps=2 --set output.model_dir="$WORK/m" \
        --set output.metrics= --set threads=1 --set checkpoint.dir="$WORK/ck2"
    [ ! -e "$WORK/m/labels.txt" ] || fail "a stale labels.txt stays beside a model of unnamed data"
}

case_data_inspect_bad_record() {
    write_tfrecord "$WORK/shard" 0 1 2
    # Truncate the last record's payload CRC: the file ends 2 bytes early.
    truncate -s -2 "$WORK/shard"
    expect_error 0 'shard: record 2 \(from 0\) .*truncated' data inspect "$WORK/shard"
    grep -q '^records       2' "$WORK/out" || fail "the good records were not counted"
}

# LibSVM samples (CTR): inspect sums up the text file, convert writes TFRecord shards of label,
# ids, values that inspect reads back the same; a bad line is exit 2 naming file, line, field.
case_data_libsvm_convert_and_inspect() {
    printf '%s\n' '+1 1:1 5:0.5 9:1' '-1 1:1 7:1' '# a comment' '' '0 2:1 5:1 9:2' '1 1:1' >"$WORK/train.libsvm"
    expect_ok 0 data inspect "$WORK/train.libsvm"
    local lines=('^format        libsvm' '^records       4' '^fields        3 ' '^padded rows   2 '
                 '^ids           1 .. 9, 5 distinct' '^labels        2 of 0, 2 of 1 \(50.0% positive\)'
                 '^first bad     none')
    local line
    for line in "${lines[@]}"; do grep -qE "$line" "$WORK/out" || fail "libsvm: no line /$line/"; done
    expect_ok 0 data convert --from libsvm --input "$WORK/train.libsvm" --output "$WORK/ctr" --shards 2
    grep -q "^converted 4 LibSVM samples into 2 tfrecord files under $WORK/ctr (3 fields, 2 rows padded" "$WORK/out" ||
        fail "no summary line from data convert"
    expect_ok 0 data inspect "$WORK/ctr"
    lines[0]='^format        ctr-tfrecord'
    for line in "${lines[@]}"; do grep -qE "$line" "$WORK/out" || fail "ctr-tfrecord: no line /$line/"; done
    printf '1 1:1\n0 2:1 3\n' >"$WORK/bad.libsvm"
    expect_error 0 "bad.libsvm:2: field 1 \(the 2nd pair '3'\): no ':' between id and value" \
        data convert --from libsvm --input "$WORK/bad.libsvm" --output "$WORK/bad"
}

case_data_inspect_missing() {
    expect_error 0 'no-such-dir does not exist' data inspect "$WORK/no-such-dir"
}

# convert_synthetic FORMAT DIR [ARGS...]: the synthetic set (colour, 32 x 32, 10 classes) as
# JPEGs in FORMAT under DIR; no data set needed, so these cases run everywhere.
convert_synthetic() {
    local format=$1 dir=$2; shift 2
    expect_ok 0 data convert --from synthetic --format "$format" --output "$dir" "$@"
    grep -q "^converted " "$WORK/out" || fail "no summary line from data convert"
}

# bench data times the job's loader alone, one row per worker count; a CPU-decoding job has no
# GPU decoder's line; a bad worker count names the option (exit 2).
case_data_bench_rows_per_worker_count() {
    convert_synthetic image-folder "$WORK/train" --synthetic-samples 512
    expect_ok 0 bench data --config "$SRC/configs/quickstart.yaml" --set data.format=image-folder \
      --set data.train="$WORK/train" --set data.test="$WORK/train" --set data.image_size=24 --set data.resize=32 \
      --set data.batch_size=32 --set data.decode=cpu --workers 1,2 --batches 4
    grep -q "^# bench data: image-folder $WORK/train, batch 32" "$WORK/out" || fail "no header line"
    [ "$(grep -cE '^image-folder +[12] +128 ' "$WORK/out")" -eq 2 ] || fail "expected a row of 128 images per worker count"
    grep -q "^# nvJPEG" "$WORK/out" && fail "a CPU-decoding row has a GPU decoder's line"
    expect_error 0 "workers takes counts >= 1" bench data --config "$SRC/configs/quickstart.yaml" \
      --set data.format=image-folder --set data.train="$WORK/train" --set data.test="$WORK/train" --workers 0
}

# Training from TFRecord shards resumes bit for bit: the crops and flips are drawn from
# (seed, epoch, sample), whichever worker decodes them (2 ranks x 2 workers, 40 steps over
# two epochs, interrupted at step 15).
case_data_train_tfrecord_resume_bitwise() {
    convert_synthetic tfrecord "$WORK/tf" --synthetic-samples 2048 --shards 3
    expect_ok 0 data inspect "$WORK/tf"
    grep -q '^records       2048' "$WORK/out" || fail "the converted set does not hold 2048 records"
    resume_bitwise 2 --set data.format=tfrecord --set data.train="$WORK/tf" --set data.test="$WORK/tf" \
        --set data.image_size=24 --set data.resize=32 --set data.workers=2
}

# An image folder trains like the in-memory set it came from: the synthetic classes are easy,
# so three epochs reach a high test accuracy through JPEG, decoding and the workers.
case_data_train_image_folder_learns() {
    convert_synthetic image-folder "$WORK/train" --synthetic-samples 2048
    convert_synthetic image-folder "$WORK/test" --split test --synthetic-samples 512
    [ "$(ls "$WORK/train" | tr '\n' ' ')" = "0 1 2 3 4 5 6 7 8 9 " ] || fail "class folders: $(ls "$WORK/train")"
    expect_ok 2 --config "$SRC/configs/quickstart.yaml" --set data.format=image-folder \
        --set data.train="$WORK/train" --set data.test="$WORK/test" --set data.image_size=32 --set data.resize=32 \
        --set data.normalize=cifar10 --set data.augment=flip --set checkpoint.dir="$WORK/ck" \
        --set output.model_dir="$WORK/m" --set output.metrics= --set threads=1
    grep -q 'data         : image-folder' "$WORK/out" || fail "the plan does not name the format"
    local acc
    acc=$(grep -oE '^\[done\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$')
    [ -n "$acc" ] || fail "no final test accuracy"
    python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.9 else 1)" || fail "test accuracy $acc < 0.9"
}

# A file in the folder that is not an image ends the job on every rank with exit 2, naming it
# (training meets it, or evaluation, which reads every sample of the same folder).
case_data_train_bad_image() {
    convert_synthetic image-folder "$WORK/train" --synthetic-samples 256
    echo "not a jpeg" >"$WORK/train/3/zz_broken.jpg"
    expect_error 2 'zz_broken.jpg' --config "$SRC/configs/quickstart.yaml" --set data.format=image-folder \
        --set data.train="$WORK/train" --set data.test="$WORK/train" --set data.image_size=32 --set data.resize=32 \
        --set data.batch_size=64 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m" \
        --set output.metrics= --set threads=1
}

# data.on_bad_record: skip trains through the same broken file: a warning names it, the batch is
# filled from its good samples, and each rank that met it counts it at the end.
case_data_train_skip_bad_image() {
    convert_synthetic image-folder "$WORK/train" --synthetic-samples 256
    echo "not a jpeg" >"$WORK/train/3/zz_broken.jpg"
    expect_ok 2 --config "$SRC/configs/quickstart.yaml" --set data.format=image-folder --set data.on_bad_record=skip \
        --set data.train="$WORK/train" --set data.test="$WORK/train" --set data.image_size=32 --set data.resize=32 \
        --set data.batch_size=64 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m" \
        --set output.metrics= --set threads=1
    grep -q 'zz_broken.jpg.*skipped (data.on_bad_record: skip)' "$WORK/out" || fail "no warning naming the file"
    grep -qE 'bad training sample\(s\) were skipped on this rank' "$WORK/out" || fail "no count at the end"
    grep -q '^\[done\]' "$WORK/out" || fail "the run did not finish"
}

# WebDataset tar shards are streamed: 3 shards over 2 ranks (each rank reads whole shards,
# uneven, pass after pass, through the shuffle buffer), and a resumed job reads, shuffles and
# augments exactly as the uninterrupted one.
case_data_train_tar_shards_resume_bitwise() {
    convert_synthetic tar-shards "$WORK/tar" --synthetic-samples 2048 --shards 3
    expect_ok 0 data inspect "$WORK/tar"
    grep -q '^records       2048' "$WORK/out" || fail "the converted set does not hold 2048 records"
    resume_bitwise 2 --set data.format=tar-shards --set data.train="$WORK/tar" --set data.test="$WORK/tar" \
        --set data.image_size=24 --set data.resize=32 --set data.workers=2 --set data.shuffle_buffer=256
}

# Streamed tar shards train as well as the image folder does (same recipe, same bar), with the
# test split streamed too (every sample once over the ranks).
case_data_train_tar_shards_learns() {
    convert_synthetic tar-shards "$WORK/train" --synthetic-samples 2048 --shards 4
    convert_synthetic tar-shards "$WORK/test" --split test --synthetic-samples 512 --shards 2
    expect_ok 2 --config "$SRC/configs/quickstart.yaml" --set data.format=tar-shards \
        --set data.train="$WORK/train" --set data.test="$WORK/test" --set data.image_size=32 --set data.resize=32 \
        --set data.normalize=cifar10 --set data.augment=flip --set checkpoint.dir="$WORK/ck" \
        --set output.model_dir="$WORK/m" --set output.metrics= --set threads=1
    grep -q "training data tar-shards:$WORK/train: 2048 samples in 4 shard(s), streamed" "$WORK/out" ||
        fail "the log does not say the set is streamed"
    local acc
    acc=$(grep -oE '^\[done\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$')
    [ -n "$acc" ] || fail "no final test accuracy"
    python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.9 else 1)" || fail "test accuracy $acc < 0.9"
}

# Gzip-compressed TFRecords have no offsets to read by: they are streamed, and train.
case_data_train_gzip_tfrecord() {
    convert_synthetic tfrecord "$WORK/tf" --synthetic-samples 512 --shards 2
    rm -f "$WORK"/tf/*.idx
    gzip "$WORK"/tf/*
    expect_ok 2 --config "$SRC/configs/quickstart.yaml" --set data.format=tfrecord \
        --set data.train="$WORK/tf" --set data.test="$WORK/tf" --set data.image_size=24 --set data.resize=32 \
        --set train.epochs=1 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m" \
        --set output.metrics= --set threads=1
    grep -q "training data tfrecord:$WORK/tf: 512 samples in 2 shard(s), streamed" "$WORK/out" ||
        fail "the gzip set was not streamed"
    grep -q '^\[done\]' "$WORK/out" || fail "the run did not finish"
}

# A shard cut short ends the job at start-up on every rank with exit 2, naming the file.
case_data_train_truncated_tar_shard() {
    convert_synthetic tar-shards "$WORK/tar" --synthetic-samples 256 --shards 2
    local shard
    shard=$(ls "$WORK"/tar/*.tar | head -1)
    truncate -s 10000 "$shard"
    expect_error 2 "$(basename "$shard").*truncated" --config "$SRC/configs/quickstart.yaml" \
        --set data.format=tar-shards --set data.train="$WORK/tar" --set data.test="$WORK/tar" \
        --set data.image_size=24 --set data.resize=32 --set checkpoint.dir="$WORK/ck" \
        --set output.model_dir="$WORK/m" --set output.metrics= --set threads=1
}

# data.shard: auto on a SageMaker channel distributed ShardedByS3Key: each host reads the set it
# sees (two simulated hosts, one rank each, with 1024 and 640 samples at the same channel name),
# and both run the smaller set's steps. Under data.shard: rank the same job stops with exit 2:
# the ranks disagree on the steps per epoch.
case_data_shard_host_sharded_channel() {
    convert_synthetic tar-shards "$WORK/h0/train" --synthetic-samples 1024 --shards 2
    convert_synthetic tar-shards "$WORK/h1/train" --synthetic-samples 640 --shards 2
    convert_synthetic tar-shards "$WORK/test" --split test --synthetic-samples 256
    SM_INPUT_DATA_CONFIG='{"train": {"TrainingInputMode": "File", "S3DistributionType": "ShardedByS3Key"}}' \
    expect_ok 2 --config "$SRC/configs/quickstart.yaml" --set data.format=tar-shards \
        --set 'data.train='"$WORK"'/h${OMPI_COMM_WORLD_RANK}/train' --set data.test="$WORK/test" \
        --set data.image_size=24 --set data.resize=32 --set distributed.ranks_per_node=1 --set train.epochs=2 \
        --set data.batch_size=64 --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m" \
        --set output.metrics= --set threads=1
    grep -q 'data.shard host: each host reads its own set; steps per epoch 10 (the smallest' "$WORK/out" ||
        fail "the hosts did not agree on the smaller set's 10 steps"
    grep -qE '^\[done\] steps=20 ' "$WORK/out" || fail "not 2 x 10 steps"
}

# feed_pipe CHANNEL FILE... : SageMaker's Pipe mode, as a channel's reader sees it
# (scripts/sagemaker-pipe-feed.sh, in the background); stop_pipes ends it.
PIPE_FEEDERS=() PIPE_CHANNELS=()
feed_pipe() {
    bash "$SRC/scripts/sagemaker-pipe-feed.sh" --passes 6 "$@" &
    PIPE_FEEDERS+=($!)
    PIPE_CHANNELS+=("$1")
}
# Ends the feeders and removes their FIFOs: a FIFO left from one run would be opened by the
# next run's reader before its new feeder replaces it (rm + mkfifo), and that reader would wait
# on the old one for ever (it did, now and then, on a loaded machine).
stop_pipes() {
    local pid channel
    for pid in "${PIPE_FEEDERS[@]}"; do pkill -P "$pid" 2>/dev/null; kill "$pid" 2>/dev/null; done
    for pid in "${PIPE_FEEDERS[@]}"; do wait "$pid" 2>/dev/null; done
    for channel in "${PIPE_CHANNELS[@]}"; do rm -f "$channel"_[0-9]*; done
    PIPE_FEEDERS=() PIPE_CHANNELS=()
}

# A training channel in Pipe mode (SM_INPUT_DATA_CONFIG) on two simulated hosts of two ranks:
# on each host local rank 0 reads the FIFOs and deals the records to both ranks; FullyReplicated,
# so each host keeps every other record. Two epochs run through two FIFOs each, and learn.
case_data_pipe_mode_trains() {
    convert_synthetic tfrecord "$WORK/tf" --synthetic-samples 1024 --shards 2
    convert_synthetic tfrecord "$WORK/test" --split test --synthetic-samples 256
    mkdir -p "$WORK/h0" "$WORK/h1"
    feed_pipe "$WORK/h0/train" "$WORK"/tf/train-0000[01]-of-00002
    feed_pipe "$WORK/h1/train" "$WORK"/tf/train-0000[01]-of-00002
    # Each simulated host sees its own /opt/ml/input/data: ranks 0, 1 host 0's, ranks 2, 3 host 1's.
    local r
    for r in 0 1 2 3; do ln -s "$WORK/h$((r / 2))" "$WORK/r$r"; done
    SM_INPUT_DATA_CONFIG='{"train": {"TrainingInputMode": "Pipe", "S3DistributionType": "FullyReplicated"}}' \
    run 4 --config "$SRC/configs/quickstart.yaml" --set data.format=tfrecord \
        --set 'data.train='"$WORK"'/r${OMPI_COMM_WORLD_RANK}/train' --set data.test="$WORK/test" \
        --set data.samples_per_epoch=1024 --set data.image_size=24 --set data.resize=32 \
        --set distributed.ranks_per_node=2 --set train.epochs=2 --set data.batch_size=32 \
        --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m" --set output.metrics= --set threads=1
    stop_pipes
    [ $STATUS -eq 0 ] || fail "exit status $STATUS, expected 0"
    grep -q "training data tfrecord pipe:$WORK/r0/train: 1024 samples per epoch" "$WORK/out" ||
        fail "the log does not say the channel is read as a pipe"
    grep -qE '^\[done\] steps=16 ' "$WORK/out" || fail "not 2 epochs of 1024 / (4 x 32) steps"
    local acc
    acc=$(grep -oE '^\[done\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$')
    python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.5 else 1)" || fail "test accuracy $acc < 0.5"
}

# Tar shards in Pipe mode (WebDataset over S3, streamed): the channel's archives arrive back to
# back in each FIFO; 2 ranks on one host, one reader; two epochs, and they learn. Then the test
# channel through a pipe as well. An image folder cannot come through a pipe (its folders are
# its labels): exit 2 saying what to use.
case_data_pipe_mode_tar_shards_trains() {
    convert_synthetic tar-shards "$WORK/tar" --synthetic-samples 512 --shards 3
    convert_synthetic tar-shards "$WORK/test" --split test --synthetic-samples 256
    # tar_pipe_run TEST INPUTDATACONFIG: 2 epochs from the tar shards through a pipe, tested on TEST.
    tar_pipe_run() {
        rm -rf "$WORK/ck" "$WORK/m"
        SM_INPUT_DATA_CONFIG=$2 run 2 --config "$SRC/configs/quickstart.yaml" --set data.format=tar-shards \
            --set data.train="$WORK/train" --set data.test="$1" \
            --set data.samples_per_epoch=512 --set data.image_size=24 --set data.resize=32 \
            --set train.epochs=2 --set data.batch_size=32 \
            --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m" --set output.metrics= --set threads=1
        stop_pipes
        [ $STATUS -eq 0 ] || fail "test set $1: exit status $STATUS, expected 0"
        grep -qE '^\[done\] steps=16 ' "$WORK/out" || fail "not 2 epochs of 512 / (2 x 32) steps"
    }
    feed_pipe "$WORK/train" "$WORK/tar"
    tar_pipe_run "$WORK/test" '{"train": {"TrainingInputMode": "Pipe"}}'
    grep -q "training data tar-shards pipe:$WORK/train: 512 samples per epoch" "$WORK/out" ||
        fail "the log does not say the tar shards are read as a pipe"
    local acc
    acc=$(grep -oE '^\[done\].*test_accuracy=[0-9.]+' "$WORK/out" | grep -oE '[0-9.]+$')
    python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.5 else 1)" || fail "test accuracy $acc < 0.5"
    # The test channel in Pipe mode too: each evaluation (after epochs 1 and 2) reads the next
    # FIFO, the ranks evaluate what the host's reader deals them, and the results are the
    # File-mode evaluations', to the digits printed.
    local from_files from_pipe
    from_files=$(grep -E '^\[epoch [12]\]' "$WORK/out" | grep -oE 'test_loss=[0-9.e+-]+ test_accuracy=[0-9.]+')
    feed_pipe "$WORK/train" "$WORK/tar"
    feed_pipe "$WORK/testpipe" "$WORK/test"
    tar_pipe_run "$WORK/testpipe" '{"train": {"TrainingInputMode": "Pipe"}, "testpipe": {"TrainingInputMode": "Pipe"}}'
    grep -q "test data tar-shards pipe:$WORK/testpipe: each evaluation reads the next FIFO" "$WORK/out" ||
        fail "the log does not say the test channel is read as a pipe"
    from_pipe=$(grep -E '^\[epoch [12]\]' "$WORK/out" | grep -oE 'test_loss=[0-9.e+-]+ test_accuracy=[0-9.]+')
    [ -n "$from_files" ] && [ "$from_pipe" = "$from_files" ] ||
        fail "evaluations through a pipe gave '$from_pipe', from files '$from_files'"
    SM_INPUT_DATA_CONFIG='{"train": {"TrainingInputMode": "Pipe"}}' \
    expect_error 2 "key 'data.format': image-folder: a channel in Pipe mode .* use tfrecord or tar-shards" \
        --config "$SRC/configs/quickstart.yaml" --set data.format=image-folder --set data.train="$WORK/train" \
        --set data.test="$WORK/test" --set data.samples_per_epoch=512 --set checkpoint.dir="$WORK/ck" \
        --set output.model_dir="$WORK/m" --set output.metrics= --set threads=1
}

# A FIFO whose stream ends inside a record: exit 2 on every rank, naming the FIFO and the record.
case_data_pipe_closes_early() {
    convert_synthetic tfrecord "$WORK/tf" --synthetic-samples 256
    head -c 30000 "$WORK"/tf/train-00000-of-00001 >"$WORK/cut"
    feed_pipe "$WORK/train" "$WORK/cut"
    SM_INPUT_DATA_CONFIG='{"train": {"TrainingInputMode": "Pipe"}}' \
    run 2 --config "$SRC/configs/quickstart.yaml" --set data.format=tfrecord --set data.train="$WORK/train" \
        --set data.test="$WORK/tf" --set data.samples_per_epoch=256 --set data.image_size=24 --set data.resize=32 \
        --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m" --set output.metrics= --set threads=1
    stop_pipes
    [ $STATUS -eq 2 ] || fail "exit status $STATUS, expected 2"
    grep '^sdp-train: error:' "$WORK/out" | grep -qE "train_0: record [0-9]+ \(from 0\) at byte offset [0-9]+: truncated" ||
        fail "the error does not name the FIFO and the record"
}

# Pipe mode without data.samples_per_epoch: exit 2 naming the key, before any FIFO is read.
case_data_pipe_needs_samples_per_epoch() {
    convert_synthetic tfrecord "$WORK/tf" --synthetic-samples 256
    SM_INPUT_DATA_CONFIG='{"train": {"TrainingInputMode": "Pipe"}}' \
    expect_error 2 "key 'data.samples_per_epoch'.*Pipe mode" --config "$SRC/configs/quickstart.yaml" \
        --set data.format=tfrecord --set data.train="$WORK/train" --set data.test="$WORK/tf" \
        --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m" --set output.metrics= --set threads=1
}

# data.decode: the plan says where JPEGs are decoded and why; gpu on a rank that computes on
# the CPU, or for a format without JPEGs, is exit 2 naming the key, on every rank.
case_data_decode_choice() {
    convert_synthetic image-folder "$WORK/train" --synthetic-samples 256
    local job=(--config "$SRC/configs/quickstart.yaml" --set data.format=image-folder --set data.train="$WORK/train"
               --set data.test="$WORK/train" --set data.image_size=32 --set data.resize=32)
    expect_ok 0 validate "${job[@]}"
    grep -qE '^  decode       : cpu \(auto\): libjpeg-turbo on the loader.s workers \(this rank computes on the CPU\)$' "$WORK/out" ||
      fail "the plan has no decode line saying why auto decodes on the CPU"
    grep -q '^  batches      : f32 (auto): NCHW' "$WORK/out" || fail "the plan has no batches line"
    expect_ok 0 validate "${job[@]}" --set data.decode=cpu
    grep -q '^  decode       : cpu: libjpeg-turbo' "$WORK/out" || fail "no decode line for cpu"
    expect_error 2 "key 'data.batch_type': unknown value 'f16'" validate "${job[@]}" --set data.batch_type=f16
    expect_error 2 "key 'data.decode': gpu (decodes on the rank's GPU, but this rank computes on the CPU|needs nvJPEG, but)" \
      "${job[@]}" --set data.decode=gpu --set device=cpu --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    expect_error 2 "data.decode.*gpu decodes the JPEGs of tfrecord, tar-shards and image-folder; data.format synthetic has none" \
      validate --config "$SRC/configs/quickstart.yaml" --set data.decode=gpu
    # data.normalize_on: gpu needs the GPU decoder: with data.decode: cpu the spec is refused, and
    # a rank that decodes on the CPU (it computes there) says so when it loads the data.
    expect_error 2 "key 'data.normalize_on': gpu normalises in the GPU decoder's kernel, but data.decode is cpu" \
      validate "${job[@]}" --set data.decode=cpu --set data.normalize_on=gpu
    expect_error 2 "key 'data.normalize_on': gpu normalises in the GPU decoder's kernel, but this rank decodes on the CPU \(it computes on the CPU\)" \
      "${job[@]}" --set data.normalize_on=gpu --set device=cpu --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    expect_error 2 "key 'data.normalize_on': unknown value 'host'" validate "${job[@]}" --set data.normalize_on=host
    # data.decode_roi: on decodes regions with nvJPEG: refused with data.decode: cpu, and on a rank
    # that decodes on the CPU.
    expect_error 2 "key 'data.decode_roi': on decodes regions with nvJPEG on the GPU, but data.decode is cpu" \
      validate "${job[@]}" --set data.decode=cpu --set data.decode_roi=on
    expect_error 2 "key 'data.decode_roi': on decodes regions with nvJPEG, but this rank decodes on the CPU \(it computes on the CPU\)" \
      "${job[@]}" --set data.decode_roi=on --set device=cpu --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    expect_error 2 "key 'data.decode_roi': unknown value 'yes'" validate "${job[@]}" --set data.decode_roi=yes
    # data.nvjpeg_backend picks nvJPEG's backend: refused with data.decode: cpu, and on a rank that
    # decodes on the CPU; the plan's decode line names the choice.
    expect_error 2 "key 'data.nvjpeg_backend': gpu_hybrid picks nvJPEG's backend on the GPU, but data.decode is cpu" \
      validate "${job[@]}" --set data.decode=cpu --set data.nvjpeg_backend=gpu_hybrid
    expect_error 2 "key 'data.nvjpeg_backend': hardware picks nvJPEG's backend, but this rank decodes on the CPU \(it computes on the CPU\)" \
      "${job[@]}" --set data.nvjpeg_backend=hardware --set device=cpu --set checkpoint.dir="$WORK/ck" --set output.model_dir="$WORK/m"
    expect_error 2 "key 'data.nvjpeg_backend': unknown value 'cuda'" validate "${job[@]}" --set data.nvjpeg_backend=cuda
}
