# shellcheck shell=bash
# The SageMaker entry point on a fake /opt/ml (SDP_OPT_ML), without Docker.
# Sourced by cli_test.sh, which runs one case: the function case_<name>, whose name is also the
# CTest case (tests/e2e/CMakeLists.txt reads the names from here).

case_sagemaker_entrypoint_plan() {
    cp "$SRC/configs/resourceconfig-example.json" "$WORK/rc.json"
    SDP_DRY_RUN=1 SDP_RESOURCE_CONFIG="$WORK/rc.json" SM_NUM_GPUS=8 SM_MODEL_DIR=/opt/ml/model \
      bash "$SRC/scripts/sagemaker-entrypoint.sh" --config /opt/ml/code/job.yaml >"$WORK/out" 2>&1 || fail "exit $?"
    grep -q 'host algo-1 (leader), 2 host(s) x 8 rank(s)' "$WORK/out" || fail "wrong plan"
    grep -q -- '-np 16 -H algo-1:8,algo-2:8' "$WORK/out" || fail "wrong rank layout"
    grep -q -- 'btl_tcp_if_include eth0' "$WORK/out" || fail "network interface not passed to Open MPI"
    grep -q -- '-x NCCL_SOCKET_IFNAME=eth0' "$WORK/out" || fail "network interface not passed to NCCL"
    grep -q -- '-x SM_MODEL_DIR' "$WORK/out" || fail "SM_* not forwarded"
    grep -q -- '--resource-config .*rc.json --config /opt/ml/code/job.yaml' "$WORK/out" || fail "arguments not passed on"
    sed 's/"current_host": "algo-1"/"current_host": "algo-7"/' "$SRC/configs/resourceconfig-example.json" >"$WORK/bad.json"
    SDP_DRY_RUN=1 SDP_RESOURCE_CONFIG="$WORK/bad.json" bash "$SRC/scripts/sagemaker-entrypoint.sh" >"$WORK/out" 2>&1
    [ $? -eq 2 ] || fail "bad resourceconfig did not exit 2"
    grep -q "current_host 'algo-7' is not in hosts" "$WORK/out" || fail "no clear error"
}

case_sagemaker_entrypoint_env() {
    # A bring-your-own-container image gets no SM_* variable: the entry point derives them
    # from /opt/ml (channels from input/data and inputdataconfig.json).
    fake_opt_ml algo-1 algo-1 algo-2
    mkdir -p "$OPT_ML/input/data/training" "$OPT_ML/input/data/test-set"
    echo '{"training": {}, "test-set": {}, "stream": {"TrainingInputMode": "Pipe"}}' >"$OPT_ML/input/config/inputdataconfig.json"
    echo '{"train.epochs": "3", "sagemaker_job_name": "\"x\""}' >"$OPT_ML/input/config/hyperparameters.json"
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    SDP_DRY_RUN=1 entrypoint
    [ $STATUS -eq 0 ] || fail "exit status $STATUS"
    for v in "SM_CHANNEL_TRAINING=$OPT_ML/input/data/training" "SM_CHANNEL_TEST_SET=$OPT_ML/input/data/test-set" \
             "SM_CHANNEL_STREAM=$OPT_ML/input/data/stream" "SM_MODEL_DIR=$OPT_ML/model" \
             "SM_CHECKPOINT_DIR=$OPT_ML/checkpoints" "SM_OUTPUT_DATA_DIR=$OPT_ML/output/data" "SM_NUM_GPUS=${gpus:-0}"; do
      grep -qxF "$v" "$WORK/out" || fail "not derived: $v"
    done
    grep -q -- "-x SM_CHANNEL_TRAINING .*-x SM_MODEL_DIR" "$WORK/out" || fail "SM_* not passed to the ranks"
    grep -q -- "sdp-train --hyperparameters $WORK/run/hyperparameters.json --resource-config $OPT_ML/input/config/resourceconfig.json$" "$WORK/out" ||
      fail "wrong sdp-train command"
    python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1])) != {"train.epochs": "3", "sagemaker_job_name": "\"x\""})' \
      "$WORK/run/hyperparameters.json" || fail "hyperparameters not passed on as they were"
    # What the job sets itself wins.
    SM_MODEL_DIR=/elsewhere SM_NUM_GPUS=4 SDP_DRY_RUN=1 entrypoint
    grep -qxF "SM_MODEL_DIR=/elsewhere" "$WORK/out" || fail "SM_MODEL_DIR overridden"
    grep -q -- "-np 8 -H algo-1:4,algo-2:4" "$WORK/out" || fail "SM_NUM_GPUS not followed"
}

