"""Shared pytest configuration."""

import os


def pytest_addoption(parser):
    parser.addoption("--fuzz", type=int, default=0, metavar="N",
                     help="run the fuzz tests (tests/test_fuzz.py) with N times their CI number of examples")


def pytest_configure(config):
    config.addinivalue_line("markers", "tosa(version): the TOSA specification version a test targets")
    if config.getoption("--fuzz", 0):
        os.environ["SKRIPTND_FUZZ"] = str(config.getoption("--fuzz"))
