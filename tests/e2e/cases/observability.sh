# shellcheck shell=bash
# What a person watches: the progress bar, the timeline, the plots.
# Sourced by cli_test.sh, which runs one case: the function case_<name>, whose name is also the
# CTest case (tests/e2e/CMakeLists.txt reads the names from here).

case_progress_bar_tty() {
    # On a terminal rank 0 draws a live bar (\r, erased before each line): one rank directly,
    # and two under mpirun (whose ranks always get a pseudo-terminal, even when mpirun's own
    # output is a file: the bar follows mpirun's). The metric lines stay whole.
    quick=(--config "$SRC/configs/quickstart.yaml" --set threads=1 --set train.epochs=1 --set output.metrics= --set checkpoint.dir=ck --set output.model_dir=model)
    run_tty 0 "${quick[@]}"
    [ $STATUS -eq 0 ] || fail "exit status $STATUS"
    check_tty_lines 2
    [ "$(tr '\r' '\n' <"$WORK/out" | sed 's/\x1b\[K//g' | grep -c '^\[step [0-9]*\] ')" -eq 4 ] || fail "expected 4 [step] lines (128 steps, log_every 32)"
    run_tty 2 "${quick[@]}"
    [ $STATUS -eq 0 ] || fail "exit status $STATUS under mpirun"
    check_tty_lines 2
    # output.progress: lines turns the bar off on a terminal.
    run_tty 0 "${quick[@]}" --set output.progress=lines
    [ $STATUS -eq 0 ] || fail "exit status $STATUS with output.progress=lines"
    grep -q 'ETA' "$WORK/out" && fail "a bar was drawn with output.progress: lines"
    check_tty_lines 0
}

case_progress_lines_not_tty() {
    # Output to a file (a log, CloudWatch): the plain metric lines, not one \r, also under
    # mpirun; output.progress: bar forces the bar anyway.
    quick=(--config "$SRC/configs/quickstart.yaml" --set threads=1 --set train.epochs=1 --set output.metrics= --set checkpoint.dir=ck --set output.model_dir=model)
    expect_ok 0 "${quick[@]}"
    grep -q $'\r' "$WORK/out" && fail "a carriage return in the output of a run without a terminal"
    grep -qE '^\[done\] steps=128 ' "$WORK/out" || fail "no [done] line"
    expect_ok 2 "${quick[@]}"
    grep -q $'\r' "$WORK/out" && fail "a carriage return in the output of mpirun without a terminal"
    grep -qE '^\[done\] steps=64 ' "$WORK/out" || fail "no [done] line under mpirun"
    expect_ok 0 "${quick[@]}" --set output.progress=bar
    grep -q $'\repoch 1/1 \[' "$WORK/out" || fail "output.progress: bar drew no bar"
}

case_timeline_np2() {
    # output.timeline from the command line: both ranks' files and the merged one, which
    # names both ranks and every phase; the run says where it is.
    expect_ok 2 --config "$SRC/configs/quickstart.yaml" --set threads=1 --set train.max_steps=5 --set output.metrics= --set checkpoint.dir=ck --set output.model_dir=model --set output.timeline=tl/trace.json --set distributed.bucket_mb=0.25
    grep -q 'info: timeline: tl/trace.json' "$WORK/out" || fail "the run did not say where the timeline is"
    python3 - "$WORK/run$RUNS/tl" <<'PY' || fail "timeline files not as expected"
import json, sys, collections
d = sys.argv[1]
merged = json.load(open(f"{d}/trace.json"))
for r in (0, 1):
    own = json.load(open(f"{d}/trace.rank{r}.json"))
    assert {e["pid"] for e in own["traceEvents"]} == {r}, r
ev = [e for e in merged["traceEvents"] if e["ph"] == "X"]
assert {e["pid"] for e in ev} == {0, 1}
names = {e["name"] for e in ev}
want = {"step", "data_wait", "forward", "backward", "gradient_wait", "optimizer", "allreduce", "evaluation", "checkpoint"}
assert want <= names, want - names
per_step = collections.Counter()
for e in ev:
    if e["name"] == "allreduce":
        per_step[(e["pid"], e["args"]["step"])] += e["args"]["bytes"]
assert len(per_step) == 10 and set(per_step.values()) == {merged["otherData"]["gradient_bytes"]}, per_step
PY
}

