#!/usr/bin/env bash
# The one command for a session lent a GPU: at most 9.5 minutes on one GPU, it runs
#   1. tests/test_cuda.py: the --device cuda path against the CPU, a bf16 step of every
#      model, a steady step of every model that never waits for the GPU, a run that resumes
#      bit-exactly (at most 110 s; 24 s on an H100 before the steady steps were added);
#   2. one steady training step of every trained model at its recipe's sizes: ops, kernels,
#      syncs, host and device time (bench/step_profile.py, at most 70 s) ->
#      records/step_profile.json;
#   3. every trained model's training rate at its recipe's (the paper's) sizes and batch, in
#      fp32 and bf16, the total rate of 3 runs sharing the GPU (nbow, single_lstm, esim,
#      csran: what reproduce --jobs N --device cuda packs), and one epoch of the TrecQA
#      ladder's paper-size CSRAN
#      (bench/gpu_rates.py: at most 120 s of rates and 240 s of epoch; on an H100 the
#      rates took about 60 s and the epoch 194 s, bf16, 2026-11-27),
# and appends the run to bench/records/gpu_rates.json, where the plan finds it
# (pairrepro report all --plan --gpu h100: each GPU figure "measured" or a "lower bound").
#
#   bench/gpu_check.sh                  # on the GPU machine, from the repository root
#   bench/gpu_check.sh --dry-run        # the same steps on this CPU at tiny sizes (seconds)
#   bench/gpu_check.sh --records DIR    # gpu_rates.json in DIR instead of bench/records
#
# On a GPU machine whose python3 holds torch but not the rest of pairrepro's needs (pydantic,
# pydantic-core, annotated-types, typing-inspection, typing-extensions, ...): bring their
# wheels at this venv's versions (pip download) and pip install them there first. For the
# epoch, bring a data home holding TrecQA prepared: mkdir -p .gpu_home/prepared && cp -r
# ~/.cache/pairrepro/prepared/trecqa-clean .gpu_home/prepared/ (with /.gpu_home/ in
# .git/info/exclude); .gpu_home is used when present and PAIRREPRO_HOME is unset.
# Exit: 0 every step passed; 1 a step failed (named at the end); 2 a wrong option or a
# package missing here.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
dry=()
records=bench/records
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=(--dry-run) ;;
    --records)
      case "${2:-}" in
        "" | -*) echo "gpu_check.sh: --records needs a folder (--records DIR)" >&2; exit 2 ;;
      esac
      records=$2; shift ;;
    -h | --help) sed -n '2,/^# package missing here/p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown option $1 (--dry-run, --records DIR, --help)" >&2; exit 2 ;;
  esac
  shift
done
py=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [ -d .gpu_home ] && [ -z "${PAIRREPRO_HOME:-}" ]; then
  export PAIRREPRO_HOME="$PWD/.gpu_home"
fi
if ! missing=$("$py" -c "import pairrepro.cli.app, pairrepro.train.preflight, pytest" 2>&1); then
  echo "gpu_check.sh: $py cannot import pairrepro's needs here: ${missing##*$'\n'}" >&2
  echo "  pip install the missing package (from a wheel where the machine is offline), or set" \
       "PYTHON to an interpreter that has them" >&2
  exit 2
fi

failed=()
step() {  # step NAME SECONDS COMMAND...: run it under a time limit, note a failure
  local name=$1 limit=$2 start=$SECONDS rc
  shift 2
  echo "== $name (at most $limit s)"
  timeout "$limit" "$@"
  rc=$?
  echo "== $name: exit $rc after $((SECONDS - start)) s"
  [ "$rc" -eq 0 ] || failed+=("$name (exit $rc$([ "$rc" -eq 124 ] && echo ', out of time'))")
}

step "tests/test_cuda.py" 110 "$py" -m pytest -q -p no:cacheprovider tests/test_cuda.py
if [ ${#dry[@]} -gt 0 ]; then
  profile=(--device cpu --models nbow --set train.batch_size=4)
else
  profile=(--device cuda --budget 55 --record --records "$records")
fi
step "step profile" 70 "$py" bench/step_profile.py "${profile[@]}"
step "rates and one epoch" 390 "$py" bench/gpu_rates.py "${dry[@]}" --budget 120 \
  --epoch-timeout 240 --records "$records"

if [ ${#failed[@]} -gt 0 ]; then
  printf 'gpu_check.sh: failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "gpu_check.sh: every step passed (${SECONDS} s); records: $records/gpu_rates.json," \
     "$records/step_profile.json"
