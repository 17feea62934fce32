"""Shared pytest configuration."""


def pytest_configure(config):
    config.addinivalue_line("markers", "tosa(version): the TOSA specification version a test targets")