case_plot_metrics_png() {
    # scripts/plot_metrics.py turns a real metrics.jsonl into a PNG; a malformed line is
    # refused with exit 2, naming the file and line, and no PNG.
    need_matplotlib
    expect_ok 0 "${SHORT_TRAIN[@]}"
    "$PLOT_PY" "$SRC/scripts/plot_metrics.py" "$WORK/m.jsonl" -o "$WORK/m.png" >"$WORK/plot.out" 2>&1 || fail "plot_metrics.py failed: $(cat "$WORK/plot.out")"
    is_png "$WORK/m.png"
    cat "$WORK/plot.out"
    { head -3 "$WORK/m.jsonl"; echo '{"event": "train", "step": 9, "lr": "fast"}'; } >"$WORK/bad.jsonl"
    "$PLOT_PY" "$SRC/scripts/plot_metrics.py" "$WORK/bad.jsonl" -o "$WORK/bad.png" >"$WORK/plot.out" 2>&1
    [ $? -eq 2 ] || fail "malformed metrics.jsonl: exit status not 2: $(cat "$WORK/plot.out")"
    grep -qF "$WORK/bad.jsonl:4: \"lr\" is not a number" "$WORK/plot.out" || fail "no file:line error: $(cat "$WORK/plot.out")"
    [ ! -e "$WORK/bad.png" ] || fail "a PNG was written for malformed input"
}

case_plot_simcluster_png() {
    # scripts/plot_simcluster.py draws the measured simulated-cluster tables of
    # docs/records/benchmarks-history.md (one panel per topology and size); input without such
    # rows: exit 2.
    need_matplotlib
    "$PLOT_PY" "$SRC/scripts/plot_simcluster.py" "$SRC/docs/records/benchmarks-history.md" -o "$WORK/sim.png" >"$WORK/out" 2>&1 ||
      fail "plot_simcluster.py failed"
    grep -qE 'plot_simcluster: [0-9]+ rows, [0-9]+ panels' "$WORK/out" || fail "no summary line"
    is_png "$WORK/sim.png"
    echo "no table here" >"$WORK/none.md"
    "$PLOT_PY" "$SRC/scripts/plot_simcluster.py" "$WORK/none.md" -o "$WORK/none.png" >"$WORK/out" 2>&1
    [ $? -eq 2 ] || fail "a file without rows did not exit 2"
    grep -q 'no simulated-cluster rows' "$WORK/out" || fail "no message for a file without rows"
}

case_plot_bench_png() {
    # `sdp-train bench allreduce` on 2 ranks (small sizes, < 1 s) piped into
    # scripts/plot_bench.py gives a PNG with every algorithm; a malformed row is refused with
    # exit 2, naming the line.
    need_matplotlib
    mkdir -p "$WORK/bench"
    (cd "$WORK/bench" && timeout $HANG_LIMIT mpirun -np 2 --oversubscribe "$BIN" bench allreduce \
       --min-bytes 4096 --max-bytes 262144 --factor 4 --iters 5 --warmup 1 2>"$WORK/bench.err") |
      tee "$WORK/out" | "$PLOT_PY" "$SRC/scripts/plot_bench.py" -o "$WORK/b.png" >"$WORK/plot.out" 2>&1
    status=("${PIPESTATUS[@]}")
    [ "${status[0]}" -eq 0 ] || fail "bench allreduce exit ${status[0]}: $(cat "$WORK/bench.err")"
    [ "${status[2]}" -eq 0 ] || fail "plot_bench.py exit ${status[2]}: $(cat "$WORK/plot.out")"
    grep -qE '^ +4096 +1024 +ring ' "$WORK/out" || fail "no 4096-byte ring row in the bench table"
    grep -qF '(mpi, flat, ring, hierarchical, auto; 4 sizes)' "$WORK/plot.out" || fail "not every algorithm and size drawn: $(cat "$WORK/plot.out")"
    is_png "$WORK/b.png"
    cat "$WORK/plot.out"
    bad=$(($(wc -l <"$WORK/out") + 1))
    { cat "$WORK/out"; echo '          8192          2048 ring               fast        1.00        1.00'; } |
      "$PLOT_PY" "$SRC/scripts/plot_bench.py" -o "$WORK/bad.png" >"$WORK/plot.out" 2>&1
    [ "${PIPESTATUS[1]}" -eq 2 ] || fail "malformed table: exit status not 2: $(cat "$WORK/plot.out")"
    grep -qF "<stdin>:$bad: expected 'size(B) count(elems) algorithm" "$WORK/plot.out" || fail "no line-numbered error: $(cat "$WORK/plot.out")"
    [ ! -e "$WORK/bad.png" ] || fail "a PNG was written for malformed input"
}