case_sagemaker_entrypoint_config_hyperparameter() {
    # `train` without --config: the hyperparameter `config` names the job spec, looked up in
    # the channels, then the image's configs/; it is not passed on to sdp-train.
    fake_opt_ml algo-1 algo-1
    mkdir -p "$OPT_ML/input/data/code" "$OPT_ML/input/data/training"
    echo 'name: from-channel' >"$OPT_ML/input/data/code/job.yaml"
    echo '{"config": "\"job.yaml\"", "train.epochs": "1"}' >"$OPT_ML/input/config/hyperparameters.json"
    SDP_DRY_RUN=1 entrypoint
    [ $STATUS -eq 0 ] || fail "exit status $STATUS"
    grep -q -- "--config $OPT_ML/input/data/code/job.yaml$" "$WORK/out" || fail "config not found in the channel"
    python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1])) != {"train.epochs": "1"})' "$WORK/run/hyperparameters.json" ||
      fail "config still in the hyperparameters sdp-train reads"
    echo '{"config": "quickstart.yaml"}' >"$OPT_ML/input/config/hyperparameters.json"
    SDP_DRY_RUN=1 entrypoint
    grep -q -- "--config $(readlink -f "$SRC/configs")/quickstart.yaml$" "$WORK/out" || fail "config not found in the image's configs/"
    SDP_DRY_RUN=1 entrypoint --config /my/job.yaml
    grep -q "hyperparameter config=quickstart.yaml ignored: --config was given" "$WORK/out" || fail "no word that --config wins"
    grep -q -- "--resource-config [^ ]* --config /my/job.yaml$" "$WORK/out" || fail "--config did not win"
    echo '{"config": "\"nope.yaml\""}' >"$OPT_ML/input/config/hyperparameters.json"
    SDP_DRY_RUN=1 entrypoint
    [ $STATUS -eq 2 ] || fail "exit status $STATUS for a config found nowhere, expected 2"
    grep -q "^sdp-train: error: .*hyperparameters.json: key 'config': 'nope.yaml' is in none of the channels or the image's configs (looked in $OPT_ML/input/data/code, $OPT_ML/input/data/training, .*/configs)" "$WORK/out" ||
      fail "no clear error"
    grep -q "key 'config': 'nope.yaml'" "$OPT_ML/output/failure" || fail "no failure reason for SageMaker in output/failure"
}

case_sagemaker_entrypoint_train() {
    # One host, as SageMaker runs it: the config named by a hyperparameter, values as JSON
    # strings; the model lands in /opt/ml/model, the checkpoint in /opt/ml/checkpoints.
    fake_opt_ml algo-1 algo-1
    echo '{"config": "\"quickstart.yaml\"", "threads": "1", "train.epochs": "1", "train.max_steps": "6",
           "train.log_every": "2", "output.metrics": "\"\"", "sagemaker_program": "\"unused\""}' >"$OPT_ML/input/config/hyperparameters.json"
    entrypoint
    [ $STATUS -eq 0 ] || fail "exit status $STATUS"
    grep -q "^\[step 6\]" "$WORK/out" || fail "did not train 6 steps"
    [ -s "$OPT_ML/model/model.safetensors" ] || fail "no model in SageMaker's model dir"
    ls "$OPT_ML/checkpoints"/ckpt-000000006.safetensors >/dev/null || fail "no checkpoint in SageMaker's checkpoint dir"
    # Hyperparameters alone: the defaults (an MLP on synthetic data) and the overrides.
    rm -rf "$OPT_ML/model" "$OPT_ML/checkpoints"
    echo '{"threads": "1", "train.max_steps": "3", "data.synthetic.train_samples": "512", "output.metrics": ""}' >"$OPT_ML/input/config/hyperparameters.json"
    entrypoint
    [ $STATUS -eq 0 ] || fail "hyperparameters-only job: exit status $STATUS"
    grep -q "plan for job 'job'" "$WORK/out" || fail "not the default job"
    [ -s "$OPT_ML/model/model.safetensors" ] || fail "hyperparameters-only job: no model in SageMaker's model dir"
    # A bad value: the binary's error, exit 2. (A failed job ends 2 x SDP_SIGKILL_TIMEOUT
    # later: Open MPI's mpirun waits that long to kill the ranks left.)
    echo '{"config": "quickstart.yaml", "train.epochs": "ten"}' >"$OPT_ML/input/config/hyperparameters.json"
    SDP_SIGKILL_TIMEOUT=1 entrypoint
    [ $STATUS -eq 2 ] || fail "bad hyperparameter: exit status $STATUS, expected 2"
    grep -q "^sdp-train: error: .*hyperparameters.json: key 'train.epochs': expected an integer, got 'ten'" "$WORK/out" || fail "no clear error"
}

