# shellcheck shell=bash
# The command line, the job spec and its errors, the environment and topology commands.
# Sourced by cli_test.sh, which runs one case: the function case_<name>, whose name is also the
# CTest case (tests/e2e/CMakeLists.txt reads the names from here).

case_help() {
    expect_ok 0 --help
    grep -q 'validate' "$WORK/out" && grep -q 'Examples:' "$WORK/out" || fail "help lacks commands/examples"
}

case_version() {
    # The version, then each library with the version it loaded and the file it came from
    # (what an image or a cluster's modules really provide).
    expect_ok 0 --version
    grep -qE '^sdp-train [0-9]+\.[0-9]+\.[0-9]+' "$WORK/out" || fail "no version"
    libraries=('Open MPI v[0-9.]+ \(/.*libmpi\.so[.0-9]*\)' 'oneDNN [0-9]+\.[0-9]+\.[0-9]+ \(/.*libdnnl\.so[.0-9]*\)')
    if grep -q 'CUDA backend: built' "$WORK/out"; then
      libraries+=('CUDA runtime 1[0-9]\.[0-9]+ \(/.*libcudart\.so[.0-9]*\)' 'cuDNN 9\.[0-9]+\.[0-9]+ \(/.*libcudnn\.so[.0-9]*\)'
                  'cuBLAS 1[0-9]\.[0-9]+\.[0-9]+ \(/.*libcublas\.so[.0-9]*\)' 'NCCL 2\.[0-9]+\.[0-9]+ \(/.*libnccl\.so[.0-9]*\)'
                  'CUDA driver ([0-9.]+|none \(.+\))' 'nvJPEG ([0-9.]+ \(/.*libnvjpeg\.so\.13\)|not loaded: .+)')
    fi
    for pattern in "${libraries[@]}"; do
      grep -qE "^  $pattern\$" "$WORK/out" || fail "no line /$pattern/"
    done
    for file in $(grep -oE '\(/[^)]+\)$' "$WORK/out" | tr -d '()'); do
      [ -f "$file" ] || fail "--version names $file, which does not exist"
    done
}

case_cpu_isa_override() {
    # SDP_CPU_ISA picks the ISA of our own CPU loops, at most what the CPU has: --version and
    # the plan's math line say which ran; a value naming none, or more than the CPU has, is
    # exit 2 naming the variable. Every rank checks it, before MPI starts.
    expect_ok 0 --version
    grep -qE '^  CPU kernels (baseline|avx2|avx512) \(detected (baseline|avx2|avx512)\)$' "$WORK/out" || fail "no CPU kernels line"
    export SDP_CPU_ISA=baseline
    expect_ok 0 --version
    grep -qE '^  CPU kernels baseline \(SDP_CPU_ISA; detected (baseline|avx2|avx512)\)$' "$WORK/out" || fail "--version ignores SDP_CPU_ISA"
    expect_ok 2 validate --config "$SRC/configs/quickstart.yaml"
    grep -qE '^  math +: f32 on oneDNN \(CPU\); own kernels baseline \(SDP_CPU_ISA' "$WORK/out" || fail "the plan's math line ignores SDP_CPU_ISA"
    export SDP_CPU_ISA=avx3
    expect_error 0 "SDP_CPU_ISA='avx3' names no ISA: baseline, avx2 or avx512" validate --config "$SRC/configs/quickstart.yaml"
    run 2 validate --config "$SRC/configs/quickstart.yaml"
    [ $STATUS -eq 2 ] || fail "2 ranks: exit status $STATUS, expected 2"
    [ "$(grep -c "SDP_CPU_ISA='avx3'" "$WORK/out")" -eq 2 ] || fail "2 ranks: not every rank named the variable"
    unset SDP_CPU_ISA
}

case_bad_option() {
    expect_error 2 'unknown|not expected|extra' --config "$SRC/configs/quickstart.yaml" --no-such-flag
}

case_no_config() {
    expect_error 0 'config' train
}