# need_tensorboard: sets TB_PY to a Python that imports the tensorboard package (python3, else
# /usr/bin/python3), or exits 77 (skipped) saying how to get it.
need_tensorboard() {
  for TB_PY in python3 /usr/bin/python3; do
    "$TB_PY" -c 'import tensorboard' 2>/dev/null && return 0
  done
  echo "SKIP [$CASE]: the tensorboard Python package is not importable by python3 or /usr/bin/python3 (scripts/install-deps.sh installs it with pip)"
  exit 77
}
# tensorboard_scalars DIR: every scalar of the event files in DIR as "tag step value" lines, read
# by the tensorboard package's own reader (EventAccumulator; CRCs checked, every record kept).
tensorboard_scalars() {
  "$TB_PY" - "$1" <<'PY' 2>"$WORK/tb.err" || { cat "$WORK/tb.err"; fail "TensorBoard could not read $1"; }
import sys
from tensorboard.backend.event_processing import event_accumulator as ea
acc = ea.EventAccumulator(sys.argv[1], size_guidance={ea.SCALARS: 0})
acc.Reload()
for tag in acc.Tags()["scalars"]:
    for s in acc.Scalars(tag):
        print(tag, s.step, repr(s.value))
PY
}

case_tensorboard_matches_metrics() {
    # output.tensorboard on 2 ranks: TensorBoard's own reader finds every charted value of
    # metrics.jsonl at its step (as float32), and nothing else; rank 0 alone writes.
    need_tensorboard
    expect_ok 2 "${SHORT_TRAIN[@]}" --set output.tensorboard="$WORK/tb"
    grep -q "tensorboard $WORK/tb" "$WORK/out" || fail "the plan does not name the TensorBoard directory"
    [ "$(ls "$WORK/tb" | wc -l)" -eq 1 ] || fail "expected one event file: $(ls "$WORK/tb")"
    ls "$WORK/tb" | grep -qE "^events\.out\.tfevents\.[0-9]{10}\.$(hostname)$" || fail "not TensorFlow's file name: $(ls "$WORK/tb")"
    tensorboard_scalars "$WORK/tb" >"$WORK/scalars.txt"
    python3 - "$WORK/m.jsonl" "$WORK/scalars.txt" <<'PY' || fail "TensorBoard's scalars differ from metrics.jsonl"
import json, struct, sys
tags = {("train", "train_loss"): "train/loss", ("train", "lr"): "train/lr",
        ("train", "images_per_sec"): "train/images_per_sec", ("train", "data_wait_ms"): "train/data_wait_ms",
        ("train", "exposed_comm_ms"): "train/exposed_comm_ms",
        ("eval", "test_loss"): "test/loss", ("eval", "test_accuracy"): "test/accuracy"}
f32 = lambda v: struct.unpack("f", struct.pack("f", v))[0]
want = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    for (event, key), tag in tags.items():
        if r["event"] == event and key in r:
            want[(tag, int(r["step"]))] = f32(r[key])
got = {}
for line in open(sys.argv[2]):
    tag, step, value = line.split()
    assert (tag, int(step)) not in got, f"{tag} twice at step {step}"
    got[(tag, int(step))] = float(value)
assert got == want, (sorted(set(got.items()) ^ set(want.items())))[:10]
assert {t for t, _ in got} == set(tags.values()), {t for t, _ in got}
print(f"{len(got)} scalars, every one equal to metrics.jsonl's ({len({s for _, s in got})} steps)")
PY
}