case_sagemaker_worker_never_contacted() {
    # A worker whose leader never comes: an error within its bound, never a hang.
    fake_opt_ml algo-2 algo-1 algo-2
    start=$(date +%s)
    SDP_RSH_AGENT=false SDP_WORKER_TIMEOUT_S=2 entrypoint
    [ $STATUS -eq 1 ] || fail "exit status $STATUS, expected 1"
    [ $(( $(date +%s) - start )) -le 10 ] || fail "took $(( $(date +%s) - start ))s for a 2 s bound"
    grep -q "^sdp-train: error: worker algo-2: the leader algo-1 did not contact this host within 2s" "$WORK/out" || fail "no clear error"
}

case_sagemaker_leader_waits_for_hosts() {
    # The leader waits, bounded, for every host to resolve and to accept the remote shell,
    # and names the one that did not.
    fake_opt_ml algo-1 algo-1 sdp-no-such-host.invalid
    SDP_HOSTS_TIMEOUT_S=2 entrypoint
    [ $STATUS -eq 1 ] || fail "exit status $STATUS, expected 1"
    grep -q "^sdp-train: error: host 'sdp-no-such-host.invalid' from .*resourceconfig.json did not resolve within 2s" "$WORK/out" || fail "no clear error for a name that never resolves"
    printf '#!/bin/sh\necho "ssh: connect to host $1 port 22: Connection refused" >&2\nexit 255\n' >"$WORK/agent"; chmod +x "$WORK/agent"
    fake_opt_ml algo-1 algo-1 localhost
    SDP_RSH_AGENT="$WORK/agent" SDP_HOSTS_TIMEOUT_S=2 entrypoint
    [ $STATUS -eq 1 ] || fail "exit status $STATUS, expected 1"
    grep -q "^sdp-train: error: host 'localhost' resolves but did not accept .*/agent within 2s (last attempt: ssh: connect to host localhost port 22: Connection refused)" "$WORK/out" ||
      fail "no clear error for a host that does not accept ssh"
}

case_sagemaker_leader_gives_up_ends_workers() {
    # The leader gives up on one host: the workers it did reach end with its status at once.
    # The "remote" shell runs here: the worker reached is localhost.
    fake_opt_ml localhost algo-1 localhost sdp-no-such-host.invalid
    start_local_worker_then_lead
    SDP_RSH_AGENT="$WORK/agent" SDP_HOSTS_TIMEOUT_S=2 entrypoint
    [ $STATUS -eq 1 ] || fail "leader: exit status $STATUS, expected 1"
    grep -q "host 'sdp-no-such-host.invalid' .* did not resolve within 2s" "$WORK/out" || fail "leader: no clear error"
    expect_worker_ended 1
}

case_sagemaker_leader_failure_ends_workers() {
    # A leader that fails before the job starts (its config is nowhere) still tells the worker,
    # which exits with the job's status instead of waiting for its bound. The "remote" shell
    # runs here: the worker is localhost.
    fake_opt_ml localhost algo-1 localhost
    echo '{"config": "nope.yaml"}' >"$OPT_ML/input/config/hyperparameters.json"
    start_local_worker_then_lead
    SDP_RSH_AGENT="$WORK/agent" SDP_HOSTS_TIMEOUT_S=20 entrypoint
    [ $STATUS -eq 2 ] || fail "leader: exit status $STATUS, expected 2"
    grep -q "key 'config': 'nope.yaml' is in none" "$WORK/out" || fail "leader: no clear error"
    expect_worker_ended 2
}

