"""Small example data sets bundled with the package (no download ever happens)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from importlib import resources

import numpy as np

__all__ = ["Dataset", "load_animals", "load_toy"]


@dataclass(frozen=True)
class Dataset:
    """A bundled data set.

    Attributes
    ----------
    data : ndarray of shape (n_samples, n_features)
    names : list of str
        One name per row.
    feature_names : list of str
    target : ndarray of shape (n_samples,)
        A reference labelling (str), for comparison only.
    description : str
    """

    data: np.ndarray
    names: list[str]
    feature_names: list[str]
    target: np.ndarray
    description: str


def _read(filename: str) -> tuple[list[str], list[list[str]]]:
    text = resources.files("rosetree.data").joinpath(filename).read_text(encoding="utf-8")
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader)
    return header, list(reader)


def load_animals() -> Dataset:
    """Kemp & Tenenbaum's 33 animals × 102 binary features.

    From the structural-sparsity repository of Lake et al. (data of Kemp & Tenenbaum 2008,
    "The discovery of structural form"), as used in the Pitman–Yor diffusion tree paper.
    ``target`` is the biological class (mammal, bird, insect, fish, reptile).
    """
    header, rows = _read("animals.csv")
    return Dataset(
        data=np.array([[float(v) for v in r[3:]] for r in rows]),
        names=[r[0] for r in rows],
        feature_names=header[3:],
        target=np.array([r[1] for r in rows]),
        description="33 animals x 102 binary features (Kemp & Tenenbaum 2008)",
    )


def load_toy() -> Dataset:
    """The 48 × 12 binary ``toy`` set of the BHC and BRT papers (as reconstructed).

    Three classes of 16 rows; class *c* has ones only in attributes ``4c .. 4c+3``, and its
    rows are all 16 patterns on them.
    """
    header, rows = _read("toy.csv")
    return Dataset(
        data=np.array([[float(v) for v in r[2:]] for r in rows]),
        names=[r[0] for r in rows],
        feature_names=header[2:],
        target=np.array([r[1] for r in rows]),
        description="48 x 12 binary toy data, three classes (BHC/BRT papers)",
    )