case_tensorboard_survives_a_crash() {
    # kill -9 of a job that stopped at step 20: what it wrote is in the event file, whole.
    need_tensorboard
    (cd "$WORK" && SDP_TEST_STALL_RANK=0 SDP_TEST_STALL_STEP=20 exec "$BIN" "${SHORT_TRAIN[@]}" --set train.log_every=1 \
       --set output.tensorboard="$WORK/tb") >"$WORK/out" 2>&1 &
    pid=$!
    for i in $(seq 300); do grep -q 'stops taking part' "$WORK/out" && break; sleep 0.1; done
    grep -q 'stops taking part' "$WORK/out" || { kill -KILL $pid; fail "the stall hook did not trigger"; }
    kill -KILL $pid; wait $pid
    tensorboard_scalars "$WORK/tb" >"$WORK/scalars.txt"
    [ "$(grep -c '^train/loss ' "$WORK/scalars.txt")" -eq 20 ] || fail "expected the 20 steps' losses: $(grep -c '^train/loss ' "$WORK/scalars.txt")"
    grep -q '^train/loss 20 ' "$WORK/scalars.txt" || fail "step 20's loss is missing"
}

case_bench_layers() {
    # `sdp-train bench layers`: the job's step layer by layer. A ResNet (blocks timed through
    # their parts) on synthetic CIFAR-sized images: every convolution and BatchNorm has a row
    # with a forward and a backward time, the shares add up to 100 %, and the totals per kind
    # count the layers; on 2 ranks the table is printed once; bad options are exit 2.
    local resnet=(--config "$SRC/configs/quickstart.yaml" --set threads=1 --set model.name=resnet20
                  --set data.synthetic.channels=3 --set data.synthetic.height=32 --set data.synthetic.width=32
                  --set data.batch_size=8 --set optimizer.name=lamb)
    expect_ok 0 bench layers "${resnet[@]}" --steps 3 --warmup 1
    python3 - "$WORK/out" <<'PY' || fail "bench layers table not as expected"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
head = next(l for l in lines if l.startswith("# bench layers:"))
assert "resnet20 on cpu, fp32, batch 8, 1 thread(s), optimizer lamb; medians of 3 steps after 1 warm-up" in head, head
step = next(l for l in lines if l.startswith("# step "))
assert re.search(r"layers [0-9.]+ ms \+ optimizer [0-9.]+ ms", step), step
at = lines.index(next(l for l in lines if l.startswith("layer ")))
by_kind = lines.index("# by kind")
rows = [l.split() for l in lines[at + 1:by_kind]]
names = [r[0] for r in rows]
assert names[:3] == ["conv1", "bn1", "layer1.0.conv1"], names[:3]
assert "layer1.0" not in names and "layer3.2.grad_sum" in names and names.count("loss") == 1
convs = [r for r in rows if r[1] == "conv"]
assert len(convs) == 19, len(convs)                       # ResNet-20: 1 + 9 x 2 convolutions
for r in convs + [r for r in rows if r[1] == "batchnorm"]:
    forward, backward, total = float(r[2]), float(r[3]), float(r[4])
    assert forward > 0 and backward > 0 and abs(forward + backward - total) < 0.002, r
assert abs(sum(float(r[5].rstrip("%")) for r in rows) - 100) < 1.5
kinds = {r[0]: r for r in (l.split() for l in lines[by_kind + 2:])}
assert kinds["conv"][1] == "19" and kinds["batchnorm"][1] == "19", kinds
# The memory line: the host's peak and what it held then, parts adding up to it.
memory = next(l for l in lines if l.startswith("# memory: memory plan shared"))
peak = float(re.search(r"host peak ([0-9.]+) MB allocated by sdp-train \(", memory).group(1))
parts = dict((name, float(mb)) for name, mb in re.findall(r"(arena|parameters|optimizer|layers' own and the rest) ([0-9.]+) MB", memory.split("host peak")[1]))
assert {"arena", "parameters", "optimizer"} <= parts.keys(), memory
assert abs(sum(parts.values()) - peak) < 0.5, memory
PY
    expect_ok 2 bench layers --config "$SRC/configs/quickstart.yaml" --set threads=1 --steps 2 --warmup 0
    [ "$(grep -c '^# bench layers: mlp on cpu' "$WORK/out")" -eq 1 ] || fail "2 ranks: the table not printed once"
    grep -qE '^fc1 +linear +[0-9.]+ +[0-9.]+ ' "$WORK/out" || fail "no fc1 row"
    expect_error 0 'config' bench layers
    expect_error 0 'steps' bench layers --config "$SRC/configs/quickstart.yaml" --steps 0
    expect_error 0 "model.name" bench layers --config "$SRC/configs/quickstart.yaml" --set model.name=resnet21
}