case_sagemaker_metric_definitions() {
    # The regexes of docs/sagemaker-metric-definitions.json, applied as SageMaker does (each
    # log line, first capture group), find every metric in a real run's output, and each
    # value equals its metrics.jsonl record to the printed precision.
    expect_ok 0 "${SHORT_TRAIN[@]}"
    python3 - "$SRC/docs/sagemaker-metric-definitions.json" "$WORK/out" "$WORK/m.jsonl" <<'PY' || fail "metric definitions do not match the output"
import json, re, sys
defs = json.load(open(sys.argv[1]))
lines = open(sys.argv[2]).read().splitlines()
records = [json.loads(l) for l in open(sys.argv[3]) if l.strip()]
# The metric each definition must capture: (metrics.jsonl event, key).
source = {"train:loss": ("train", "train_loss"), "train:lr": ("train", "lr"),
          "train:images_per_sec": ("train", "images_per_sec"),
          "test:loss": ("eval", "test_loss"), "test:accuracy": ("eval", "test_accuracy")}
assert [d["Name"] for d in defs] == list(source), [d["Name"] for d in defs]
assert all(set(d) == {"Name", "Regex"} and 0 < len(d["Regex"]) <= 500 for d in defs), defs
# Metric lines of stdout and metrics.jsonl records, in the same order.
events = {"start": "start", "step": "train", "epoch": "eval", "done": "done"}
tagged = [(i, events[m.group(1)]) for i, l in enumerate(lines) if (m := re.match(r"\[(start|step|epoch|done)\b", l))]
assert [e for _, e in tagged] == [r["event"] for r in records], ([e for _, e in tagged], [r["event"] for r in records])
record_of_line = {i: r for (i, _), r in zip(tagged, records)}
for d in defs:
    event, key = source[d["Name"]]
    regex = re.compile(d["Regex"])
    found = 0
    for i, line in enumerate(lines):
        m = regex.search(line)
        r = record_of_line.get(i)
        expected = r is not None and r["event"] == event and key in r
        assert bool(m) == expected, f"{d['Name']}: {'matched' if m else 'missed'} line {i + 1}: {line}"
        if not m:
            continue
        value = float(m.group(1))
        # %.6g: within 5e-6 relative; images_per_sec is printed with %.1f.
        tol = 5e-6 * abs(r[key]) + (0.05 if key == "images_per_sec" else 0) + 1e-12
        assert abs(value - r[key]) <= tol, f"{d['Name']}: {value} on line {i + 1}, {r[key]} in metrics.jsonl"
        found += 1
    assert found > 0, f"{d['Name']}: no match"
    print(f"{d['Name']}: {found} value(s), all equal to metrics.jsonl")
PY
}

case_sagemaker_output_locations() {
    # On SageMaker, relative output paths land under /opt/ml/output/data (uploaded as
    # output.tar.gz), not in the container's working directory, and TensorBoard's event files
    # under /opt/ml/output/tensorboard: through the entry point (SM_OUTPUT_DIR), and run
    # directly, from where its resourceconfig.json lies.
    fake_opt_ml algo-1 algo-1
    echo '{"config": "\"quickstart.yaml\"", "threads": "1", "train.max_steps": "6", "train.log_every": "2",
           "output.timeline": "tl/trace.json"}' >"$OPT_ML/input/config/hyperparameters.json"
    entrypoint
    [ $STATUS -eq 0 ] || fail "exit status $STATUS"
    data=$OPT_ML/output/data
    [ "$(grep -c '"event":"train"' "$data/out/quickstart/metrics.jsonl")" -eq 3 ] || fail "no metrics.jsonl of 3 [step] records under $data"
    [ -s "$data/tl/trace.json" ] && [ -s "$data/tl/trace.rank0.json" ] || fail "the timeline is not under $data"
    ls "$OPT_ML/output/tensorboard"/events.out.tfevents.* >/dev/null || fail "no TensorBoard events in $OPT_ML/output/tensorboard"
    left=$(find "$WORK" \( -name metrics.jsonl -o -name 'trace*.json' -o -name 'events.out.tfevents.*' \) -not -path "$OPT_ML/*")
    [ -z "$left" ] || fail "outputs outside $OPT_ML: $left"
    # sdp-train without the entry point: the same places, from --resource-config's tree ...
    run 0 validate --config "$SRC/configs/quickstart.yaml" --resource-config "$OPT_ML/input/config/resourceconfig.json" --set output.timeline=t.json
    [ $STATUS -eq 0 ] || fail "validate: exit status $STATUS"
    for line in "metrics: \"$data/out/quickstart/metrics.jsonl\"" "timeline: \"$data/t.json\"" "tensorboard: \"$OPT_ML/output/tensorboard\""; do
      grep -qF "  $line" "$WORK/out" || fail "validate does not print '$line'"
    done
    # ... and off SageMaker none of it: relative paths stay, TensorBoard's auto is off.
    run 0 validate --config "$SRC/configs/quickstart.yaml"
    grep -qF '  metrics: "out/quickstart/metrics.jsonl"' "$WORK/out" && grep -qF '  tensorboard: "auto"' "$WORK/out" ||
      fail "off SageMaker the outputs changed: $(grep -E '^  (metrics|tensorboard):' "$WORK/out")"
}

