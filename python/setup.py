"""Tags the wheel for the platform: it carries libmodelc.so, a native library, and the
Swift runtime it loads (modelc/_runtime/, `make wheel`).

The package itself is pure Python over ctypes, so any CPython 3 can use the
wheel (``py3-none``), but only on the machine kind the library was built for
(``linux_x86_64``, ``linux_aarch64``, …).
"""
from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel


class PlatformWheel(bdist_wheel):
    def finalize_options(self) -> None:
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(cmdclass={"bdist_wheel": PlatformWheel})
