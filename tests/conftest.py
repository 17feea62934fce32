"""Shared pytest configuration."""

import os

import pytest

#: The most workers `pytest -n auto` starts (tests/README command 2): past this the per-worker collection
#: (~40 s) and the session fixtures each worker computes again cost more than the extra cores win.
MAX_AUTO_WORKERS = 8


def pytest_addoption(parser):
    parser.addoption("--fuzz", type=int, default=0, metavar="N",
                     help="run the fuzz tests (tests/test_fuzz.py) with N times their CI number of examples")


def pytest_configure(config):
    config.addinivalue_line("markers", "tosa(version): the TOSA specification version a test targets")
    if config.getoption("--fuzz", 0):
        os.environ["SKRIPTND_FUZZ"] = str(config.getoption("--fuzz"))


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pytest-xdist): one worker per CPU this process may use, at most MAX_AUTO_WORKERS; on a
    single CPU none (0: the tests run in this process, as without -n, instead of in one worker process that
    would only add its start-up and a second collection). PYTEST_XDIST_AUTO_NUM_WORKERS still decides."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return 0 if cpus < 2 else min(cpus, MAX_AUTO_WORKERS)
