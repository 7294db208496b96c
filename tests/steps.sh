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
# Milliseconds since the epoch.
steps_now() { echo $((${EPOCHREALTIME/./} / 1000)); }
steps_t0=$(steps_now)
steps_rows=()
declare -A steps_pids=() steps_titles=()

steps_minutes() { awk -v ms="$1" 'BEGIN { printf "%.1f", ms / 60000 }'; }

steps_row() { # name, where, started (ms since the epoch), took (ms)
  # The start in ms first, to sort by; cut off when printed.
  steps_rows+=("$(printf '%s\t| %s | %s | %s | %s |' "$3" "$1" "$2" "$(steps_minutes $(($3 - steps_t0)))" "$(steps_minutes "$4")")")
}

step() {
  local name=$1 start
  shift
  printf '\n==> %s\n' "$name"
  start=$(steps_now)
  steps_current="$name" steps_current_start=$start
  "$@"
  steps_current=""
  steps_row "$name" front "$start" $(($(steps_now) - start))
}

job() {
  local name=$1 start
  steps_titles[$name]=$2
  shift 2
  printf '\n==> %s (in the background: target/steps/%s.log)\n' "${steps_titles[$name]}" "$name"
  start=$(steps_now)
  (
    # The job's end, its status and its times, for await (here or in another job) and the table.
    trap 'echo "$? $start $(steps_now)" > "$steps_dir/$name.end"' EXIT
    if [ -n "${JOB_NICE:-}" ]; then renice -n "$JOB_NICE" -p "$BASHPID" > /dev/null; fi
    "$@"
  ) > "$steps_dir/$name.log" 2>&1 &
  steps_pids[$name]=$!
}

await() {
  local name=$1 start status started ended
  start=$(steps_now)
  until [ -s "$steps_dir/$name.end" ]; do sleep 0.5; done
  read -r status started ended < "$steps_dir/$name.end"
  # Only the shell that started the job reaps it and puts it in the table.
  if [ -n "${steps_pids[$name]:-}" ] && [ "$BASHPID" = "$$" ]; then
    wait "${steps_pids[$name]}" 2> /dev/null || true
    unset "steps_pids[$name]"
    steps_row "${steps_titles[$name]}" background "$started" $((ended - started))
    if [ $(($(steps_now) - start)) -gt 2000 ]; then
      steps_row "(waiting for: ${steps_titles[$name]})" front "$start" $(($(steps_now) - start))
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
    steps_row "$steps_current (stopped here)" front "$steps_current_start" $(($(steps_now) - steps_current_start))
  fi
  printf '\n| step | where | started (min) | took (min) |\n|---|---|---:|---:|\n'
  # In the order they started (a job's row is added when it is awaited).
  if [ ${#steps_rows[@]} -gt 0 ]; then printf '%s\n' "${steps_rows[@]}" | sort -s -n -k 1,1 | cut -f 2-; fi
  printf '| the whole run | | 0.0 | %s |\n' "$(steps_minutes $(($(steps_now) - steps_t0)))"
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
