"""Exceptions raised by rosetree, from Python and from the Rust core alike.

Every error about user input is a :class:`ValueError` subclass that names the parameter or
the row at fault, so ``except ValueError`` keeps working for code written against other
libraries.
"""

from __future__ import annotations

__all__ = [
    "DataScaleWarning",
    "DegenerateModelWarning",
    "InvalidDataError",
    "InvalidParameterError",
    "InvalidTreeError",
    "NotFittedError",
    "NumericalError",
    "RoseTreeError",
]


class RoseTreeError(Exception):
    """Base class of every exception rosetree raises on purpose."""


class InvalidParameterError(RoseTreeError, ValueError):
    """A hyperparameter or option is outside its domain.

    Attributes
    ----------
    parameter : str or None
        The parameter's name as the user spells it.
    """

    def __init__(self, message: str, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter


class InvalidDataError(RoseTreeError, ValueError):
    """The data cannot be used with the chosen cluster model.

    Attributes
    ----------
    row, column : int or None
        Zero-based position of the offending entry, where one entry is at fault.
    """

    def __init__(self, message: str, row: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.row = row
        self.column = column


class InvalidDataTypeError(InvalidDataError, TypeError):
    """The data are not numbers: strings, objects or complex values.

    Both an :class:`InvalidDataError` and a :class:`TypeError`, as NumPy and scikit-learn
    raise for data that do not convert to float.
    """


class InvalidTreeError(RoseTreeError, ValueError):
    """A tree given by the user is not a rose tree over the data's rows."""


class NumericalError(RoseTreeError, ArithmeticError):
    """A computation produced a non-finite number where a finite one was required."""


class NotFittedError(RoseTreeError, ValueError, AttributeError):
    """A method that needs a fitted estimator was called before ``fit``.

    It is both a :class:`ValueError` and an :class:`AttributeError`, as scikit-learn's
    exception of the same name, so code written for either keeps working.
    """


class DataScaleWarning(UserWarning):
    r"""The data's columns are on very different scales for a model that compares them.

    Raised by :class:`~rosetree.PitmanYorDiffusionTree` with ``scale=None`` (the rows as
    given, one :math:`\sigma^2` for every column) when the columns' ranges differ by more
    than a factor of 100, as for columns in different units: the widest columns then
    decide the tree. Standardize the columns (scikit-learn's ``StandardScaler``) unless
    their scales are meant, or keep the default ``scale="auto"``, which does.
    """


class DegenerateModelWarning(UserWarning):
    """The cluster model cannot be estimated well from the data it is given.

    Raised, for example, for :class:`~rosetree.NormalInverseWishart` with at least as many
    features as rows: no cluster has enough rows to estimate a full covariance matrix, so
    the fit follows the prior.
    """
