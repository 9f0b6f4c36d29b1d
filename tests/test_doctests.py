"""The examples in the package's docstrings run and print what they show."""

import doctest
import importlib
import pkgutil

import matplotlib
import pytest
import rosetree

matplotlib.use("Agg")

# The package and its public modules (private ones, `_core` included, hold no examples).
PUBLIC = (
    info.name
    for info in pkgutil.iter_modules(rosetree.__path__, "rosetree.")
    if not info.name.rsplit(".", 1)[-1].startswith("_")
)
MODULES = ["rosetree", *sorted(PUBLIC)]


def _examples(name):
    module = importlib.import_module(name)
    return [t for t in doctest.DocTestFinder().find(module, name) if t.examples]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in _examples(name):
        runner.run(test)
    failed, attempted = runner.summarize(verbose=False)
    assert failed == 0, f"{failed} of {attempted} examples failed in {name}"


def test_the_examples_are_found():
    # A finder that found nothing would pass every module above.
    found = {name: sum(len(t.examples) for t in _examples(name)) for name in MODULES}
    assert sum(found.values()) >= 50, found
    assert all(found[m] for m in ("rosetree", "rosetree.estimators", "rosetree.pydt")), found
