"""Only the cffi hook lives here; all project metadata is in pyproject.toml."""

from setuptools import setup

setup(cffi_modules=["core_c/build_ffi.py:ffibuilder"])