case_timeline_layers() {
    # output.timeline_layers: the timeline gets a `layers` track with every layer's forward and
    # backward of every step (cat says which), inside that step's span; the training is the same
    # as without it (same loss lines); on 2 ranks both ranks' tracks are in the merged file.
    local resnet=(--config "$SRC/configs/quickstart.yaml" --set threads=1 --set model.name=resnet20
                  --set data.synthetic.channels=3 --set data.synthetic.height=32 --set data.synthetic.width=32
                  --set data.synthetic.train_samples=256 --set data.batch_size=16 --set train.max_steps=3
                  --set train.log_every=1 --set output.metrics= --set checkpoint.dir=ck --set output.model_dir=model)
    expect_ok 0 "${resnet[@]}"
    local plain
    plain=$(step_losses)
    [ "$(echo "$plain" | wc -l)" -eq 3 ] || fail "expected 3 loss lines, got: $plain"
    expect_ok 0 "${resnet[@]}" --set output.timeline=tl.json --set output.timeline_layers=true
    [ "$(step_losses)" = "$plain" ] || fail "the loss lines changed with output.timeline_layers"
    python3 - "$WORK/run$RUNS/tl.json" <<'PY' || fail "layers track not as expected"
import json, sys, collections
trace = json.load(open(sys.argv[1]))["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in trace if e["ph"] == "M" and e["name"] == "thread_name"}
assert names.get(2) == "layers", names
steps = {e["args"]["step"]: e for e in trace if e["ph"] == "X" and e["name"] == "step"}
layers = [e for e in trace if e["ph"] == "X" and e["tid"] == 2]
assert {e["args"]["step"] for e in layers} == {0, 1, 2}, {e["args"]["step"] for e in layers}
per = collections.Counter((e["args"]["step"], e["name"], e["cat"]) for e in layers)
assert set(per.values()) == {1}, "a pass recorded twice in one step"
for s in (0, 1, 2):
    convs = {n for (st, n, c) in per if st == s and c == "forward" and "conv" in n}
    assert len(convs) == 19 and {n for (st, n, c) in per if st == s and c == "backward" and "conv" in n} == convs, s
    step = steps[s]
    for e in (e for e in layers if e["args"]["step"] == s):
        assert step["ts"] - 1 <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"] + 1, (e, step)
PY
    expect_ok 2 --config "$SRC/configs/quickstart.yaml" --set threads=1 --set train.max_steps=2 --set output.metrics= \
        --set checkpoint.dir=ck --set output.model_dir=model --set output.timeline=tl.json --set output.timeline_layers=true
    python3 - "$WORK/run$RUNS/tl.json" <<'PY' || fail "2 ranks: the merged file lacks a rank's layers"
import json, sys
trace = json.load(open(sys.argv[1]))["traceEvents"]
assert {e["pid"] for e in trace if e["ph"] == "X" and e["tid"] == 2 and e["name"] == "fc1"} == {0, 1}
PY
    expect_error 0 "output.timeline_layers" --config "$SRC/configs/quickstart.yaml" --set output.timeline_layers=true
}

case_plot_ctr_exchange_png() {
    # scripts/plot_ctr_exchange.py draws docs/benchmarks.md's first CTR exchange table (a panel
    # per table size; the plan's lines where the table has them); input without rows: exit 2.
    need_matplotlib
    "$PLOT_PY" "$SRC/scripts/plot_ctr_exchange.py" "$SRC/docs/benchmarks.md" -o "$WORK/ctr.png" >"$WORK/out" 2>&1 ||
      fail "plot_ctr_exchange.py failed"
    grep -qE 'plot_ctr_exchange: [0-9]+ rows, 2 panels' "$WORK/out" || fail "no summary line with 2 panels"
    is_png "$WORK/ctr.png"
    echo "no table here" >"$WORK/none.md"
    "$PLOT_PY" "$SRC/scripts/plot_ctr_exchange.py" "$WORK/none.md" -o "$WORK/none.png" >"$WORK/out" 2>&1
    [ $? -eq 2 ] || fail "a file without rows did not exit 2"
    grep -q "no rows of scripts/bench-ctr-exchange.sh's table" "$WORK/out" || fail "no message for a file without rows"
}
