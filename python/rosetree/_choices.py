"""The values each string option accepts, listed once for the estimators and the CLI."""

#: Mixing-proportion rules of rose trees (BRT eq 1.7; ``gamma``: a constant; ``dp``: BHC's).
MIXINGS = ("brt", "gamma", "dp")
#: How a rose tree's ``labels_`` are read off the tree.
ROSE_FLAT_CLUSTERS = ("dp", "cut", "map")
#: How candidate merges of the greedy rose-tree search are ranked.
MERGE_RULES = ("likelihood_ratio", "posterior")

#: The coalescent's likelihoods, searches and flat-cluster rules.
COALESCENT_LIKELIHOODS = ("brownian", "multinomial")
COALESCENT_SMC = ("smc-priorprior", "smc-priorpost", "smc-postpost")
COALESCENT_INFERENCES = ("greedy-rate1", "greedy-maxprob", "greedy-minduration", *COALESCENT_SMC)
COALESCENT_FLAT_CLUSTERS = ("dp", "llr")

#: The diffusion tree's likelihoods and inferences.
PYDT_LIKELIHOODS = ("gaussian", "probit", "multinomial")
PYDT_INFERENCES = ("greedy-em", "mcmc")
