#!/usr/bin/env bash
# dockerfile_context_test.py must fail, naming scripts/sdp-launch, on a Dockerfile that copies
# the launcher only after the build step (as main's did at 664eb53).
set -u
SRC=$1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
grep -v '^COPY scripts/sdp-launch scripts/$' "$SRC/Dockerfile" >"$WORK/Dockerfile"
cmp -s "$WORK/Dockerfile" "$SRC/Dockerfile" && { echo "FAIL: Dockerfile has no 'COPY scripts/sdp-launch scripts/' line to remove"; exit 1; }
python3 "$SRC/tests/image/dockerfile_context_test.py" "$SRC" "$WORK/Dockerfile" >"$WORK/out" 2>&1
status=$?
cat "$WORK/out"
[ $status -eq 1 ] || { echo "FAIL: the guard exited $status on a Dockerfile without the launcher's copy, expected 1"; exit 1; }
grep -qE '^FAIL .*: the build step needs scripts/sdp-launch, which the Dockerfile copies only after it \(line [0-9]+\)$' "$WORK/out" ||
  { echo "FAIL: the guard did not name scripts/sdp-launch and the line that copies it"; exit 1; }
echo "PASS: the guard names scripts/sdp-launch"
