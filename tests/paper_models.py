"""Estimators configured as the papers define their models, for the tests that check them."""

import rosetree as rt


def paper_coalescent(likelihood="brownian", **kwargs):
    """Teh, Daumé & Roy's coalescent: ``Lambda = 1`` unless given, no observation noise, and
    the paper's log-likelihood-ratio flat clusters (the estimator's defaults differ)."""
    defaults = {"Lambda": 1.0, "noise": 0.0, "flat_clusters": "llr"}
    return rt.KingmanCoalescent(likelihood, **{**defaults, **kwargs})