case_validate_quickstart() {
    expect_ok 2 validate --config "$SRC/configs/quickstart.yaml" --set data.batch_size=32
    grep -q '^# valid' "$WORK/out" || fail "no '# valid'"
    grep -q 'batch_size: 32' "$WORK/out" || fail "resolved spec lacks the override"
    grep -q '32 per rank, 64 global' "$WORK/out" || fail "plan lacks per-rank/global batch"
    grep -q '^  layout       : oneDNN' "$WORK/out" || fail "the plan does not say the CPU's layout"
    grep -qF 'learning rate: global batch 64 (32 x 2 ranks x 1), lr 0.02 @ 32 -> 0.04 (linear)' "$WORK/out" || fail "plan lacks the scaled LR"
    [ "$(grep -c '^# valid' "$WORK/out")" -eq 1 ] || fail "printed by more than one rank"
}

case_validate_precedence() {
    cfg=$(yaml job.yaml 'optimizer: {lr: 0.05, momentum: 0.5}\ntrain: {epochs: 2}\n')
    echo '{"optimizer.lr": "0.2", "optimizer.momentum": "0.7", "sagemaker_program": "x.py"}' >"$WORK/hp.json"
    expect_ok 0 validate --config "$cfg" --hyperparameters "$WORK/hp.json" --set optimizer.lr=0.3
    grep -q 'lr: 0.3$' "$WORK/out" || fail "--set did not win"
    grep -q 'momentum: 0.7$' "$WORK/out" || fail "hyperparameters did not beat YAML"
    grep -q 'epochs: 2$' "$WORK/out" || fail "YAML did not beat the default"
}

case_env_two_nodes() {
    expect_ok 4 env --set distributed.ranks_per_node=2
    json_check 'd["size"] == 4 and d["nodes"] == 2 and d["local_size"] == 2'
    json_check '[(r["node"], r["local_rank"]) for r in d["ranks"]] == [(0, 0), (0, 1), (1, 0), (1, 1)]'
    # One GPU list per node; without a usable GPU, the runtime's reason instead of a silent 0.
    json_check '[n["node"] for n in d["nodes_gpus"]] == [0, 1] and all(isinstance(n["gpus"], list) for n in d["nodes_gpus"])'
    json_check 'any(n["gpus"] for n in d["nodes_gpus"]) or len(d["cuda_unavailable"]) > 0'
    # Across the two nodes: the hosts (a CPU job), and what NCCL would use on this machine.
    json_check 'd["inter_node"] == "host" and d["nccl_network"]["transport"] != "" and isinstance(d["nccl_network"]["efa_devices"], list)'
}

case_threads_follow_the_machine() {
    # Two logical nodes on one machine: each rank gets half the CPUs, not all of them
    # (issue #11: 2 ranks x 2 threads on 2 cores ran LeNet-5 10x slower).
    cpus=$(nproc)
    want=$(( cpus / 2 > 0 ? cpus / 2 : 1 ))
    OMPI_MCA_hwloc_base_binding_policy=none expect_ok 2 env --set distributed.ranks_per_node=1
    json_check "d['nodes'] == 2 and [r['threads'] for r in d['ranks']] == [$want, $want]"
    grep -q 'warning: machine' "$WORK/out" && fail "warned of oversubscription although the default fits"
    # Bound by the launcher to one core each: one thread each, and a hint to unbind.
    OMPI_MCA_hwloc_base_binding_policy=core expect_ok 1 env
    json_check "[r['threads'] for r in d['ranks']] == [1]"
    if [ "$cpus" -gt 1 ]; then
      grep -q 'bound to 1 CPU(s) by the launcher.*--bind-to none' "$WORK/out" || fail "no hint to unbind"
    fi
}

case_threads_oversubscribed_wait_passively() {
    # Ranks asking for more threads than the machine has: said once, and OpenMP threads
    # do not spin (sdp-train picks OMP_WAIT_POLICY=passive before it starts).
    cpus=$(nproc)
    OMPI_MCA_hwloc_base_binding_policy=none expect_ok 2 "${SHORT_TRAIN[@]}" --set threads=$cpus --set train.max_steps=3
    [ "$(grep -c 'warning: machine' "$WORK/out")" -eq 1 ] || fail "expected one oversubscription warning"
    grep -q "with $((2 * cpus)) CPU threads in all on $cpus CPU(s).*OMP_WAIT_POLICY=passive" "$WORK/out" ||
      fail "the warning does not say the threads wait passively"
    # A policy the user chose is kept, and the warning says what it costs.
    OMP_WAIT_POLICY=active OMPI_MCA_hwloc_base_binding_policy=none expect_ok 2 "${SHORT_TRAIN[@]}" --set threads=$cpus --set train.max_steps=3
    grep -q 'OMP_WAIT_POLICY=active spinning threads slow every step' "$WORK/out" || fail "no warning under the user's active policy"
    # Threads that fit: no warning.
    OMPI_MCA_hwloc_base_binding_policy=none expect_ok 2 "${SHORT_TRAIN[@]}" --set train.max_steps=3
    grep -q 'warning: machine' "$WORK/out" && fail "warned although the default threads fit"
}