# expect_failure_reason STATUS REGEX: the entry point ended with STATUS and the failure file
# holds one line, matching REGEX, the error sdp-train printed.
expect_failure_reason() {
    [ $STATUS -eq "$1" ] || fail "exit status $STATUS, expected $1"
    [ -f "$OPT_ML/output/failure" ] || fail "no $OPT_ML/output/failure"
    [ "$(wc -l <"$OPT_ML/output/failure")" -eq 1 ] || fail "failure has $(wc -l <"$OPT_ML/output/failure") lines: $(cat "$OPT_ML/output/failure")"
    grep -qE "$2" "$OPT_ML/output/failure" || fail "failure reason '$(cat "$OPT_ML/output/failure")' does not match /$2/"
    grep -qxF "$(cat "$OPT_ML/output/failure")" "$WORK/out" || fail "the failure reason is not the error printed"
    ls "$OPT_ML/output" | grep -q tmp && fail "a temporary file was left in $OPT_ML/output"
    echo "failure reason (exit $1): $(cat "$OPT_ML/output/failure")"
}

case_sagemaker_failure_reason() {
    # A failing job leaves its one-line error in /opt/ml/output/failure, SageMaker's
    # FailureReason, written by sdp-train (the entry point execs mpirun on one host): bad
    # input (exit 2), a runtime error of the job (exit 1), a rank that stops taking part (the
    # watchdog of both ranks waiting for it aborts, exit 3: one of them writes it, whole).
    fake_opt_ml algo-1 algo-1
    hp=$OPT_ML/input/config/hyperparameters.json
    echo '{"config": "quickstart.yaml", "train.epochs": "ten"}' >"$hp"
    SDP_SIGKILL_TIMEOUT=1 entrypoint
    expect_failure_reason 2 "^sdp-train: error: .*hyperparameters.json: key 'train.epochs': expected an integer, got 'ten'$"
    echo '{"config": "quickstart.yaml", "threads": "1", "train.max_steps": "10", "output.metrics": ""}' >"$hp"
    SDP_TEST_NAN_RANK=1 SDP_TEST_NAN_STEP=3 SDP_PROCS_PER_HOST=2 SDP_SIGKILL_TIMEOUT=1 entrypoint
    expect_failure_reason 1 "^sdp-train: error: step 3 \(epoch 0\): the training loss is (not finite|finite but a gradient is not) .*train.on_nonfinite: skip\)$"
    echo '{"config": "quickstart.yaml", "threads": "1", "train.max_steps": "10", "output.metrics": "",
           "distributed.timeout_s": "3", "distributed.stall_warning_s": "2"}' >"$hp"
    SDP_TEST_STALL_RANK=2 SDP_TEST_STALL_STEP=2 SDP_PROCS_PER_HOST=3 SDP_SIGKILL_TIMEOUT=1 entrypoint
    expect_failure_reason 3 "^sdp-train: error: rank [01] step 2 .*never arrived: 2; aborting the job \(distributed.timeout_s = 3.0\)$"
    # Run directly on the same tree, sdp-train adds no second reason: the first error stays
    # (the entry point clears the file when a job starts, as each run above shows).
    run 0 --config "$SRC/configs/quickstart.yaml" --resource-config "$OPT_ML/input/config/resourceconfig.json" --set train.epochs=0
    [ $STATUS -eq 2 ] || fail "exit status $STATUS for train.epochs=0"
    grep -q "aborting the job" "$OPT_ML/output/failure" || fail "a later error replaced the first: $(cat "$OPT_ML/output/failure")"
}
