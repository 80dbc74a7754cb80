"""``python -m modelc.coremltools pytest ARGS…`` / ``python -m modelc.coremltools SCRIPT.py ARGS…``.

Runs pytest (or a script) with coremltools predicting through modelc and
believing it runs on macOS, so that coremltools' own tests predict and
compare their outputs instead of skipping.
"""

import runpy
import sys

from . import enable


def main(argv):
    if not argv:
        print("usage: python -m modelc.coremltools pytest [ARGS...] | SCRIPT.py [ARGS...]", file=sys.stderr)
        return 64
    enable(pretend_macos=True)
    if argv[0] == "pytest":
        import pytest
        return pytest.main(argv[1:])
    sys.argv = argv
    runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