case_docs_job_spec_in_sync() {
    # docs/job-spec.md lists every key `sdp-train validate` prints, with the default it
    # prints, and no key it does not know.
    expect_ok 0 validate --config "$(yaml empty.yaml '{}\n')"
    python3 - "$WORK/out" "$SRC/docs/job-spec.md" <<'PY' || fail "docs/job-spec.md is out of sync with sdp-train validate"
import re, sys
printed, stack = {}, []
for line in open(sys.argv[1]).read().split("\n# plan")[0].splitlines():
    m = re.match(r"^( *)([a-z_0-9]+):(?: (.*))?$", line)
    if not m:
        continue
    depth = len(m.group(1)) // 2
    stack[depth:] = [m.group(2)]
    if m.group(3) is not None:
        printed[".".join(stack)] = m.group(3).strip('"')
documented = {}
for line in open(sys.argv[2]):
    cells = [c.strip() for c in line.split("|")]
    if len(cells) < 4 or not cells[1].startswith("`") or "." not in cells[1] and cells[1].strip("`") not in printed:
        continue
    keys = re.findall(r"`([^`]+)`", cells[1])
    values = re.findall(r"`([^`]*)`", cells[2])
    if len(keys) != len(values):
        continue
    parent = keys[0].rsplit(".", 1)[0]
    for k, v in zip(keys, values):
        documented[parent + k if k.startswith(".") else k] = v
def same(doc, shown):
    doc = re.sub(r"^\$\{[A-Z_]+:-(.*)\}$", r"\1", doc)  # ${SM_X:-default}: the default
    doc = doc.strip('"')
    try:
        return float(doc) == float(shown)
    except ValueError:
        return doc == shown
bad = [f"{k}: a key with no entry in docs/job-spec.md (its default: {v!r})" for k, v in printed.items()
       if k not in documented]
bad += [f"{k}: printed {v!r}, documented {documented[k]!r}" for k, v in printed.items()
        if k in documented and not same(documented[k], v)]
bad += [f"{k}: documented but not a key sdp-train prints" for k in documented
        if k not in printed and "." in k]
print("\n".join(bad) if bad else f"{len(printed)} keys in sync")
sys.exit(1 if bad else 0)
PY
}

case_env_shared_memory() {
    expect_ok 3 env
    json_check 'd["size"] == 3 and d["nodes"] == 1 and [r["local_rank"] for r in d["ranks"]] == [0, 1, 2]'
}

case_env_resourceconfig() {
    echo '{"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "eth0",
           "instance_groups": [{"instance_group_name": "g", "hosts": ["algo-1"]}]}' >"$WORK/rc.json"
    SM_CHANNEL_TRAINING=/opt/ml/input/data/training SM_NUM_GPUS=0 expect_ok 2 env --resource-config "$WORK/rc.json"
    json_check 'd["node_names"] == ["algo-1"] and d["local_size"] == 2'
    json_check 'd["tf_config"]["cluster"]["worker"] == ["algo-1:2222"] and d["tf_config"]["task"]["index"] == 0'
    json_check 'd["sagemaker"]["channels"]["TRAINING"] == "/opt/ml/input/data/training"'
}

case_err_missing_data() {
    expect_error 2 "$WORK/nodata.*(not found|no such|cannot open|looked for)" --config "$SRC/configs/lenet-mnist.yaml" --set data.train="$WORK/nodata" --set data.test="$WORK/nodata"
}

