"""The package's PEP 517 build backend: maturin, plus the C interface in the wheel.

maturin builds one Rust library per wheel, the extension module ``rosetree._core``. This
backend first builds the C interface (the crate ``rosetree-capi``) with cargo, in the same
target directory and release profile, so that the core crate compiled for it is reused, and
stages it inside the Python package, where ``[tool.maturin] include`` picks it up::

    python/rosetree/include/rosetree.h           the header (rust/capi/include/rosetree.h)
    python/rosetree/lib/librosetree_c.so         the shared library (.dylib on macOS, a
                                                 DLL and its import library on Windows)
    python/rosetree/lib/pkgconfig/rosetree.pc    its pkg-config file, relative to itself

``rosetree.get_include()``, ``rosetree.get_library_dir()`` and
``rosetree.get_pkg_config_dir()`` return these directories once installed. Every other hook
is maturin's own. ``pip wheel .``, ``pip install .`` and ``python -m build`` come here;
``maturin build`` alone does not, and packs whatever was staged last.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import maturin

# maturin's hooks, unchanged but for the two that build a wheel.
build_sdist = maturin.build_sdist
get_requires_for_build_editable = maturin.get_requires_for_build_editable
get_requires_for_build_sdist = maturin.get_requires_for_build_sdist
get_requires_for_build_wheel = maturin.get_requires_for_build_wheel
prepare_metadata_for_build_editable = maturin.prepare_metadata_for_build_editable
prepare_metadata_for_build_wheel = maturin.prepare_metadata_for_build_wheel

__all__ = [
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_editable",
    "prepare_metadata_for_build_wheel",
    "stage_c_interface",
]

CRATE = "rosetree-capi"
LIBRARY = "rosetree_c"  # the [lib] name: librosetree_c.so
SHARED_SUFFIXES = (".so", ".dylib", ".dll")
IMPORT_LIBRARY = ".dll.lib"  # MSVC's import library of the DLL, for linking against it


def _pc_file(version: str) -> str:
    """``rosetree.pc`` for the staged layout: every path relative to the file itself."""
    return (
        # lib/pkgconfig/rosetree.pc: the package directory is two levels up.
        "prefix=${pcfiledir}/../..\n"
        "includedir=${prefix}/include\n"
        "libdir=${prefix}/lib\n"
        "\n"
        "Name: rosetree\n"
        "Description: Bayesian rose trees, Kingman's coalescent and Pitman-Yor diffusion "
        "trees (C interface)\n"
        f"Version: {version}\n"
        "Cflags: -I${includedir}\n"
        "Libs: -L${libdir} -l" + LIBRARY + "\n"
    )


def _cargo_build(root: Path) -> tuple[list[Path], str]:
    """Build the C interface in release mode; its shared library's files and version."""
    cargo = os.environ.get("CARGO", "cargo")
    command = [
        cargo, "build", "--release", "--locked", "--lib", "-p", CRATE,
        "--message-format=json-render-diagnostics",
    ]  # fmt: skip
    # cargo's progress and diagnostics go to stderr, as maturin's do; its JSON messages to
    # stdout name the files it made, wherever the target directory is.
    result = subprocess.run(command, cwd=root, stdout=subprocess.PIPE, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"`{' '.join(command)}` failed with exit status {result.returncode}")
    for line in result.stdout.splitlines():
        message: dict[str, Any] = json.loads(line)
        if message.get("reason") != "compiler-artifact" or message["target"]["name"] != LIBRARY:
            continue
        files = [f for f in message["filenames"] if f.endswith((*SHARED_SUFFIXES, IMPORT_LIBRARY))]
        if any(f.endswith(SHARED_SUFFIXES) for f in files):
            version = message["package_id"].rsplit("@", 1)[-1].split("#")[-1]
            return [Path(f) for f in files], version
    raise RuntimeError(f"`{' '.join(command)}` reported no shared library lib{LIBRARY}")


def stage_c_interface(root: Path | None = None) -> Path:
    """Build the C interface and copy it into ``python/rosetree``; the package directory.

    The header, the shared library and ``lib/pkgconfig/rosetree.pc`` replace whatever an
    earlier build left there. The static library is not staged: at 41 MB (10 MB compressed)
    it would make the wheel four times larger (docs/c-api.md).
    """
    root = Path.cwd() if root is None else root
    libraries, version = _cargo_build(root)
    package = root / "python" / "rosetree"
    include, lib = package / "include", package / "lib"
    for stale in (include, lib):
        shutil.rmtree(stale, ignore_errors=True)
    (lib / "pkgconfig").mkdir(parents=True)
    include.mkdir()
    shutil.copy2(root / "rust" / "capi" / "include" / "rosetree.h", include / "rosetree.h")
    for library in libraries:
        shutil.copy2(library, lib / library.name)
    (lib / "pkgconfig" / "rosetree.pc").write_text(_pc_file(version), encoding="utf-8")
    print(f"rosetree: staged the C interface {version} in {package}", file=sys.stderr)
    return package


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """PEP 517 ``build_wheel``: stage the C interface, then maturin's wheel."""
    stage_c_interface()
    return str(maturin.build_wheel(wheel_directory, config_settings, metadata_directory))


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """PEP 660 ``build_editable``: the C interface staged in place, then maturin's."""
    stage_c_interface()
    return str(maturin.build_editable(wheel_directory, config_settings, metadata_directory))


if __name__ == "__main__":
    # `python build_backend/rosetree_build.py`: stage only, e.g. before `maturin build`.
    stage_c_interface(Path(__file__).resolve().parents[1])
