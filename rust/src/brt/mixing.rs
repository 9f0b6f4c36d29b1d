//! Mixing proportions `π_T` (BRT eqs 1.5, 1.7; `CONVENTIONS.md`).

use super::NodeValues;
use super::score::ln_softplus;
use crate::error::{Result, RoseTreeError};
use crate::math::{ln_gamma, log_add_exp, log1m_exp};

/// How the mixing proportion `π_T` of a node is set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mixing {
    /// BRT's rule, `π_T = 1 − (1 − γ)^(n_c − 1)` for a node with `n_c` children (eq 1.7).
    Brt {
        /// `γ ∈ (0, 1)`.
        gamma: f64,
    },
    /// A constant `π_T = γ`: BHC-γ on binary trees, BRT-γ on rose trees.
    Gamma {
        /// `γ ∈ (0, 1)`.
        gamma: f64,
    },
    /// The Dirichlet-process rule of Heller & Ghahramani: `d_leaf = a`,
    /// `d_T = a Γ(n_T) + Π d_child`, `π_T = a Γ(n_T) / d_T` (BHC-DP; BRT-DP on rose trees).
    Dp {
        /// The DP concentration `a > 0`.
        alpha: f64,
    },
}

/// The cached numbers of one tree that a merge needs, so that scoring a candidate costs one
/// cluster marginal likelihood and a handful of additions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Leaves below the root.
    pub n_leaves: usize,
    /// Children of the root; `0` for a leaf.
    pub n_children: usize,
    /// `ln f(leaves(T))`.
    pub log_f: f64,
    /// `ln p(leaves(T) | T)`.
    pub log_p: f64,
    /// `ln π_T` (`0` for a leaf).
    pub log_pi: f64,
    /// `ln(1 − π_T)` (`−∞` for a leaf).
    pub log_1m_pi: f64,
    /// `Σ_children ln p(T_c)`.
    pub sum_log_p_children: f64,
    /// `ln d_T` (DP mixing only).
    pub log_d: f64,
    /// `Σ_children ln d_c` (DP mixing only).
    pub sum_log_d_children: f64,
    /// `ln[ln p(T) − ln(1 − π_T) − Σ_children ln p(T_c)]`: the logarithm of what the
    /// "one cluster" term adds to the "split" term, `ln ln(1 + e^{u − v})` with
    /// `u = ln π_T + ln f`, `v = ln(1 − π_T) + Σ ln p(T_c)`. A double holding `ln p(T)` loses
    /// this excess entirely when the cluster is implausible; an absorb or collapse that
    /// dissolves this root needs it to be ranked exactly (see [`Score`](super::Score)). `−∞` for a leaf.
    pub log_excess: f64,
}

impl Summary {
    /// The summary of a single data item with `ln f({x}) = log_f` (π = 1 at a leaf).
    pub fn leaf(log_f: f64, mixing: &impl NodePriors) -> Self {
        Self {
            n_leaves: 1,
            n_children: 0,
            log_f,
            log_p: log_f,
            log_pi: 0.0,
            log_1m_pi: f64::NEG_INFINITY,
            sum_log_p_children: 0.0,
            log_d: mixing.leaf_log_d(),
            sum_log_d_children: 0.0,
            log_excess: f64::NEG_INFINITY,
        }
    }

    /// The summary of an internal node from its children's totals.
    #[inline]
    pub fn internal(
        mixing: &impl NodePriors,
        n_leaves: usize,
        n_children: usize,
        log_f: f64,
        sum_log_p_children: f64,
        sum_log_d_children: f64,
    ) -> Self {
        let prior = mixing.node_prior(n_children, n_leaves, sum_log_d_children);
        let (u, v) = (prior.log_pi + log_f, prior.log_1m_pi + sum_log_p_children);
        Self {
            n_leaves,
            n_children,
            log_f,
            log_p: node_log_p(&prior, log_f, sum_log_p_children),
            log_pi: prior.log_pi,
            log_1m_pi: prior.log_1m_pi,
            sum_log_p_children,
            log_d: prior.log_d,
            sum_log_d_children,
            log_excess: ln_softplus(u - v),
        }
    }