case_err_corrupt_data() {
    mkdir -p "$WORK/mnist"
    printf '\x00\x00\x08\x03\x00\x00\x00\x0a\x00\x00\x00\x1c\x00\x00\x00\x1c' >"$WORK/mnist/train-images-idx3-ubyte"
    printf '\x00\x00\x08\x01\x00\x00\x00\x0a\x01\x02' >"$WORK/mnist/train-labels-idx1-ubyte"
    cp "$WORK/mnist/train-images-idx3-ubyte" "$WORK/mnist/t10k-images-idx3-ubyte"
    cp "$WORK/mnist/train-labels-idx1-ubyte" "$WORK/mnist/t10k-labels-idx1-ubyte"
    expect_error 2 "train-(images|labels)-idx[13]-ubyte.*(truncated|short|expected)" --config "$SRC/configs/lenet-mnist.yaml" --set data.train="$WORK/mnist" --set data.test="$WORK/mnist"
}

case_err_batch_larger_than_data() {
    expect_error 2 "data.batch_size.*not one step per epoch" --config "$SRC/configs/quickstart.yaml" --set data.batch_size=8192
}

case_err_malformed_yaml() {
    cfg=$(yaml bad.yaml 'model:\n  name: lenet5\n  hidden: [1, 2\n')
    expect_error 2 "bad.yaml:[0-9]+:[0-9]+: malformed YAML" validate --config "$cfg"
}

case_err_unknown_key() {
    cfg=$(yaml bad.yaml 'optimizer:\n  lr: 0.1\n  momentun: 0.9\n')
    expect_error 2 "bad.yaml:3: unknown key 'optimizer.momentun' \(did you mean 'optimizer.momentum'" validate --config "$cfg"
}

case_err_wrong_type() {
    cfg=$(yaml bad.yaml 'data:\n  batch_size: sixty-four\n')
    expect_error 2 "bad.yaml:2: key 'data.batch_size': expected an integer" validate --config "$cfg"
}

case_err_negative_batch() {
    cfg=$(yaml bad.yaml 'data: {batch_size: -64}\n')
    expect_error 2 "bad.yaml:1: key 'data.batch_size': must be a positive integer" validate --config "$cfg"
}

case_err_lr_not_positive() {
    cfg=$(yaml bad.yaml 'optimizer: {lr: 0}\n')
    expect_error 2 "bad.yaml:1: key 'optimizer.lr': must be > 0" validate --config "$cfg"
}

case_err_channels_last_needs_a_gpu() {
    # channels_last is a GPU layout: asked of a job on the CPU it is an error naming the key
    # (exit 2), and an unknown layout names the choices.
    cfg=$(yaml bad.yaml 'device: cpu\nmodel: {name: resnet20, memory_format: channels_last}\n')
    expect_error 2 "bad.yaml:2: key 'model.memory_format': channels_last is a GPU layout: with device cpu, oneDNN picks its own layouts" validate --config "$cfg"
    cfg=$(yaml bad2.yaml 'model: {memory_format: nhwc}\n')
    expect_error 2 "bad2.yaml:1: key 'model.memory_format': unknown value 'nhwc'" validate --config "$cfg"
}

case_err_cuda_graphs_needs_a_gpu() {
    # train.cuda_graphs: on records a GPU's step: asked of a CPU job it is an error naming the
    # key (exit 2); an unknown value names the choices; the plan says which way a job's steps go.
    cfg=$(yaml bad.yaml 'device: cpu\ntrain: {cuda_graphs: on}\n')
    expect_error 2 "bad.yaml:2: key 'train.cuda_graphs': on records the GPU's step as a CUDA graph: with device cpu there is none \(use off\)" validate --config "$cfg"
    cfg=$(yaml bad2.yaml 'train: {cuda_graphs: yes}\n')
    expect_error 2 "bad2.yaml:1: key 'train.cuda_graphs': unknown value 'yes' \(expected one of: auto, off, on\)" validate --config "$cfg"
    expect_ok 0 validate --config "$SRC/configs/quickstart.yaml"
    grep -q "^  graphs       :" "$WORK/out" && fail "a CPU job that leaves train.cuda_graphs alone is told about graphs"
    expect_ok 0 validate --config "$SRC/configs/quickstart.yaml" --set train.cuda_graphs=off
    grep -q "^  graphs       : off (CPU)" "$WORK/out" || fail "the plan does not say a CPU job's steps are launched"
    expect_ok 0 validate --config "$SRC/configs/quickstart.yaml" --set device=auto --set train.cuda_graphs=on
    grep -qE "^  graphs       : on(:|, but the steps run as launches: this rank computes on the CPU)" "$WORK/out" ||
      fail "the plan does not say where the steps of train.cuda_graphs: on go"
}

