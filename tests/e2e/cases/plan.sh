# shellcheck shell=bash
# `sdp-train plan` (docs/guides/plan.md): its errors, its figures, and its prediction against a short
# measured run on 2 local ranks. Sourced by cli_test.sh (see config.sh).

plan_job() {  # a LeNet-5 job on synthetic data: $1 training steps on 2 ranks
    echo --config "$SRC/configs/lenet-mnist.yaml" --set data.format=synthetic --set data.batch_size=64 \
      --set data.synthetic.train_samples=$(($1 * 128)) --set train.epochs=1 --set train.log_every=8 \
      --set train.eval_every_epochs=0 --set checkpoint.resume=never --set output.progress=lines
}

case_plan_bad_input() {
    # shellcheck disable=SC2046
    expect_error 2 "--instance: 'p9.huge' is not in .*instances.yaml \(known: .*p4d.24xlarge" \
      plan $(plan_job 16) --instance p9.huge --nodes 1,2
    # shellcheck disable=SC2046
    expect_error 2 '--nodes: a node count must be at least 1, got 0' plan $(plan_job 16) --nodes 0,2 --link-gbps 10
    # shellcheck disable=SC2046
    expect_error 0 'no network for more than one node: give --instance' plan $(plan_job 16) --nodes 1,4
    # A compute file made for another model (written here by the command itself).
    # shellcheck disable=SC2046
    expect_ok 0 plan $(plan_job 16) --set model.name=mlp --nodes 1 --steps 2 --warmup 1 --save-compute "$WORK/mlp.json"
    # shellcheck disable=SC2046
    expect_error 2 "--compute: .*mlp.json was measured for model 'mlp', the job trains 'lenet5'" \
      plan $(plan_job 16) --compute "$WORK/mlp.json" --nodes 1,2 --link-gbps 10
    echo '{"version": 1, "kind": "sdp-train compute profile"}' >"$WORK/bad.json"
    # shellcheck disable=SC2046
    expect_error 0 "bad.json: key 'model' is missing" plan $(plan_job 16) --compute "$WORK/bad.json" --nodes 1
}

case_plan_gpu_cluster_from_compute_file() {
    # The H100's measured ResNet-50 amp-fp16 step (configs/plan/compute/) plans 64 GPU nodes on
    # a machine with or without a GPU: device: cuda is named, not opened. The plan says when the
    # instance's GPU is not the one the step was measured on.
    local job=(--config "$SRC/configs/resnet50-synthetic-bench.yaml" --set data.batch_size=256 --set device=cuda
               --set precision=amp-fp16 --compute "$SRC/configs/plan/compute/resnet50-amp-fp16-b256-h100.json"
               --samples-per-epoch 1281167 --nodes 1,8,64 --json)
    expect_ok 0 plan "${job[@]}" --instance p5.48xlarge
    json_check '[r["ranks"] for r in d["rows"]] == [8, 64, 512] and d["compute"]["forward_s"] > 0'
    json_check 'all(r["images_per_s"] > 0 and 0 < r["scaling_efficiency"] <= 1 + 1e-12 for r in d["rows"])'
    json_check 'not any("the instance\x27s GPU is" in a for a in d["assumed"])'
    # NCCL's algorithms only (the ring is host-only), the casts at the GPU's assumed rate.
    json_check 'sorted(a["allreduce"] for a in d["rows"][1]["algorithms"]) == ["flat", "hierarchical"]'
    json_check 'any("casts on the GPU" in a for a in d["assumed"])'
    expect_ok 0 plan "${job[@]}" --instance p4d.24xlarge
    json_check 'any("the instance\x27s GPU is A100 40GB" in a for a in d["assumed"])'
}

case_plan_instance_costs_json() {
    # shellcheck disable=SC2046
    expect_ok 0 plan $(plan_job 16) --instance p4d.24xlarge --nodes 1,2,8 --steps 3 --warmup 1 --json
    json_check 'd["ranks_per_node"] == 8 and [r["ranks"] for r in d["rows"]] == [8, 16, 64]'
    json_check 'd["rows"][0]["images_per_s"] < d["rows"][1]["images_per_s"] < d["rows"][2]["images_per_s"]'
    json_check 'all(r["best"]["step_s"] <= min(a["step_s"] for a in r["algorithms"]) * 1.02 + 1e-15 for r in d["rows"])'
    json_check 'all(r["best"]["step_s"] <= r["job_setting"]["step_s"] + 1e-15 for r in d["rows"])'
    json_check 'all(0 < r["scaling_efficiency"] <= 1.0 + 1e-12 for r in d["rows"])'
    # Cost: the epoch's node-hours at the table's price.
    json_check 'all(abs(r["usd_per_epoch"] - r["epoch_s"] / 3600 * 32.77 * r["nodes"]) < 1e-9 for r in d["rows"])'
    json_check 'any("p4d.24xlarge" in a for a in d["assumed"])'
    # The table: one row per node count and what is not modelled.
    # shellcheck disable=SC2046
    expect_ok 0 plan $(plan_job 16) --instance p4d.24xlarge --nodes 1,2,8 --steps 3 --warmup 1
    [ "$(grep -cE '^ +(1|2|8) +(8|16|64) ' "$WORK/out")" -eq 3 ] || fail "expected 3 rows"
    grep -q '^# not modelled: contention in a shared fabric, stragglers' "$WORK/out" || fail "no 'not modelled' line"
}

