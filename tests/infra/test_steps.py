"""tests/steps.sh, with which tests/run.sh times and overlaps its steps: a failure anywhere stops
the run, named, with the table; a signal stops it at once, and everything it started; a job at
nice 19 runs at nice 19; jobs wait for jobs; a job left over from another run never answers for
this one; one run at a time per clone."""

import os
import signal
import subprocess
import textwrap
import time

import pytest

STEPS = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "steps.sh"))


def script(body):
    """A run as tests/run.sh makes one: steps.sh sourced, stopped and tabled on exit."""
    return (
        "set -euo pipefail\n"
        f"source {STEPS}\n"
        "trap 'steps_stop; steps_table' EXIT\n"
        "trap 'exit 143' TERM INT\n" + textwrap.dedent(body)
    )


def run(tmp_path, body, timeout=60):
    return subprocess.run(["bash", "-c", script(body)], cwd=tmp_path, capture_output=True, text=True, timeout=timeout)


def start(tmp_path, body):
    return subprocess.Popen(["bash", "-c", script(body)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def rows(stdout):
    return [line.split("|")[1:-1] for line in stdout.splitlines() if line.startswith("| ") and not line.startswith("| step | where |")]


def names(stdout):
    return [row[0].strip() for row in rows(stdout)]


def running(marker):
    """Processes whose command line starts with `marker` (`exec -a` names them so)."""
    return subprocess.run(["pgrep", "-f", f"^{marker}"], capture_output=True, text=True).stdout.split()


@pytest.fixture
def marker():
    """A unique word to put in a command line, to find what a run left running."""
    word = f"steps-test-{os.getpid()}-{time.monotonic_ns()}"
    yield word
    for pid in running(word):
        os.kill(int(pid), signal.SIGKILL)


def test_rows_are_in_the_order_things_started_even_in_the_same_millisecond(tmp_path):
    # A job's row is written when it ends, after the step that started later: 20 pairs, so that
    # some start in the same millisecond.
    body = "".join(f'job j{i} "job {i}" true\nstep "step {i}" true\nawait j{i}\n' for i in range(20))
    result = run(tmp_path, body)
    assert result.returncode == 0, result.stdout + result.stderr
    expected = [name for i in range(20) for name in (f"job {i}", f"step {i}")] + ["the whole run"]
    assert names(result.stdout) == expected
    assert [row[1].strip() for row in rows(result.stdout)][:2] == ["background", "front"]


def test_a_failing_step_stops_the_run_and_is_named_in_the_table(tmp_path):
    result = run(tmp_path, """
        step "fine" true
        step "broken" false
        step "never" touch never-ran
    """)
    assert result.returncode == 1
    assert not (tmp_path / "never-ran").exists()
    assert "broken (stopped here)" in names(result.stdout)


def test_a_failing_job_fails_its_await_with_the_end_of_its_log(tmp_path):
    result = run(tmp_path, """
        broken() { echo "the line that says why"; false; echo "not reached"; }
        job broken "a broken job" broken
        step "waits for it" await broken
        step "never" touch never-ran
    """)
    assert result.returncode != 0
    assert "a broken job failed (1)" in result.stdout
    assert "the line that says why" in result.stdout
    assert "not reached" not in result.stdout
    assert "a broken job (FAILED, exit 1)" in names(result.stdout)
    assert not (tmp_path / "never-ran").exists()


def test_a_failed_job_stops_the_run_at_the_next_step_before_anyone_awaits_it(tmp_path):
    result = run(tmp_path, """
        job broken "a broken job" false
        sleep 0.5
        step "next" true
        step "never" touch never-ran
        await broken
    """)
    assert result.returncode != 0
    assert "a broken job failed (1)" in result.stdout
    assert not (tmp_path / "never-ran").exists()


def test_a_job_killed_outright_fails_its_await_instead_of_hanging(tmp_path):
    result = run(tmp_path, """
        job victim "a victim" sleep 30
        sleep 0.5
        kill -KILL "$(cat target/steps/victim.pid.$steps_run)"
        step "waits for it" await victim
    """, timeout=20)
    assert result.returncode != 0
    assert "a victim failed (gone (killed?))" in result.stdout


def test_a_job_stopped_by_sigterm_fails_with_143_not_its_last_status(tmp_path):
    result = run(tmp_path, """
        job victim "a victim" bash -c 'true; sleep 30'
        sleep 0.5
        kill -TERM -- "-$(cat target/steps/victim.pid.$steps_run)"
        step "waits for it" await victim
    """, timeout=20)
    assert result.returncode != 0
    assert "a victim failed (143)" in result.stdout


def test_an_end_left_by_another_run_does_not_answer_for_this_one(tmp_path):
    result = run(tmp_path, """
        job j "this run's job" bash -c 'sleep 1; false'
        echo 0 > target/steps/j.end.another-run
        step "waits for it" await j
    """)
    assert result.returncode != 0
    assert "this run's job failed (1)" in result.stdout


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


def test_a_signal_stops_the_run_at_once_with_what_its_step_and_jobs_started(tmp_path, marker):
    process = start(tmp_path, f"""
        job sleeper "a job" bash -c 'exec -a {marker}-job sleep 60'
        serve() {{ bash -c 'exec -a {marker}-server sleep 60' & sleep 60; }}
        step "a step with a server" serve
    """)
    deadline = time.monotonic() + 10
    while len(running(marker)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(running(marker)) == 2
    process.send_signal(signal.SIGTERM)
    started = time.monotonic()
    out, _ = process.communicate(timeout=15)
    assert time.monotonic() - started < 5
    assert process.returncode == 143
    assert "a step with a server (stopped here)" in names(out)
    time.sleep(0.3)
    assert running(marker) == []


def test_a_failed_step_stops_what_it_started(tmp_path, marker):
    result = run(tmp_path, f"""
        serve() {{ bash -c 'exec -a {marker} sleep 60' & sleep 0.5; false; }}
        step "a step with a server" serve
    """)
    assert result.returncode == 1
    time.sleep(0.3)
    assert running(marker) == []


def test_an_install_is_left_to_finish_when_the_run_stops_early(tmp_path):
    result = run(tmp_path, """
        JOB_KEEP=1 job install "an install" bash -c 'sleep 1; touch installed'
        job other "another job" sleep 30
        step "broken" false
    """)
    assert result.returncode == 1
    assert (tmp_path / "installed").exists()
    assert "another job (FAILED, exit 143)" in names(result.stdout)


def test_one_run_at_a_time_in_a_clone(tmp_path):
    first = start(tmp_path, 'step "long" sleep 3\n')
    time.sleep(1)
    second = run(tmp_path, 'step "never" touch never-ran\n')
    assert second.returncode == 1
    assert "another ./tests/run.sh is running in this clone" in second.stderr
    assert not (tmp_path / "never-ran").exists()
    first.communicate(timeout=10)
    assert first.returncode == 0