case_memory_plan_choice() {
    # model.memory_plan: the plan says where a step's buffers go; a bad value names the key
    # and its choices (exit 2).
    expect_ok 0 validate --config "$SRC/configs/quickstart.yaml"
    grep -q "^  memory       : shared (auto): backward's buffers in one arena" "$WORK/out" ||
      fail "the plan does not say the CPU shares backward's buffers"
    expect_ok 0 validate --config "$SRC/configs/quickstart.yaml" --set model.memory_plan=per_layer
    grep -q '^  memory       : per_layer: every layer keeps its own' "$WORK/out" || fail "per_layer is not taken"
    cfg=$(yaml bad.yaml 'model: {memory_plan: pooled}\n')
    expect_error 2 "bad.yaml:1: key 'model.memory_plan': unknown value 'pooled'" validate --config "$cfg"
}

# expect_gpu_16bit_choice KEY VALUE: VALUE of KEY runs on a GPU in 16 bits channels_last only;
# asked for on the CPU, in fp32 or in NCHW, it is an error naming the key (exit 2).
expect_gpu_16bit_choice() {
    local key=$1 value=$2 quickstart=(--config "$SRC/configs/quickstart.yaml")
    expect_error 2 "key '$key': $value is a GPU's" validate "${quickstart[@]}" --set device=cpu --set "$key=$value"
    expect_error 2 "key '$key': $value needs 16-bit activations .precision amp-fp16 or amp-bf16., not fp32" \
      validate "${quickstart[@]}" --set device=cuda --set "$key=$value"
    expect_error 2 "key '$key': $value needs the channels_last layout" validate "${quickstart[@]}" --set device=cuda \
      --set precision=amp-fp16 --set model.memory_format=nchw --set "$key=$value"
}

case_batchnorm_choice() {
    # model.batchnorm: the plan says how BatchNorm runs (a CPU job only when it sets the key); folded and folded_inner are a GPU's 16-bit
    # channels_last paths, so asking for one where it cannot run, or a bad value, names the key (exit 2).
    expect_ok 0 validate --config "$SRC/configs/quickstart.yaml"
    grep -q "^  batchnorm    :" "$WORK/out" && fail "a CPU job that leaves model.batchnorm alone is told about it"
    expect_ok 0 validate --config "$SRC/configs/quickstart.yaml" --set model.batchnorm=separate
    grep -q "^  batchnorm    : separate (oneDNN, CPU)" "$WORK/out" || fail "the plan does not say how BatchNorm runs"
    expect_gpu_16bit_choice model.batchnorm folded
    expect_gpu_16bit_choice model.batchnorm folded_inner
    cfg=$(yaml bad.yaml 'model: {batchnorm: fused}\n')
    expect_error 2 "bad.yaml:1: key 'model.batchnorm': unknown value 'fused'" validate --config "$cfg"
}

case_grad_sum_choice() {
    # model.grad_sum: the plan says where a residual block sums its input gradients; fused is a GPU's
    # 16-bit channels_last path, so asking for it where it cannot run, or a bad value, names the key (exit 2).
    expect_ok 0 validate --config "$SRC/configs/quickstart.yaml"
    grep -q "^  grad sum     :" "$WORK/out" && fail "a CPU job that leaves model.grad_sum alone is told about it"
    expect_ok 0 validate --config "$SRC/configs/quickstart.yaml" --set model.grad_sum=separate
    grep -q "^  grad sum     : separate (oneDNN, CPU)" "$WORK/out" || fail "the plan does not say where gradients sum"
    expect_gpu_16bit_choice model.grad_sum fused
    cfg=$(yaml bad.yaml 'model: {grad_sum: later}\n')
    expect_error 2 "bad.yaml:1: key 'model.grad_sum': unknown value 'later'" validate --config "$cfg"
}

