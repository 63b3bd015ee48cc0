#!/usr/bin/env bash
# configs/small.yaml (100M parameters) on one GPU: rows original, oracle, dfsu-loop and undo
# (the loop's distilled copy), two seeds side by side, each in its own session (setsid), so
# that a caller with a per-command time limit can start them and collect them later.
#
#   bash benchmarks/gpu_small.sh start [OUT] [SEED ...]   # launch (default OUT /tmp/gpu_small,
#                                                          # seeds 0 1) and return
#   bash benchmarks/gpu_small.sh wait [OUT] [SECONDS]     # wait for both (default 540 s),
#                                                          # then print the table
#   bash benchmarks/gpu_small.sh table [OUT]              # print what is finished
#   bash benchmarks/gpu_small.sh run [OUT] [SEED ...]     # start, then wait
#
# ROWS and CONFIG override the rows and the config; extra settings go in SETTINGS, e.g.
# SETTINGS="evaluation.attacks=[relearn:60]" (default: [lens,mia,relearn:60]). Runs `python -m dfsu.cli`, so
# PYTHONPATH=src is enough where the package is not installed (Faker, rapidfuzz and
# python-crfsuite must be importable: install their wheels first where the image lacks them).
# The table: each seed's stage seconds, tokens/s and MFU (RUN/profile.json), the wall time,
# and the rows' E-Hit, retain_EM, perplexity, NLI, garbled and the attacks' figures
# (RUN/results.json); gpu_small.py prints it.
set -euo pipefail

cmd=${1:-run}
out=${2:-/tmp/gpu_small}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROWS=${ROWS:-original,oracle,dfsu-loop,undo}
CONFIG=${CONFIG:-small}
SETTINGS=${SETTINGS:-evaluation.attacks=[lens,mia,relearn:60]}

start() {
    local seeds=("$@")
    [ ${#seeds[@]} -gt 0 ] || seeds=(0 1)
    mkdir -p "$out"
    printf '%s\n' "${seeds[@]}" > "$out/seeds"
    for seed in "${seeds[@]}"; do
        rm -f "$out/seed$seed.done"
        local run="$out/seed$seed"
        # shellcheck disable=SC2086
        setsid nohup bash -c "started=\$(date +%s); python -m dfsu.cli --quiet run $CONFIG \
            --out '$run' --rows '$ROWS' seed=$seed $SETTINGS > '$out/seed$seed.log' 2>&1; \
            echo \"\$? \$(( \$(date +%s) - started ))\" > '$out/seed$seed.done'" \
            > /dev/null 2>&1 < /dev/null &
        echo "seed $seed: $run (log $out/seed$seed.log)"
    done
}

wait_for() {
    local limit=${1:-540} waited=0
    [ -f "$out/seeds" ] || { echo "$out: nothing started (no $out/seeds)" >&2; return 1; }
    while true; do
        local pending=0
        while read -r seed; do
            [ -f "$out/seed$seed.done" ] || pending=$((pending + 1))
        done < "$out/seeds"
        [ "$pending" -eq 0 ] && break
        if [ "$waited" -ge "$limit" ]; then
            echo "$pending run(s) still going after ${limit} s: call 'wait' or 'table' again"
            break
        fi
        sleep 10
        waited=$((waited + 10))
    done
}

case "$cmd" in
    start) shift 2 || shift $#; start "$@" ;;
    wait) wait_for "${3:-540}"; python "$here/gpu_small.py" "$out" ;;
    table) python "$here/gpu_small.py" "$out" ;;
    run) shift 2 || shift $#; start "$@"; wait_for 540; python "$here/gpu_small.py" "$out" ;;
    *) echo "usage: $0 start|wait|table|run [OUT] ..." >&2; exit 2 ;;
esac
