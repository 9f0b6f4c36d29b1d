"""rosetree's C interface (``rust/capi``) as a native tool uses it.

The library is built with cargo; the header, the C and C++ examples and a handle-abuse
program are compiled with the system compilers and run under AddressSanitizer and
UndefinedBehaviorSanitizer. The examples' output must equal the Python package's on the
same data: the same tree, score, flat clusters and predictive densities. The C example is
also built against the installed package's copy of the interface (``rosetree.get_include``,
``get_library_dir``, and ``rosetree.pc`` through pkg-config).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import rosetree as rt
from sklearn.datasets import load_iris

ROOT = Path(__file__).resolve().parents[1]
CAPI = ROOT / "rust" / "capi"
WARNINGS = ["-Wall", "-Wextra", "-Werror", "-pedantic"]
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g"]


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not on the PATH")
    return path


@pytest.fixture(scope="module")
def library() -> Path:
    """The directory holding ``librosetree_c``, built in release mode."""
    cargo = _tool("cargo")
    meta = subprocess.run(
        [cargo, "metadata", "--format-version", "1", "--no-deps"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    build = subprocess.run(
        [cargo, "build", "--release", "-p", "rosetree-capi"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    return Path(json.loads(meta.stdout)["target_directory"]) / "release"


def _compile(
    out: Path,
    source: Path,
    library: Path | None,
    cpp: bool = False,
    include: Path = CAPI / "include",
    flags: Sequence[str] | None = None,
) -> Path:
    """Compile (and link, given the library's directory or flags) one program."""
    compiler = _tool("c++" if cpp else "cc")
    std = ["-std=c++17" if cpp else "-std=c99", *WARNINGS, *SANITIZE]
    if flags is not None:  # the include and link flags given whole, e.g. by pkg-config
        build = [*std, str(source), *flags, "-lm"]
    elif library is None:  # compile only: the header must stand alone
        build = [*std, "-I", str(include), str(source), "-c"]
    else:
        build = [*std, "-I", str(include), str(source), "-L", str(library), "-lrosetree_c"]
        build += [f"-Wl,-rpath,{library}", "-lm"]
    result = subprocess.run([compiler, *build, "-o", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return out


def _run(program: Path, *args: str) -> str:
    env = dict(
        os.environ,
        ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
        UBSAN_OPTIONS="print_stacktrace=1",
    )
    result = subprocess.run(
        [str(program), *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert "Sanitizer" not in result.stderr and "runtime error" not in result.stderr, result.stderr
    return result.stdout


def _fields(output: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in output.splitlines())


def test_the_header_compiles_alone_as_c99_and_cpp(tmp_path: Path) -> None:
    source = tmp_path / "header.c"
    source.write_text('#include "rosetree.h"\nint main(void) { return rt_version() == 0; }\n')
    _compile(tmp_path / "c", source, None)
    cpp = tmp_path / "header.cpp"
    cpp.write_text(source.read_text())
    _compile(tmp_path / "cpp", cpp, None, cpp=True)


def test_null_freed_and_mistyped_handles_return_errors(library: Path, tmp_path: Path) -> None:
    program = _compile(tmp_path / "handles", ROOT / "tests" / "capi" / "handles.c", library)
    out = _run(program)
    checks, failures = (int(w) for w in out.split()[::2])
    assert failures == 0 and checks > 100, out


@pytest.fixture(scope="module")
def examples(library: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The C and the C++ example, built against the library."""
    where = tmp_path_factory.mktemp("capi")
    c = _compile(where / "fit", CAPI / "examples" / "fit.c", library)
    cpp = _compile(where / "fit_cpp", CAPI / "examples" / "fit.cpp", library, cpp=True)
    return c, cpp


def _animals() -> np.ndarray:
    return np.asarray(rt.datasets.load_animals().data, dtype=float)


def _iris() -> np.ndarray:
    return load_iris().data[::5]


def _python(family: str, X: np.ndarray, seed: int) -> dict[str, object]:
    """What the Python package gives for the C example's settings."""
    binary = bool(np.isin(X, (0.0, 1.0)).all())
    model = rt.BetaBernoulli() if binary else rt.NormalGamma()
    if family == "brt-shared":
        model, family = rt.NormalGamma(shared_precision=True), "brt"
    if family == "brt":
        est = rt.BayesianRoseTree(model=model, mixing="brt", gamma=0.5).fit(X)
    elif family == "brt-learn":
        est = rt.BayesianRoseTree(
            model=model, mixing="brt", gamma=0.5, learn_hyperparameters=True, n_restarts=2,
            random_state=seed,
        ).fit(X)  # fmt: skip
    elif family == "bhc":
        est = rt.BayesianRoseTree(model=model, mixing="dp", dp_alpha=1.0, binary=True).fit(X)
    elif family == "coalescent":
        est = rt.KingmanCoalescent(Lambda=1.0, noise=0.1).fit(X)
    elif family == "coalescent-learn":
        est = rt.KingmanCoalescent(
            Lambda=1.0, noise=0.1, learn_hyperparameters=True, hyper_iter=10
        ).fit(X)
    else:
        est = rt.PitmanYorDiffusionTree(
            alpha=1.0, beta=0.0, c=1.0, sigma2=1.0, scale=None, inference="mcmc",
            init="prior", learn_hyperparameters=False, n_iter=100, burn_in=50,
            random_state=seed,  # the summary tree of the mean divergence times, as in C
        ).fit(X)  # fmt: skip
    out: dict[str, object] = {"newick": est.tree_.to_newick(), "nodes": est.tree_.n_nodes}
    if family in ("brt", "brt-learn", "bhc"):
        out["score"] = est.log_evidence_
        out["labels"] = est.labels_.tolist()
        out["log_predictive"] = est.score_samples(X).tolist()
    else:
        out["score"] = est.log_joint_
    if family not in ("brt", "brt-learn", "bhc"):
        out["log_predictive"] = est.score_samples(X).tolist()
    return out


@pytest.mark.parametrize(
    ("family", "data"),
    [
        ("brt", _animals),
        ("bhc", _animals),
        ("brt", _iris),
        ("bhc", _iris),
        ("brt-learn", _animals),
        ("brt-learn", _iris),
        ("brt-shared", _iris),
        ("coalescent", _iris),
        ("coalescent-learn", _iris),
        ("pydt", _iris),
    ],
)
def test_the_examples_print_what_python_fits(
    examples: tuple[Path, Path], tmp_path: Path, family: str, data: object
) -> None:
    X = data()  # type: ignore[operator]
    csv = tmp_path / "data.csv"
    np.savetxt(csv, X, fmt="%.17g", delimiter=",", header=",".join("x" * X.shape[1]), comments="")
    seed = 11
    c_out = _run(examples[0], family, str(csv), str(seed))
    assert _run(examples[1], family, str(csv), str(seed)) == c_out
    got = _fields(c_out)
    want = _python(family, X, seed)
    assert got["newick"] == want["newick"]
    assert int(got["nodes"]) == want["nodes"]
    # %.17g prints a double exactly: the same computation gives the same number.
    assert float(got["score"]) == want["score"]
    if "labels" in want:
        assert [int(v) for v in got["labels"].split()] == want["labels"]
        assert int(got["clusters"]) == max(want["labels"]) + 1  # type: ignore[type-var]
    got_density = np.array(got["log_predictive"].split(), dtype=float)
    if family == "pydt":
        # The mean over the kept states' densities: in Rust for C, in NumPy for Python.
        np.testing.assert_allclose(got_density, want["log_predictive"], rtol=1e-13)
    else:
        np.testing.assert_array_equal(got_density, want["log_predictive"])


# The C interface that the installed package carries (the wheel's, staged in place by
# build_backend/rosetree_build.py in a source checkout).


@pytest.fixture(scope="module")
def installed() -> dict[str, Path]:
    """The installed package's include, library and pkg-config directories."""
    try:
        dirs = {
            "include": rt.get_include(),
            "lib": rt.get_library_dir(),
            "pkgconfig": rt.get_pkg_config_dir(),
        }
    except FileNotFoundError as exc:
        # Only a source checkout may lack them; an installed package must have them.
        if Path(rt.__file__).resolve().is_relative_to(ROOT / "python"):
            pytest.skip(f"the C interface is not staged in this checkout: {exc}")
        raise
    return {name: Path(d) for name, d in dirs.items()}


def test_the_package_finds_its_c_interface(installed: dict[str, Path]) -> None:
    package = Path(rt.__file__).resolve().parent
    assert installed["include"] == package / "include"
    assert installed["lib"] == package / "lib"
    assert installed["pkgconfig"] == package / "lib" / "pkgconfig"
    # The same header as the source's (a stale install is caught here).
    header = (installed["include"] / "rosetree.h").read_text()
    assert header == (CAPI / "include" / "rosetree.h").read_text()
    pc = (installed["pkgconfig"] / "rosetree.pc").read_text()
    assert "prefix=${pcfiledir}/../..\n" in pc
    assert f"Version: {rt.__version__}\n" in pc


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF dynamic section")
def test_the_installed_library_needs_no_python(installed: dict[str, Path]) -> None:
    readelf = _tool("readelf")
    dynamic = subprocess.run(
        [readelf, "-d", str(installed["lib"] / "librosetree_c.so")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    needed = [line.split("[")[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line]
    assert "libc.so.6" in needed and not any("python" in lib for lib in needed), needed
    assert "Library soname: [librosetree_c.so]" in dynamic


def test_missing_files_raise_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from rosetree import _cinterface

    monkeypatch.setattr(_cinterface, "_PACKAGE", tmp_path)
    for function, name in [
        (rt.get_include, "rosetree.h"),
        (rt.get_library_dir, "librosetree_c"),
        (rt.get_pkg_config_dir, "rosetree.pc"),
    ]:
        with pytest.raises(FileNotFoundError, match=name):
            function()


def test_the_example_built_against_the_installed_package_prints_what_python_fits(
    installed: dict[str, Path], tmp_path: Path
) -> None:
    X = _animals()
    csv = tmp_path / "data.csv"
    np.savetxt(csv, X, fmt="%.17g", delimiter=",", header=",".join("x" * X.shape[1]), comments="")
    source = CAPI / "examples" / "fit.c"
    # With the directories the package reports.
    program = _compile(tmp_path / "fit", source, installed["lib"], include=installed["include"])
    out = _run(program, "bhc", str(csv))
    got, want = _fields(out), _python("bhc", X, 0)
    assert got["newick"] == want["newick"]
    assert float(got["score"]) == want["score"]
    assert [int(v) for v in got["labels"].split()] == want["labels"]
    # With pkg-config's flags for rosetree.pc, from the package's directory.
    pkg_config = shutil.which("pkg-config")
    if pkg_config is None:
        pytest.skip("pkg-config is not on the PATH; the -I/-L build passed")
    env = dict(os.environ, PKG_CONFIG_PATH=str(installed["pkgconfig"]))

    def query(*args: str) -> list[str]:
        result = subprocess.run(
            [pkg_config, *args, "rosetree"], capture_output=True, text=True, env=env, check=True
        )
        return result.stdout.split()

    libdir = Path(query("--variable=libdir")[0])
    assert libdir.resolve() == installed["lib"].resolve()
    flags = [*query("--cflags", "--libs"), f"-Wl,-rpath,{libdir}"]
    program = _compile(tmp_path / "fit_pc", source, None, flags=flags)
    assert _run(program, "bhc", str(csv)) == out
