# Steps and background jobs for tests/run.sh, each timed, and the table of their minutes printed
# when the run ends (passed or not). Sourced, not run.
#
#   step NAME CMD...   run CMD in front; the run stops if it fails.
#   job ID TITLE CMD...  start CMD in the background (output in target/steps/ID.log); with
#                      JOB_NICE=19 in front of it, at the lowest CPU priority, so that it only
#                      takes the cores the steps in front leave idle.
#   await ID           wait for a job: its log and a stop if it failed. Jobs may await jobs.
#   steps_table        the table (also printed on exit).

# Absolute: a job may change directory.
steps_dir=$PWD/target/steps
rm -rf "$steps_dir" && mkdir -p "$steps_dir"
steps_t0=$(date +%s)
steps_rows=()
declare -A steps_pids=() steps_titles=()

steps_minutes() { awk -v s="$1" 'BEGIN { printf "%.1f", s / 60 }'; }

steps_row() { # name, where, started (s since t0), took (s)
  steps_rows+=("$(printf '| %s | %s | %s | %s |' "$1" "$2" "$(steps_minutes "$3")" "$(steps_minutes "$4")")")
}

step() {
  local name=$1 start
  shift
  printf '\n==> %s\n' "$name"
  start=$(date +%s)
  steps_current="$name" steps_current_start=$start
  "$@"
  steps_current=""
  steps_row "$name" front $((start - steps_t0)) $(($(date +%s) - start))
}

job() {
  local name=$1
  steps_titles[$name]=$2
  shift 2
  printf '\n==> %s (in the background: target/steps/%s.log)\n' "${steps_titles[$name]}" "$name"
  (
    start=$(date +%s)
    # The job's end, its status and its times, for await (here or in another job) and the table.
    trap 'echo "$? $start $(date +%s)" > "$steps_dir/$name.end"' EXIT
    if [ -n "${JOB_NICE:-}" ]; then renice -n "$JOB_NICE" -p "$BASHPID" > /dev/null; fi
    "$@"
  ) > "$steps_dir/$name.log" 2>&1 &
  steps_pids[$name]=$!
}

await() {
  local name=$1 start status started ended
  start=$(date +%s)
  until [ -s "$steps_dir/$name.end" ]; do sleep 0.5; done
  read -r status started ended < "$steps_dir/$name.end"
  if [ -n "${steps_pids[$name]:-}" ]; then
    wait "${steps_pids[$name]}" 2> /dev/null || true
    unset "steps_pids[$name]"
    steps_row "${steps_titles[$name]}" background $((started - steps_t0)) $((ended - started))
    if [ $(($(date +%s) - start)) -gt 2 ]; then
      steps_row "(waiting for it)" front $((start - steps_t0)) $(($(date +%s) - start))
    fi
  fi
  if [ "$status" != 0 ]; then
    printf '\n==> %s failed (exit %s); the end of target/steps/%s.log:\n' "${steps_titles[$name]:-$name}" "$status" "$name"
    tail -n 60 "$steps_dir/$name.log"
    return 1
  fi
}

steps_table() {
  if [ -n "${steps_current:-}" ]; then
    steps_row "$steps_current (stopped here)" front $((steps_current_start - steps_t0)) $(($(date +%s) - steps_current_start))
  fi
  printf '\n| step | where | started (min) | took (min) |\n|---|---|---:|---:|\n'
  printf '%s\n' "${steps_rows[@]}"
  printf '| the whole run | | 0.0 | %s |\n' "$(steps_minutes $(($(date +%s) - steps_t0)))"
}

# A job's whole process tree, children first (a job's commands run in its subshell's children).
steps_kill_tree() {
  local child
  for child in $(pgrep -P "$1" 2> /dev/null); do steps_kill_tree "$child"; done
  kill "$1" 2> /dev/null || true
}

steps_stop_jobs() {
  local name
  for name in "${!steps_pids[@]}"; do steps_kill_tree "${steps_pids[$name]}"; done
}
