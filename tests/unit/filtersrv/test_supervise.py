"""The worker's supervisor (outside the PID namespace) ends the way its worker ended, and tells a kill at the CPU
limit (reported as SIGXCPU) from any other SIGKILL by the worker's own word, not by comparing CPU times
(``sievemq.filtersrv.lockdown.supervise``). Real processes: the test forks a supervisor and its worker."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from sievemq.filtersrv.lockdown import supervise


def _supervised(worker: Callable[[int], None]) -> int:
    """Fork a supervisor whose worker runs ``worker(cpu_flag_write_end)``; the supervisor's wait status."""
    pid = os.fork()
    if pid == 0:  # the supervisor
        try:
            lifeline_r, lifeline_w = os.pipe()
            flag_r, flag_w = os.pipe()
            child = os.fork()
            if child == 0:  # the worker
                os.close(flag_r)
                worker(flag_w)
                os._exit(0)
            os.close(flag_w)
            os.close(lifeline_r)
            supervise(child, lifeline_w, 60, 0, flag_r)
        finally:
            os._exit(99)
    _, status = os.waitpid(pid, 0)
    return status


def _killed(flag_w: int) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _killed_at_the_cpu_limit(flag_w: int) -> None:
    os.write(flag_w, b"x")  # what the worker's SIGXCPU handler does before it asks for the SIGKILL
    os.kill(os.getpid(), signal.SIGKILL)


def _exits(flag_w: int) -> None:
    os._exit(3)


def test_a_sigkill_that_is_not_the_cpu_limit_is_passed_on_as_a_sigkill() -> None:
    status = _supervised(_killed)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status


def test_a_sigkill_at_the_cpu_limit_is_reported_as_sigxcpu_whatever_the_cpu_time() -> None:
    status = _supervised(_killed_at_the_cpu_limit)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU, status


def test_an_exit_code_is_passed_on() -> None:
    status = _supervised(_exits)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 3, status
