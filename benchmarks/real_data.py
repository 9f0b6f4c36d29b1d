"""Labelled real-valued data sets shipped by installed packages, for the quality benchmarks.

Nothing downloads: scikit-learn bundles iris, wine, breast cancer and digits;
``palmerpenguins`` bundles the Palmer penguins; ``vega_datasets`` bundles the cars data
(origin as the label); ``shared/data/mnist`` (beside the checkout, or ``$ROSETREE_DATA``)
holds the MNIST subset. A set whose package is missing is skipped with a message
(``pip install ".[bench]"`` installs them all).

``cars`` is the held-out set: no default was chosen or tuned while looking at it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

Loader = Callable[[Path], tuple[np.ndarray, np.ndarray]]


def _sklearn(name: str) -> Loader:
    def load(_: Path) -> tuple[np.ndarray, np.ndarray]:
        from sklearn import datasets

        bunch = getattr(datasets, f"load_{name}")()
        return np.asarray(bunch.data, dtype=np.float64), np.asarray(bunch.target)

    return load


def _penguins(_: Path) -> tuple[np.ndarray, np.ndarray]:
    import palmerpenguins

    frame = palmerpenguins.load_penguins()
    cols = ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]
    frame = frame.dropna(subset=cols)
    return frame[cols].to_numpy(np.float64), frame["species"].astype(
        "category"
    ).cat.codes.to_numpy()


def _penguins_by_sex(_: Path) -> tuple[np.ndarray, np.ndarray]:
    """The penguins whose sex is recorded, with species and sex together as the class."""
    import palmerpenguins

    frame = palmerpenguins.load_penguins()
    cols = ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]
    frame = frame.dropna(subset=[*cols, "sex"])
    classes = frame["species"].astype(str) + " " + frame["sex"].astype(str)
    return frame[cols].to_numpy(np.float64), classes.astype("category").cat.codes.to_numpy()


def _cars(_: Path) -> tuple[np.ndarray, np.ndarray]:
    from vega_datasets import local_data

    frame = local_data.cars()
    frame = frame.assign(Year=frame["Year"].dt.year)
    cols = ["Miles_per_Gallon", "Cylinders", "Displacement", "Horsepower", "Weight_in_lbs"]
    frame = frame.dropna(subset=[*cols, "Acceleration"])
    X = frame[[*cols, "Acceleration", "Year"]].to_numpy(np.float64)
    return X, frame["Origin"].astype("category").cat.codes.to_numpy()


def _mnist(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    with np.load(data_dir / "mnist" / "mnist5k.npz") as z:
        return z["X"].astype(np.float64) / 255.0, np.asarray(z["y"])


#: name -> (loader, description, rows per subset, PCA dimensions or None)
REAL_SETS: dict[str, tuple[Loader, str, int, int | None]] = {
    "iris": (_sklearn("iris"), "iris (scikit-learn), 150 × 4, 3 species", 120, None),
    "wine": (_sklearn("wine"), "wine (scikit-learn), 178 × 13, 3 cultivars", 142, None),
    "breast_cancer": (
        _sklearn("breast_cancer"),
        "breast cancer (scikit-learn), 569 × 30, 2 classes",
        200,
        None,
    ),
    "digits": (
        _sklearn("digits"),
        "digits (scikit-learn), 1797 × 64 pixel counts 0–16 taken as real, 10 classes",
        200,
        None,
    ),
    "penguins": (
        _penguins,
        "Palmer penguins (palmerpenguins), 342 × 4, 3 species",
        200,
        None,
    ),
    "mnist20": (_mnist, "MNIST (shared/data), PCA to 20 dimensions, 10 digits", 200, 20),
    "cars": (
        _cars,
        "cars (vega_datasets), 392 × 7, origin (3); held out: nothing was tuned on it",
        200,
        None,
    ),
    # Last, so that the sets above keep their subsets (drawn by position).
    "penguins_sex": (
        _penguins_by_sex,
        "Palmer penguins with their sex recorded, 333 × 4, species × sex (6 classes)",
        200,
        None,
    ),
}


def load(name: str, data_dir: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """The whole data set, or ``None`` (with a message) when its package is missing."""
    loader = REAL_SETS[name][0]
    try:
        return loader(data_dir)
    except (ImportError, FileNotFoundError) as exc:
        print(f"skipping {name}: {exc}")
        return None


def subset(name: str, X: np.ndarray, y: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Subset ``i`` of a data set.

    Its rows are drawn at random without replacement by ``default_rng([i, k])`` (``k`` the
    set's position in :data:`REAL_SETS`) and kept in the order drawn (the files list their
    rows class by class, and an order by class would favour any method that breaks ties by
    row index), then reduced by PCA where the set asks for it
    (fitted on the subset).
    """
    _, _, rows, dims = REAL_SETS[name]
    rng = np.random.default_rng([i, list(REAL_SETS).index(name)])
    picked = rng.choice(len(X), min(rows, len(X)), replace=False)
    X, y = X[picked], y[picked]
    if dims is not None:
        centred = X - X.mean(axis=0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        X = centred @ vt[:dims].T
    return X, y


def standardize(X: np.ndarray) -> np.ndarray:
    """Columns centred and scaled to unit variance (constant columns left at zero)."""
    sd = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
