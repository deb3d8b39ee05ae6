#!/usr/bin/env bash
# Feeds a channel the way SageMaker's Pipe mode does: FIFOs CHANNEL_0, CHANNEL_1, ..., one per
# pass over the data, each made once the last one has been read to its end, each carrying the
# channel's files back to back (sorted by name, as S3 lists keys). For tests and
# scripts/sagemaker-local.sh --input-mode pipe; a real job gets its FIFOs from SageMaker.
#
#   scripts/sagemaker-pipe-feed.sh [--passes N] CHANNEL FILE_OR_DIR...
#     CHANNEL       the channel's path: FIFOs CHANNEL_0, CHANNEL_1, ... are made beside it
#     --passes N    stop after N passes (default: until killed)
# A reader that stops mid-pass (the job ended) ends the feeding quietly.
set -euo pipefail
PASSES=-1
if [ "${1:-}" = "--passes" ]; then PASSES=$2; shift 2; fi
[ $# -ge 2 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
CHANNEL=$1; shift
FILES=()
for f in "$@"; do
  if [ -d "$f" ]; then
    while IFS= read -r g; do FILES+=("$g"); done < <(find "$f" -maxdepth 1 -type f ! -name '.*' ! -name '*.idx' | sort)
  else
    FILES+=("$f")
  fi
done
[ ${#FILES[@]} -gt 0 ] || { echo "sagemaker-pipe-feed: no file to feed" >&2; exit 2; }
pass=0
while [ "$PASSES" -lt 0 ] || [ $pass -lt "$PASSES" ]; do
  fifo=${CHANNEL}_$pass
  rm -f "$fifo"
  mkfifo "$fifo"
  cat "${FILES[@]}" >"$fifo" 2>/dev/null || exit 0  # the reader closed it: the job is over
  pass=$((pass + 1))
done
