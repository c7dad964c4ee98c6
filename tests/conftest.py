"""Shared fixtures: one engine on the shipped model for the whole session (loading is the slow part)."""

import pytest


@pytest.fixture(scope="session")
def engine():
    from chunlian.engine import Engine

    return Engine()


@pytest.fixture(scope="session")
def writer(engine):
    return engine.writer
