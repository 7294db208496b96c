"""tests/steps.sh, which tests/run.sh times and overlaps its steps with: a failure anywhere stops
the run with its log and the table, a background job at nice 19 runs at nice 19, jobs can wait for
jobs, and the run's end stops what its jobs started."""

import os
import subprocess
import textwrap
import time

STEPS = os.path.join(os.path.dirname(__file__), "..", "steps.sh")


def run(tmp_path, script):
    """`script` run by bash in tmp_path after sourcing steps.sh, as tests/run.sh does."""
    body = f"set -euo pipefail\nsource {os.path.abspath(STEPS)}\ntrap steps_table EXIT\n" + textwrap.dedent(script)
    return subprocess.run(["bash", "-c", body], cwd=tmp_path, capture_output=True, text=True, timeout=60)


def table_rows(stdout):
    return [line for line in stdout.splitlines() if line.startswith("| ") and not line.startswith("| step ")]


def test_steps_and_jobs_are_timed_in_the_order_they_started(tmp_path):
    result = run(tmp_path, """
        job slow "a slow job" sleep 1
        step "in front" true
        await slow
    """)
    assert result.returncode == 0, result.stderr
    names = [row.split("|")[1].strip() for row in table_rows(result.stdout)]
    assert names == ["a slow job", "in front", "the whole run"]
    where = [row.split("|")[2].strip() for row in table_rows(result.stdout)]
    assert where[:2] == ["background", "front"]


def test_a_failing_step_stops_the_run_and_is_named_in_the_table(tmp_path):
    result = run(tmp_path, """
        step "fine" true
        step "broken" false
        step "never" touch never-ran
    """)
    assert result.returncode != 0
    assert not (tmp_path / "never-ran").exists()
    assert any("broken (stopped here)" in row for row in table_rows(result.stdout))


def test_a_failing_job_fails_its_await_with_the_end_of_its_log(tmp_path):
    result = run(tmp_path, """
        broken() { echo "the line that says why"; false; echo "not reached"; }
        job broken "a broken job" broken
        step "waits for it" await broken
        step "never" touch never-ran
    """)
    assert result.returncode != 0
    assert "a broken job failed (exit 1)" in result.stdout
    assert "the line that says why" in result.stdout
    assert "not reached" not in result.stdout
    assert not (tmp_path / "never-ran").exists()


def test_a_job_can_wait_for_another(tmp_path):
    result = run(tmp_path, """
        job first "first" bash -c 'sleep 0.5; echo done > first.out'
        second() { await first; cat first.out > second.out; }
        job second "second" second
        await second
        await first
    """)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "second.out").read_text() == "done\n"


def test_a_niced_job_and_its_children_run_at_nice_19(tmp_path):
    result = run(tmp_path, """
        JOB_NICE=19 job niced "niced" bash -c 'ps -o ni= -p $$ > nice.out'
        job plain "plain" bash -c 'ps -o ni= -p $$ > plain.out'
        await niced
        await plain
    """)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "nice.out").read_text().strip() == "19"
    assert (tmp_path / "plain.out").read_text().strip() == "0"


def test_stopping_the_jobs_ends_their_children(tmp_path):
    marker = f"steps-test-{os.getpid()}-{time.monotonic_ns()}"
    result = run(tmp_path, f"""
        job sleeper "sleeper" bash -c 'exec -a {marker} sleep 30'
        sleep 0.5
        steps_stop_jobs
    """)
    assert result.returncode == 0, result.stdout + result.stderr
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert left.stdout == "", f"left running: {left.stdout}"
