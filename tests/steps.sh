# Steps and background jobs for tests/run.sh, each timed, and the table of their minutes printed
# when the run ends, passed or not. Sourced, not run.
#
#   step NAME CMD...       run CMD in front and wait for it; the run stops if it fails.
#   job ID TITLE CMD...    start CMD in the background (its output in target/steps/ID.log); with
#                          JOB_NICE=19 before it, at the lowest CPU priority, so that it takes
#                          only the cores the steps in front leave idle; with JOB_KEEP=1, left to
#                          finish when the run stops early (an install that must not be cut off).
#   await ID               wait for a job (from the front or from another job); fails if it did.
#   steps_stop             stop every step and job still running; the run's exit calls it.
#   steps_table            the table; the run's exit prints it.
#
# Every step and job runs in a process group of its own (job control is on while it is forked,
# off otherwise, so bash prints no job notices), so stopping one stops all it started, at once. A step runs in the background and is waited for, so that a
# SIGTERM or SIGINT to the run stops it at once instead of after the step. One run at a time per
# clone (a lock), and every file a job leaves carries this run's token, so that a job left over
# from a killed run can never answer for this one.

steps_dir=$PWD/target/steps
mkdir -p "$PWD/target"
exec {steps_lock}> "$PWD/target/steps.lock"
if ! flock -n "$steps_lock"; then
  echo "another ./tests/run.sh is running in this clone (target/steps.lock)" >&2
  exit 1
fi
rm -rf "$steps_dir" && mkdir -p "$steps_dir"
steps_run="$$.$(date +%s%N)"
steps_rows=$steps_dir/rows.$steps_run
steps_seq=0
steps_groups=()
declare -A steps_titles=() steps_keep=()

# Milliseconds since the epoch (date, not EPOCHREALTIME, whose decimal point follows the locale).
steps_now() { date +%s%3N; }
steps_t0=$(steps_now)

steps_minutes() { awk -v ms="$1" 'BEGIN { printf "%.1f", ms / 60000 }'; }

# A row of the table: name, where, started (ms since the epoch), took (ms), order of starting.
# Kept in a file, since jobs and the steps' own shells add rows too.
steps_row() {
  printf '%s\t%s\t| %s | %s | %s | %s |\n' "$3" "$5" "$1" "$2" "$(steps_minutes $(($3 - steps_t0)))" \
    "$(steps_minutes "$4")" >> "$steps_rows"
}

step() {
  local name=$1 start seq pid status=0
  shift
  steps_check_jobs
  printf '\n==> %s\n' "$name"
  start=$(steps_now) seq=$((++steps_seq))
  steps_current="$name" steps_current_start=$start steps_current_seq=$seq
  set -m
  (exec {steps_lock}>&-; "$@") &
  pid=$!
  set +m
  steps_groups+=("$pid")
  wait "$pid" || status=$?
  if [ "$status" != 0 ]; then exit "$status"; fi
  steps_current=""
  steps_row "$name" front "$start" $(($(steps_now) - start)) "$seq"
}

job() {
  local name=$1 start seq
  steps_titles[$name]=$2
  steps_keep[$name]=${JOB_KEEP:-}
  shift 2
  printf '\n==> %s (in the background: target/steps/%s.log)\n' "${steps_titles[$name]}" "$name"
  start=$(steps_now) seq=$((++steps_seq))
  set -m
  (
    exec {steps_lock}>&-
    steps_where=background
    # The job's row and its status, as it ends. A TERM is an end with status 143, not the last
    # command's status.
    trap 'exit 143' TERM INT
    trap 'status=$?; steps_row "$(steps_job_title "$name" "$status")" background "$start" $(($(steps_now) - start)) "$seq"
          echo "$status" > "$steps_dir/$name.end.$steps_run"' EXIT
    if [ -n "${JOB_NICE:-}" ]; then renice -n "$JOB_NICE" -p "$BASHPID" > /dev/null; fi
    "$@"
  ) > "$steps_dir/$name.log" 2>&1 < /dev/null &
  set +m
  echo "$!" > "$steps_dir/$name.pid.$steps_run"
  steps_groups+=("$!")
}

steps_job_title() { # ID STATUS
  if [ "$2" = 0 ]; then echo "${steps_titles[$1]}"; else echo "${steps_titles[$1]} (FAILED, exit $2)"; fi
}

await() {
  local name=$1 start status="" pid
  local end=$steps_dir/$name.end.$steps_run
  start=$(steps_now)
  pid=$(cat "$steps_dir/$name.pid.$steps_run")
  until [ -s "$end" ]; do
    # A job killed outright (SIGKILL) writes no end: it is gone, and failed.
    if ! kill -0 "$pid" 2> /dev/null; then
      [ -s "$end" ] || status="gone (killed?)"
      break
    fi
    sleep 0.5
  done
  [ -n "$status" ] || status=$(cat "$end")
  if [ $(($(steps_now) - start)) -gt 2000 ]; then
    steps_row "(waiting for: ${steps_titles[$name]})" "${steps_where:-front}" "$start" $(($(steps_now) - start)) "$steps_seq"
  fi
  if [ "$status" != 0 ]; then
    printf '\n==> %s failed (%s); the end of target/steps/%s.log:\n' "${steps_titles[$name]}" "$status" "$name"
    tail -n 60 "$steps_dir/$name.log"
    return 1
  fi
}

# A job that failed stops the run at the next step, not only when it is awaited.
steps_check_jobs() {
  local end name
  for end in "$steps_dir"/*.end."$steps_run"; do
    [ -e "$end" ] || continue
    if [ "$(cat "$end")" != 0 ]; then
      name=$(basename "$end" ".end.$steps_run")
      await "$name"
    fi
  done
}

steps_stop() {
  local pid name
  # Installs are left to finish: a dpkg cut off mid-install would break every later run.
  for name in "${!steps_keep[@]}"; do
    [ -n "${steps_keep[$name]}" ] || continue
    pid=$(cat "$steps_dir/$name.pid.$steps_run" 2> /dev/null) || continue
    while kill -0 "$pid" 2> /dev/null; do sleep 0.5; done
  done
  for pid in "${steps_groups[@]}"; do kill -TERM -- "-$pid" 2> /dev/null || true; done
  # They are this shell's children: their ends (and a stopped job's row) are in before the table.
  wait "${steps_groups[@]}" 2> /dev/null || true
}

steps_table() {
  if [ -n "${steps_current:-}" ]; then
    steps_row "$steps_current (stopped here)" front "$steps_current_start" \
      $(($(steps_now) - steps_current_start)) "$steps_current_seq"
  fi
  printf '\n| step | where | started (min) | took (min) |\n|---|---|---:|---:|\n'
  # In the order they started (a job's row is added when it ends).
  if [ -s "$steps_rows" ]; then sort -s -n -k 1,1 -k 2,2 "$steps_rows" | cut -f 3-; fi
  printf '| the whole run | | 0.0 | %s |\n' "$(steps_minutes $(($(steps_now) - steps_t0)))"
}
