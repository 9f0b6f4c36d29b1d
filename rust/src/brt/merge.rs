//! The four merges of greedy rose-tree construction (BRT §1.4, Figure 1.5) and their
//! likelihood-ratio score (eq 1.23).

use super::mixing::{NodePriors, node_log_p};
use crate::tree::Node;

/// How two trees `T_i` (the lower id) and `T_j` become one. The declaration order is the
/// tie-breaking preference of `CONVENTIONS.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MergeOp {
    /// A new node with children `T_i` and `T_j`.
    Join,
    /// `T_j` becomes one more child of `T_i` (needs `T_i` internal).
    Absorb,
    /// `T_i` becomes one more child of `T_j` (needs `T_j` internal).
    AbsorbReverse,
    /// A new node with the children of both (needs both internal).
    Collapse,
}

impl MergeOp {
    /// The operation's name as used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Join => "join",
            Self::Absorb => "absorb",
            Self::AbsorbReverse => "absorb_reverse",
            Self::Collapse => "collapse",
        }
    }
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
        }
    }

    /// The tree node with these quantities and `children`.
    pub fn to_node(&self, children: Vec<usize>) -> Node {
        Node {
            children,
            parent: None,
            n_leaves: self.n_leaves,
            log_f: self.log_f,
            log_p: self.log_p,
            log_pi: self.log_pi,
            log_1m_pi: self.log_1m_pi,
        }
    }

    fn is_internal(&self) -> bool {
        self.n_children > 0
    }
}

/// The best merge of `a` (the lower id) and `b` given `ln f(leaves(a) ∪ leaves(b))`.
/// Returns the log likelihood ratio `ln L(T_m)` (eq 1.23), the operation, and the merged
/// tree's summary. Ties go to the earlier [`MergeOp`].
#[inline]
pub fn best_merge(
    mixing: &impl NodePriors,
    binary: bool,
    a: &Summary,
    b: &Summary,
    log_f: f64,
) -> (f64, MergeOp, Summary) {
    let n = a.n_leaves + b.n_leaves;
    let denom = a.log_p + b.log_p;
    let mut best = (
        MergeOp::Join,
        Summary::internal(mixing, n, 2, log_f, a.log_p + b.log_p, a.log_d + b.log_d),
    );
    if !binary {
        let mut consider = |op: MergeOp, s: Summary| {
            if s.log_p > best.1.log_p {
                best = (op, s);
            }
        };
        if a.is_internal() {
            consider(
                MergeOp::Absorb,
                Summary::internal(
                    mixing,
                    n,
                    a.n_children + 1,
                    log_f,
                    a.sum_log_p_children + b.log_p,
                    a.sum_log_d_children + b.log_d,
                ),
            );
        }
        if b.is_internal() {
            consider(
                MergeOp::AbsorbReverse,
                Summary::internal(
                    mixing,
                    n,
                    b.n_children + 1,
                    log_f,
                    b.sum_log_p_children + a.log_p,
                    b.sum_log_d_children + a.log_d,
                ),
            );
        }
        if a.is_internal() && b.is_internal() {
            consider(
                MergeOp::Collapse,
                Summary::internal(
                    mixing,
                    n,
                    a.n_children + b.n_children,
                    log_f,
                    a.sum_log_p_children + b.sum_log_p_children,
                    a.sum_log_d_children + b.sum_log_d_children,
                ),
            );
        }
    }
    (best.1.log_p - denom, best.0, best.1)
}