    /// The rose-tree quantities of a node with this summary.
    pub fn values(&self) -> NodeValues {
        NodeValues {
            log_f: self.log_f,
            log_p: self.log_p,
            log_pi: self.log_pi,
            log_1m_pi: self.log_1m_pi,
        }
    }

    pub(super) fn is_internal(&self) -> bool {
        self.n_children > 0
    }
}

/// The prior terms of one internal node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodePrior {
    /// `ln π_T`.
    pub log_pi: f64,
    /// `ln(1 − π_T)`.
    pub log_1m_pi: f64,
    /// `ln d_T` for [`Mixing::Dp`]; `0` otherwise.
    pub log_d: f64,
}

impl Mixing {
    /// Checks the parameter's domain.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `gamma` unless `0 < γ < 1`, and on `dp_alpha`
    /// unless `a` is finite and positive.
    pub fn check(&self) -> Result<()> {
        match *self {
            Self::Brt { gamma } | Self::Gamma { gamma } => {
                if !(gamma > 0.0 && gamma < 1.0) {
                    return Err(RoseTreeError::param(
                        "gamma",
                        format!("must lie strictly between 0 and 1, got {gamma}"),
                    ));
                }
            }
            Self::Dp { alpha } => {
                if !(alpha.is_finite() && alpha > 0.0) {
                    return Err(RoseTreeError::param(
                        "dp_alpha",
                        format!("must be finite and > 0, got {alpha}"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// `ln d` of a leaf (only [`Mixing::Dp`] uses it).
    pub fn leaf_log_d(&self) -> f64 {
        match *self {
            Self::Dp { alpha } => alpha.ln(),
            _ => 0.0,
        }
    }

    /// The prior of an internal node with `n_children` children and `n_leaves` leaves whose
    /// children have `Σ ln d = sum_log_d_children` (ignored unless [`Mixing::Dp`]).
    #[inline]
    pub fn node_prior(
        &self,
        n_children: usize,
        n_leaves: usize,
        sum_log_d_children: f64,
    ) -> NodePrior {
        match *self {
            Self::Brt { gamma } => {
                // ln(1 − π) = (n_c − 1) ln(1 − γ); ln π = ln(1 − e^{that}) computed stably.
                let log_1m_pi = (n_children as f64 - 1.0) * (-gamma).ln_1p();
                NodePrior {
                    log_pi: log1m_exp(log_1m_pi),
                    log_1m_pi,
                    log_d: 0.0,
                }
            }
            Self::Gamma { gamma } => NodePrior {
                log_pi: gamma.ln(),
                log_1m_pi: (-gamma).ln_1p(),
                log_d: 0.0,
            },
            Self::Dp { alpha } => {
                let log_a_gamma = alpha.ln() + ln_gamma(n_leaves as f64);
                let log_d = log_add_exp(log_a_gamma, sum_log_d_children);
                NodePrior {
                    log_pi: log_a_gamma - log_d,
                    log_1m_pi: sum_log_d_children - log_d,
                    log_d,
                }
            }
        }
    }

    /// `ln(1 − π_m) − Σ_k ln(1 − π_k)`: how the merged root's "split" weight compares with
    /// those of the roots it dissolves (none for a join, one for an absorb, two for a
    /// collapse), as `(base, log_small)` with the ratio equal to `base − e^{log_small}`.
    /// The merged root has `n_children` children, `n_leaves` leaves and children with
    /// `Σ ln d = sum_log_d_children`; `parts_log_d` is `ln d` of the two merged trees added.
    ///
    /// For `"brt"` the ratio is `(n_c − 1 − Σ_k (n_k − 1)) · ln(1 − γ)` and for `"gamma"`
    /// `(1 − #dissolved) · ln(1 − γ)`, computed from the integer coefficient so that it is
    /// exact (`ln(1 − γ)` for every join, absorb and collapse under `"brt"`): a difference of
    /// rounded products would be off by an ulp and decide between merges whose scores differ
    /// by far less. For `"dp"` it is `ln d_a + ln d_b − ln d_m` for every operation, with
    /// `ln d_m = logaddexp(g, Σ ln d_children)`, `g = ln(a Γ(n_m))`: `base = ln d_a + ln d_b − g`
    /// and `log_small = ln ln(1 + e^{Σ ln d_children − g})`, which keeps the operations apart
    /// at the top of a tree, where `g` dominates and a double would round `ln d_m` to `g`.
    #[inline]
    pub fn split_ratio(
        &self,
        n_children: usize,
        n_leaves: usize,
        sum_log_d_children: f64,
        parts_log_d: f64,
        dissolved: &[&Summary],
    ) -> (f64, f64) {
        let ln_1m_gamma = match *self {
            Self::Brt { gamma } | Self::Gamma { gamma } => (-gamma).ln_1p(),
            Self::Dp { .. } => f64::NAN,
        };
        let log_a_gamma = || match *self {
            Self::Dp { alpha } => alpha.ln() + ln_gamma(n_leaves as f64),
            _ => f64::NAN,
        };
        split_ratio_of(
            self,
            ln_1m_gamma,
            log_a_gamma,
            (n_children, sum_log_d_children, parts_log_d),
            dissolved,
        )
    }

    /// Whether `π_T` depends on anything beyond the node's own child count (true for DP,
    /// whose `d_T` carries information from the whole subtree).
    pub fn depends_on_subtree(&self) -> bool {
        matches!(self, Self::Dp { .. })
    }
}

/// Anything that gives the prior terms of a node: [`Mixing`] itself, or a [`PriorTable`]
/// that has them tabulated for the pair-scoring loop.
pub trait NodePriors: Sync {
    /// See [`Mixing::node_prior`].
    fn node_prior(&self, n_children: usize, n_leaves: usize, sum_log_d_children: f64) -> NodePrior;
    /// See [`Mixing::leaf_log_d`].
    fn leaf_log_d(&self) -> f64;
    /// See [`Mixing::split_ratio`].
    fn split_ratio(
        &self,
        n_children: usize,
        n_leaves: usize,
        sum_log_d_children: f64,
        parts_log_d: f64,
        dissolved: &[&Summary],
    ) -> (f64, f64);
}

/// [`Mixing::split_ratio`] given `ln(1 − γ)` (`"brt"`, `"gamma"`) and `g = ln(a Γ(n_m))`
/// (`"dp"`, called only then), so that tables can supply both; `merged` is the merged root's
/// child count, `Σ ln d` of its children and `ln d_a + ln d_b`.
#[inline]
fn split_ratio_of(
    mixing: &Mixing,
    ln_1m_gamma: f64,
    log_a_gamma: impl FnOnce() -> f64,
    merged: (usize, f64, f64),
    dissolved: &[&Summary],
) -> (f64, f64) {
    let (n_children, sum_log_d_children, parts_log_d) = merged;
    match mixing {
        Mixing::Brt { .. } => {
            let lost: usize = dissolved.iter().map(|s| s.n_children - 1).sum();
            let coefficient = n_children as f64 - 1.0 - lost as f64;
            (coefficient * ln_1m_gamma, f64::NEG_INFINITY)
        }
        Mixing::Gamma { .. } => (
            (1.0 - dissolved.len() as f64) * ln_1m_gamma,
            f64::NEG_INFINITY,
        ),
        Mixing::Dp { .. } => {
            let g = log_a_gamma();
            (parts_log_d - g, ln_softplus(sum_log_d_children - g))
        }
    }
}

impl NodePriors for Mixing {
    #[inline]
    fn node_prior(&self, n_children: usize, n_leaves: usize, sum_log_d_children: f64) -> NodePrior {
        Mixing::node_prior(self, n_children, n_leaves, sum_log_d_children)
    }
    fn leaf_log_d(&self) -> f64 {
        Mixing::leaf_log_d(self)
    }
    #[inline]
    fn split_ratio(
        &self,
        n_children: usize,
        n_leaves: usize,
        sum_log_d_children: f64,
        parts_log_d: f64,
        dissolved: &[&Summary],
    ) -> (f64, f64) {
        Mixing::split_ratio(
            self,
            n_children,
            n_leaves,
            sum_log_d_children,
            parts_log_d,
            dissolved,
        )
    }
}

/// [`Mixing`] with its transcendental terms tabulated for trees of up to `n` leaves: `ln π`
/// and `ln(1 − π)` by child count for `"brt"`, `ln(a Γ(n_T))` for `"dp"`. Same values as
/// [`Mixing::node_prior`], bit for bit.
#[derive(Debug, Clone)]
pub struct PriorTable {
    mixing: Mixing,
    by_count: Vec<NodePrior>,
    log_a_gamma: Vec<f64>,
    /// `ln(1 − γ)` (`"brt"`, `"gamma"`).
    ln_1m_gamma: f64,
}

impl PriorTable {
    /// Tables for trees of up to `n` leaves.
    pub fn new(mixing: Mixing, n: usize) -> Self {
        let (mut by_count, mut log_a_gamma) = (Vec::new(), Vec::new());
        match mixing {
            Mixing::Brt { .. } | Mixing::Gamma { .. } => {
                by_count = (0..=n)
                    .map(|c| mixing.node_prior(c.max(2), 2, 0.0))
                    .collect();
            }
            Mixing::Dp { alpha } => {
                log_a_gamma = (0..=n)
                    .map(|m| alpha.ln() + ln_gamma(m.max(1) as f64))
                    .collect();
            }
        }
        let ln_1m_gamma = match mixing {
            Mixing::Brt { gamma } | Mixing::Gamma { gamma } => (-gamma).ln_1p(),
            Mixing::Dp { .. } => f64::NAN,
        };
        Self {
            mixing,
            by_count,
            log_a_gamma,
            ln_1m_gamma,
        }
    }
}

impl NodePriors for PriorTable {
    #[inline]
    fn node_prior(&self, n_children: usize, n_leaves: usize, sum_log_d_children: f64) -> NodePrior {
        match self.mixing {
            Mixing::Dp { .. } => match self.log_a_gamma.get(n_leaves) {
                Some(&log_a_gamma) => {
                    let log_d = log_add_exp(log_a_gamma, sum_log_d_children);
                    NodePrior {
                        log_pi: log_a_gamma - log_d,
                        log_1m_pi: sum_log_d_children - log_d,
                        log_d,
                    }
                }
                None => untabulated(&self.mixing, n_children, n_leaves, sum_log_d_children),
            },
            _ => match self.by_count.get(n_children) {
                Some(&p) => p,
                None => untabulated(&self.mixing, n_children, n_leaves, sum_log_d_children),
            },
        }
    }

    fn leaf_log_d(&self) -> f64 {
        self.mixing.leaf_log_d()
    }

    #[inline]
    fn split_ratio(
        &self,
        n_children: usize,
        n_leaves: usize,
        sum_log_d_children: f64,
        parts_log_d: f64,
        dissolved: &[&Summary],
    ) -> (f64, f64) {
        let log_a_gamma = || match self.log_a_gamma.get(n_leaves) {
            Some(&g) => g,
            None => untabulated(&self.mixing, n_children, n_leaves, f64::NEG_INFINITY).log_d,
        };
        split_ratio_of(
            &self.mixing,
            self.ln_1m_gamma,
            log_a_gamma,
            (n_children, sum_log_d_children, parts_log_d),
            dissolved,
        )
    }
}

/// [`Mixing::node_prior`] outside a [`PriorTable`]'s range. Out of line and cold: inlined,
/// the compiler may evaluate its logarithms on every call of the pair-scoring loop before
/// the table lookup has decided they are not needed.
#[cold]
#[inline(never)]
fn untabulated(
    mixing: &Mixing,
    n_children: usize,
    n_leaves: usize,
    sum_log_d_children: f64,
) -> NodePrior {
    mixing.node_prior(n_children, n_leaves, sum_log_d_children)
}

/// `ln p(leaves(T) | T) = ln[π f + (1 − π) Π p(children)]` (eq 1.5).
#[inline]
pub fn node_log_p(prior: &NodePrior, log_f: f64, sum_log_p_children: f64) -> f64 {
    log_add_exp(prior.log_pi + log_f, prior.log_1m_pi + sum_log_p_children)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brt_rule_matches_eq_1_7() {
        let m = Mixing::Brt { gamma: 0.3 };
        for c in 2..12 {
            let p = m.node_prior(c, 40, 0.0);
            let pi = 1.0 - 0.7_f64.powi(c as i32 - 1);
            assert!((p.log_pi - pi.ln()).abs() < 1e-13);
            assert!((p.log_1m_pi - (1.0 - pi).ln()).abs() < 1e-13);
        }
    }

    #[test]
    fn gamma_and_brt_agree_on_binary_nodes() {
        let (a, b) = (Mixing::Gamma { gamma: 0.42 }, Mixing::Brt { gamma: 0.42 });
        let (pa, pb) = (a.node_prior(2, 7, 0.0), b.node_prior(2, 7, 0.0));
        assert!((pa.log_pi - pb.log_pi).abs() < 1e-15);
        assert!((pa.log_1m_pi - pb.log_1m_pi).abs() < 1e-15);
    }

    #[test]
    fn dp_rule_reproduces_crp_weights_for_a_cherry() {
        // Two leaves: d = a Γ(2) + a², π = a / (a + a²) = 1 / (1 + a).
        let a = 2.5;
        let m = Mixing::Dp { alpha: a };
        let p = m.node_prior(2, 2, 2.0 * m.leaf_log_d());
        assert!((p.log_pi - (1.0 / (1.0 + a)).ln()).abs() < 1e-14);
        assert!((p.log_d - (a + a * a).ln()).abs() < 1e-14);
        assert!((p.log_pi.exp() + p.log_1m_pi.exp() - 1.0).abs() < 1e-14);
    }

    #[test]
    fn tables_reproduce_the_rules_exactly() {
        for mixing in [
            Mixing::Brt { gamma: 0.3 },
            Mixing::Gamma { gamma: 0.6 },
            Mixing::Dp { alpha: 1.7 },
        ] {
            let table = PriorTable::new(mixing, 20);
            let root = Summary::internal(&mixing, 6, 3, -10.0, -12.0, 1.5);
            for (c, n, ld) in [(2, 2, 1.0), (5, 9, -3.0), (20, 20, 0.5), (30, 40, 2.0)] {
                assert_eq!(
                    NodePriors::node_prior(&table, c, n, ld),
                    mixing.node_prior(c, n, ld)
                );
                for dissolved in [&[][..], &[&root][..], &[&root, &root][..]] {
                    assert_eq!(
                        NodePriors::split_ratio(&table, c, n, ld, 0.7, dissolved),
                        mixing.split_ratio(c, n, ld, 0.7, dissolved)
                    );
                }
            }
        }
    }

    #[test]
    fn parameters_are_checked() {
        assert!(Mixing::Brt { gamma: 0.0 }.check().is_err());
        assert!(Mixing::Gamma { gamma: 1.0 }.check().is_err());
        assert!(Mixing::Brt { gamma: f64::NAN }.check().is_err());
        assert!(Mixing::Dp { alpha: -1.0 }.check().is_err());
        assert!(Mixing::Dp { alpha: 0.5 }.check().is_ok());
    }
}
