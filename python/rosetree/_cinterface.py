"""Where the installed package keeps its C interface: header, library and pkg-config file.

The wheel ships the C interface beside the Python code (build_backend/rosetree_build.py
stages it), laid out as a prefix of its own::

    rosetree/include/rosetree.h
    rosetree/lib/librosetree_c.so            (.dylib on macOS)
    rosetree/lib/pkgconfig/rosetree.pc
"""

from __future__ import annotations

import sys
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_LIBRARY = {"darwin": "librosetree_c.dylib", "win32": "rosetree_c.dll"}.get(
    sys.platform, "librosetree_c.so"
)


def _directory(directory: Path, name: str) -> str:
    if not (directory / name).is_file():
        raise FileNotFoundError(
            f"{directory / name} is missing: the C interface comes with the package's wheel "
            "(pip install); in a source checkout, `python build_backend/rosetree_build.py` "
            "builds it and puts it there"
        )
    return str(directory)


def get_include() -> str:
    """The directory holding ``rosetree.h``, the header of the C interface.

    Returns
    -------
    str
        Absolute path of the package's ``include`` directory; pass it to the compiler as
        ``-I``.

    Raises
    ------
    FileNotFoundError
        If the header is not there (a source checkout in which the C interface was not
        built).

    See Also
    --------
    get_library_dir : The directory of ``librosetree_c``.
    get_pkg_config_dir : The directory of ``rosetree.pc``.

    Examples
    --------
    A C program built against the installed package (docs/c-api.md)::

        inc=$(python3 -c 'import rosetree; print(rosetree.get_include())')
        lib=$(python3 -c 'import rosetree; print(rosetree.get_library_dir())')
        cc prog.c -I"$inc" -L"$lib" -lrosetree_c -Wl,-rpath,"$lib" -o prog

    >>> import rosetree
    >>> rosetree.get_include()  # doctest: +SKIP
    '/.../site-packages/rosetree/include'
    """
    return _directory(_PACKAGE / "include", "rosetree.h")


def get_library_dir() -> str:
    """The directory holding ``librosetree_c``, the shared library of the C interface.

    The library has no dependency on Python. A program links it with
    ``-L<dir> -lrosetree_c`` and finds it at run time through an rpath
    (``-Wl,-rpath,<dir>``) or ``LD_LIBRARY_PATH``.

    Returns
    -------
    str
        Absolute path of the package's ``lib`` directory.

    Raises
    ------
    FileNotFoundError
        If the library is not there (a source checkout in which the C interface was not
        built).

    See Also
    --------
    get_include : The directory of ``rosetree.h``.
    get_pkg_config_dir : The directory of ``rosetree.pc``.
    """
    return _directory(_PACKAGE / "lib", _LIBRARY)


def get_pkg_config_dir() -> str:
    """The directory holding ``rosetree.pc``, for ``PKG_CONFIG_PATH``.

    The file's paths are relative to its own place (``${pcfiledir}``), so it is right
    wherever the package is installed::

        export PKG_CONFIG_PATH=$(python3 -c 'import rosetree as r; print(r.get_pkg_config_dir())')
        rpath=-Wl,-rpath,$(pkg-config --variable=libdir rosetree)
        cc prog.c $(pkg-config --cflags --libs rosetree) "$rpath" -o prog

    Returns
    -------
    str
        Absolute path of the package's ``lib/pkgconfig`` directory.

    Raises
    ------
    FileNotFoundError
        If the file is not there (a source checkout in which the C interface was not
        built).

    See Also
    --------
    get_include : The directory of ``rosetree.h``.
    get_library_dir : The directory of ``librosetree_c``.
    """
    return _directory(_PACKAGE / "lib" / "pkgconfig", "rosetree.pc")