case_capturable_choice() {
    # optimizer.capturable: the plan says where the update is decided; on is a GPU's (the device
    # decides and applies it), so asking for it with device cpu, or a bad value, names the key
    # (exit 2), on validate and on a training run.
    local quickstart=(--config "$SRC/configs/quickstart.yaml")
    expect_ok 0 validate "${quickstart[@]}"
    grep -q "^  update       :" "$WORK/out" && fail "a CPU job that leaves optimizer.capturable alone is told about it"
    expect_ok 0 validate "${quickstart[@]}" --set optimizer.capturable=off
    grep -q "^  update       : on the host (CPU)" "$WORK/out" ||
      fail "the plan does not say where the CPU's update is decided"
    # (The GPU's lines need a GPU to validate: test_train's CapturableUpdateChoice checks them.)
    expect_error 2 "key 'optimizer.capturable': on decides and applies a GPU's update on the device" \
      validate "${quickstart[@]}" --set device=cpu --set optimizer.capturable=on
    expect_error 2 "key 'optimizer.capturable': on decides and applies a GPU's update on the device" \
      "${quickstart[@]}" --set device=cpu --set optimizer.capturable=on
    cfg=$(yaml bad.yaml 'optimizer: {capturable: sometimes}\n')
    expect_error 2 "bad.yaml:1: key 'optimizer.capturable': unknown value 'sometimes'" validate --config "$cfg"
}

case_stream_ordered_choice() {
    # distributed.stream_ordered: on orders a GPU's gradient buckets on its streams; with device
    # cpu, or a bad value, the key is named (exit 2); asked of a job that computes on the CPU
    # (device auto here) it trains as before and the log says why the buckets are not.
    local quickstart=(--config "$SRC/configs/quickstart.yaml")
    expect_error 2 "key 'distributed.stream_ordered': on orders a GPU's gradient buckets on its streams" \
      validate "${quickstart[@]}" --set device=cpu --set distributed.stream_ordered=on
    cfg=$(yaml bad.yaml 'distributed: {stream_ordered: yes please}\n')
    expect_error 2 "bad.yaml:1: key 'distributed.stream_ordered': unknown value 'yes please'" validate --config "$cfg"
    expect_ok 2 "${quickstart[@]}" --set distributed.stream_ordered=on --set train.max_steps=6 \
      --set output.model_dir="$WORK/m"
    grep -q "Gradient buckets (distributed.stream_ordered: on): the communication thread orders them: the gradients are reduced in host memory" \
      "$WORK/out" || fail "the log does not say why the buckets are not stream-ordered"
    grep -q "^\[done\] steps=6 " "$WORK/out" || fail "the job did not train"
}

case_loss_read_choice() {
    # train.loss_read: the plan says when the host reads the loss (the CPU computes it as it
    # goes); a bad value names the key and its choices (exit 2).
    expect_ok 0 validate --config "$SRC/configs/quickstart.yaml" --set train.loss_read=step_end
    grep -q '^  loss read    : as computed (CPU)' "$WORK/out" || fail "the plan does not say how the CPU reads the loss"
    cfg=$(yaml bad.yaml 'train: {loss_read: later}\n')
    expect_error 2 "bad.yaml:1: key 'train.loss_read': unknown value 'later'" validate --config "$cfg"
}

case_err_unknown_model() {
    cfg=$(yaml bad.yaml 'model: {name: resnet21}\n')
    expect_error 2 "bad.yaml:1: key 'model.name': unknown value 'resnet21'.*did you mean" validate --config "$cfg"
}

case_err_unknown_optimizer() {
    cfg=$(yaml bad.yaml 'optimizer: {name: lion}\n')
    expect_error 2 "key 'optimizer.name': unknown value 'lion' \(expected one of: sgd, adam, adamw, lars, lamb, adagrad, ftrl\)" train --config "$cfg"
}

case_err_trust_coefficient() {
    expect_error 2 "--set: key 'optimizer.trust_coefficient': must be > 0" validate --config "$SRC/configs/quickstart.yaml" \
      --set optimizer.name=lars --set optimizer.trust_coefficient=0
}

case_err_unknown_format() {
    cfg=$(yaml bad.yaml 'data: {format: imagenet}\n')
    expect_error 2 "key 'data.format': unknown value 'imagenet'" train --config "$cfg"
}

case_err_unset_variable() {
    cfg=$(yaml bad.yaml 'data:\n  format: mnist\n  train: ${SDP_TEST_SURELY_UNSET}/mnist\n')
    expect_error 2 "bad.yaml:3: key 'data.train': environment variable SDP_TEST_SURELY_UNSET is not set" validate --config "$cfg"
}

case_err_missing_config() {
    expect_error 2 "config file '$WORK/none.yaml' not found" validate --config "$WORK/none.yaml"
}

