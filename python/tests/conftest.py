"""Shared setup: the in-repo package and library, a private model cache, the fixtures."""

import atexit
import os
import pathlib
import shutil
import sys
import tempfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
if "MODELC_CACHE" not in os.environ:
    os.environ["MODELC_CACHE"] = tempfile.mkdtemp(prefix="modelc-pytest-cache-")
    atexit.register(shutil.rmtree, os.environ["MODELC_CACHE"], True)

FIXTURES = REPO / "Fixtures"


@pytest.fixture
def fixtures() -> pathlib.Path:
    return FIXTURES


def modelc_binary():
    """The Swift CLI built beside the library, if any."""
    for configuration in ("release", "debug"):
        path = REPO / ".build" / configuration / "modelc"
        if path.is_file():
            return path
    return None