# The prediction against a short measured run, both on 2 ranks of this machine, alternated 3
# times, the median ratio checked: the host's speed drifts (one run here saw 0.35 and 1.66 in
# one test), so the bound is loose; scripts/bench-plan.sh measures the model's error with
# more runs (docs/records/plan-record.md).
case_plan_predicts_two_local_ranks() {
    # shellcheck disable=SC2046
    expect_ok 2 plan $(plan_job 16) --calibrate "$WORK/cal.json"
    grep -q 'node AllReduce among 2 ranks' "$WORK/out" || fail "calibration did not measure the node phase"
    grep -qE '"machines": \{' "$WORK/cal.json" || fail "the calibration does not record its machines"
    ratios=()
    for attempt in 1 2 3; do
      # shellcheck disable=SC2046
      expect_ok 2 plan $(plan_job 48) --calibration "$WORK/cal.json" --nodes 1 --algorithms hierarchical --bucket-mb 25 --steps 20 --json
      grep -q 'nodes on machines of their own' "$WORK/out" && fail "one node on one machine is said to share it"
      predicted=$(python3 -c 'import json,re,sys; t=re.sub(r"(?m)^\[sdp-train rank [0-9]+\] .*\n?","",open(sys.argv[1]).read()); print(json.loads(t[t.index("{"):t.rindex("}")+1])["rows"][0]["best"]["step_s"])' "$WORK/out")
      # shellcheck disable=SC2046
      expect_ok 2 $(plan_job 48) --set distributed.allreduce=hierarchical --set output.metrics="$WORK/m$attempt.jsonl"
      ratios+=("$(python3 - "$WORK/m$attempt.jsonl" "$predicted" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
batch = next(l for l in lines if l.get("event") == "start")["global_batch"]
steps = [batch / l["images_per_sec"] for l in lines if l.get("event") == "train"][1:]
print(float(sys.argv[2]) / statistics.median(steps))
PY
)")
    done
    python3 -c 'import statistics,sys; r=[float(x) for x in sys.argv[1:]]; m=statistics.median(r); print("predicted/measured", r); sys.exit(0 if 0.65 <= m <= 1.35 else 1)' "${ratios[@]}" \
      || fail "predicted/measured step ${ratios[*]}: off by more than 35 %"
}

# distributed.calibration with bucket_mb: auto and allreduce: auto: the plan's choice at start,
# said in the log and the plan line, agreed by every rank (the job trains to the end); a
# missing calibration file is exit 2 naming the key.
case_plan_chosen_at_start() {
    # Two "nodes" of one rank each on this machine, so the link is measured and the choice
    # is among algorithms as well as bucket sizes.
    # shellcheck disable=SC2046
    expect_ok 2 plan $(plan_job 16) --set distributed.ranks_per_node=1 --calibrate "$WORK/cal.json"
    grep -q '^# link: .* Gbit/s each way, latency' "$WORK/out" || fail "the link was not measured"
    grep -qE '^# on cores busy computing: [0-9]+ us more a message; ms of compute lost per MB AllReduced: flat [0-9.]+, ring [0-9.]+, hierarchical [0-9.]+; the link.s rate reached: flat [0-9]+ %, ring [0-9]+ %, hierarchical [0-9]+ %$' \
      "$WORK/out" || fail "the cost of sharing cores with compute was not measured"
    # Those two nodes are one machine: the calibration and a plan from it say so.
    grep -qE '^# machines: 2 nodes on 1 machine, 2 ranks on its [0-9]+ CPU\(s\)' "$WORK/out" ||
      fail "the calibration does not say its nodes shared a machine"
    # shellcheck disable=SC2046
    expect_ok 0 plan $(plan_job 16) --calibration "$WORK/cal.json" --nodes 1,2 --steps 3 --warmup 1
    grep -qE '^# assumed: nodes on machines of their own, though .*cal.json was measured with 2 nodes on 1 machine, 2 ranks on its [0-9]+ CPU\(s\): its figures hold what those nodes share there' \
      "$WORK/out" || fail "the plan does not say its calibration's nodes shared a machine"
    # shellcheck disable=SC2046
    expect_ok 2 $(plan_job 16) --set distributed.ranks_per_node=1 --set distributed.bucket_mb=auto \
      --set distributed.calibration="$WORK/cal.json"
    grep -qE 'buckets of auto \(auto: the plan.s choice at start from .*cal.json\)' "$WORK/out" ||
      fail "the plan line does not say the buckets are chosen at start"
    grep -qE '^\[sdp-train rank 0\] info: plan: (flat|ring|hierarchical|auto), (buckets of [0-9.]+ MB|one bucket): predicted [0-9.]+ ms a step against [0-9.]+ ms for auto with buckets of 25 MB \(.*cal.json of 20[0-9-]+, 5 measured steps(; (no overlap of communication and backward: the rank.s [0-9]+ compute thread\(s\) fill its [0-9]+ CPU\(s\), .*|communication overlaps backward on the cores it computes on \(the rank.s [0-9]+ compute thread\(s\) fill its [0-9]+ CPU\(s\)\), each message waiting [0-9]+ us more, each MB AllReduced taking flat [0-9.]+, ring [0-9.]+, hierarchical [0-9.]+ ms from it, the link at flat [0-9]+ %, ring [0-9]+ %, hierarchical [0-9]+ % of its rate \(calibrated with those cores busy\)))?\)$' "$WORK/out" ||
      fail "no 'plan:' line with the choice and its figures"
    grep -q '^\[done\] steps=16' "$WORK/out" || fail "the job did not train to the end"
    # shellcheck disable=SC2046
    expect_error 2 "key 'distributed.calibration': calibration file '.*nowhere.json' not found" \
      $(plan_job 16) --set distributed.bucket_mb=auto --set distributed.calibration="$WORK/nowhere.json"
}