case_err_malformed_resourceconfig() {
    echo '{"current_host": "algo-1", "hosts": [' >"$WORK/rc.json"
    expect_error 2 "rc.json: malformed JSON" env --resource-config "$WORK/rc.json"
}

case_err_current_host_not_in_hosts() {
    echo '{"current_host": "algo-9", "hosts": ["algo-1", "algo-2"]}' >"$WORK/rc.json"
    expect_error 2 "rc.json: key 'current_host' is 'algo-9', which is not in 'hosts'" env --resource-config "$WORK/rc.json"
}

case_err_empty_hosts() {
    echo '{"current_host": "algo-1", "hosts": []}' >"$WORK/rc.json"
    expect_error 2 "rc.json: key 'hosts' is empty" env --resource-config "$WORK/rc.json"
}

case_err_duplicate_hosts() {
    echo '{"current_host": "algo-1", "hosts": ["algo-1", "algo-2", "algo-1"]}' >"$WORK/rc.json"
    expect_error 2 "rc.json: key 'hosts' lists 'algo-1' more than once" env --resource-config "$WORK/rc.json"
}

case_err_hosts_without_ranks() {
    echo '{"current_host": "algo-1", "hosts": ["algo-1", "algo-2"]}' >"$WORK/rc.json"
    expect_error 2 "host 'algo-2' \(node 1\) has no ranks" env --resource-config "$WORK/rc.json"
}

case_err_hyperparameter_type() {
    echo '{"train.epochs": "ten"}' >"$WORK/hp.json"
    expect_error 2 "hp.json: key 'train.epochs': expected an integer, got 'ten'" validate --config "$SRC/configs/quickstart.yaml" --hyperparameters "$WORK/hp.json"
}

case_err_hyperparameter_config() {
    # A `config` hyperparameter is the image entry point's to resolve; sdp-train says so.
    echo '{"config": "\"lenet-mnist.yaml\"", "train.epochs": "1"}' >"$WORK/hp.json"
    expect_error 2 "hp.json: key 'config' names a job spec file, which sdp-train takes only as --config FILE; .*sagemaker-entrypoint.sh" \
      validate --hyperparameters "$WORK/hp.json"
}

case_validate_hyperparameters_only() {
    # SageMaker hyperparameters alone (JSON strings, as the SDK sends them) describe a job.
    echo '{"train.epochs": "2", "optimizer.name": "\"lamb\"", "model.hidden": "[32, 16]", "sagemaker_region": "\"eu-west-1\""}' >"$WORK/hp.json"
    expect_ok 0 validate --hyperparameters "$WORK/hp.json"
    grep -q '^# resolved job spec (defaults < - < .*hp.json < --set)' "$WORK/out" || fail "sources not named"
    grep -q 'epochs: 2$' "$WORK/out" || fail "train.epochs not applied"
    grep -q 'name: "\?lamb"\?$' "$WORK/out" || fail "optimizer.name not applied"
    grep -qF 'hidden: [32, 16]' "$WORK/out" || fail "model.hidden not applied"
    expect_error 0 "--config \(or --hyperparameters FILE for a job from hyperparameters alone\) is required" train
}

case_err_set_unknown_key() {
    expect_error 2 "--set: unknown key 'optimizer.learning_rate'" validate --config "$SRC/configs/quickstart.yaml" --set optimizer.learning_rate=0.1
}

case_err_ranks_per_node() {
    expect_error 3 "ranks_per_node = 2 does not divide the world size 3" env --set distributed.ranks_per_node=2
}

case_err_empty_spec() {
    : >"$WORK/empty.yaml"
    expect_error 2 "config file '$WORK/empty.yaml' is empty" --config "$WORK/empty.yaml"
    printf '# only a comment\n' >"$WORK/comment.yaml"
    expect_error 2 "config file '$WORK/comment.yaml' is empty" validate --config "$WORK/comment.yaml"
}

# Every shipped recipe is a valid job spec (validate reads no data), so a renamed key or a
# changed default cannot leave a config in configs/ that fails at start-up.
case_shipped_configs_validate() {
    local cfg
    for cfg in "$SRC"/configs/*.yaml; do
        expect_ok 0 validate --config "$cfg"
        grep -q '^# valid' "$WORK/out" || fail "$(basename "$cfg") is not valid: $(tail -1 "$WORK/out")"
    done
}
