//! The four merges of greedy rose-tree construction (BRT §1.4, Figure 1.5) and their
//! likelihood-ratio score (eq 1.23), or the merged node's posterior merge probability.

use super::NodeValues;
use super::mixing::{NodePriors, node_log_p};
use super::score::{Score, ln_softplus, log_add_exp_pair, log_add_exp_score};

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

/// How candidate merges are ranked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MergeRule {
    /// The log likelihood ratio `ln L = ln p(T_m) − ln p(T_i) − ln p(T_j)` of eq 1.23 (the
    /// BRT chapter's rule).
    #[default]
    LikelihoodRatio,
    /// The posterior merge probability `r_m = π_m f(D_m) / p(D_m | T_m)` of the merged node
    /// (Heller & Ghahramani's BHC; eq 1.26). In rose-tree mode the operation of each pair
    /// (join, absorb, collapse) is still the one with the highest likelihood ratio, and the
    /// pair is ranked by `r` of the node that operation makes.
    Posterior,
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
    /// dissolves this root needs it to be ranked exactly (see [`Score`]). `−∞` for a leaf.
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

    fn is_internal(&self) -> bool {
        self.n_children > 0
    }
}

/// One way of merging `a` and `b`: the merged root's child count and child totals.
#[derive(Clone, Copy)]
struct Shape {
    n_children: usize,
    sum_log_p_children: f64,
    sum_log_d_children: f64,
}

impl MergeOp {
    /// The shape of the root that this operation makes of `a` and `b` (it must apply: an
    /// absorb needs the absorbing tree internal, a collapse both).
    #[inline]
    fn shape(self, a: &Summary, b: &Summary) -> Shape {
        let (n_children, sum_log_p_children, sum_log_d_children) = match self {
            Self::Join => (2, a.log_p + b.log_p, a.log_d + b.log_d),
            Self::Absorb => (
                a.n_children + 1,
                a.sum_log_p_children + b.log_p,
                a.sum_log_d_children + b.log_d,
            ),
            Self::AbsorbReverse => (
                b.n_children + 1,
                b.sum_log_p_children + a.log_p,
                b.sum_log_d_children + a.log_d,
            ),
            Self::Collapse => (
                a.n_children + b.n_children,
                a.sum_log_p_children + b.sum_log_p_children,
                a.sum_log_d_children + b.sum_log_d_children,
            ),
        };
        Shape {
            n_children,
            sum_log_p_children,
            sum_log_d_children,
        }
    }
}

/// The best merge of `a` (the lower id) and `b` given `ln f(leaves(a) ∪ leaves(b))`: its
/// ranking key under `rule` and its operation. Ties between operations go to the earlier
/// [`MergeOp`].
///
/// Under [`MergeRule::LikelihoodRatio`] the key is `ln L(T_m)` (eq 1.23) as a [`Score`] that
/// ranks as exact arithmetic would given the double inputs: `ln L = logaddexp(U, V)` with
/// `U = ln π_m + ln f_m − ln p(a) − ln p(b)` and `V = [ln(1 − π_m) − Σ_dissolved ln(1 − π_k)]
/// − Σ_dissolved excess_k`, where the prior ratio in brackets is computed without losing its
/// small part ([`Mixing::split_ratio`](super::Mixing::split_ratio)) and each dissolved root's excess is carried in
/// log form ([`Summary::log_excess`]). Under [`MergeRule::Posterior`]
/// the key is `u − v = ln π_m + ln f_m − ln(1 − π_m) − Σ_children ln p`, which orders merges
/// as `ln r_m = −ln(1 + e^{v − u})` does without rounding `r` to one.
#[inline]
pub fn best_merge(
    mixing: &impl NodePriors,
    binary: bool,
    rule: MergeRule,
    a: &Summary,
    b: &Summary,
    log_f: f64,
) -> (Score, MergeOp) {
    let n = a.n_leaves + b.n_leaves;
    let denom = a.log_p + b.log_p;
    let parts_log_d = a.log_d + b.log_d;
    // (ln L, u − v) of one operation, given the roots it dissolves.
    let eval = |op: MergeOp, dissolved: &[&Summary]| {
        let shape = op.shape(a, b);
        let prior = mixing.node_prior(shape.n_children, n, shape.sum_log_d_children);
        let u = prior.log_pi + log_f - denom;
        let (r, r_small) = mixing.split_ratio(
            shape.n_children,
            n,
            shape.sum_log_d_children,
            parts_log_d,
            dissolved,
        );
        let score = match dissolved {
            [] if r_small == f64::NEG_INFINITY => log_add_exp_pair(u, r),
            [] => log_add_exp_score(u, r, &[r_small]),
            [x] => log_add_exp_score(u, r, &[r_small, x.log_excess]),
            [x, y, ..] => log_add_exp_score(u, r, &[r_small, x.log_excess, y.log_excess]),
        };
        let log_odds = prior.log_pi + log_f - (prior.log_1m_pi + shape.sum_log_p_children);
        (score, log_odds)
    };
    let (mut score, mut log_odds) = eval(MergeOp::Join, &[]);
    let mut op = MergeOp::Join;
    if !binary {
        let mut consider = |candidate: MergeOp, dissolved: &[&Summary]| {
            let (s, o) = eval(candidate, dissolved);
            if s.total_cmp(&score).is_gt() {
                (score, log_odds, op) = (s, o, candidate);
            }
        };
        if a.is_internal() {
            consider(MergeOp::Absorb, &[a]);
        }
        if b.is_internal() {
            consider(MergeOp::AbsorbReverse, &[b]);
        }
        if a.is_internal() && b.is_internal() {
            consider(MergeOp::Collapse, &[a, b]);
        }
    }
    match rule {
        MergeRule::LikelihoodRatio => (score, op),
        MergeRule::Posterior => (Score::from_f64(log_odds), op),
    }
}

/// The summary of the tree that `op` makes of `a` and `b`, given
/// `ln f(leaves(a) ∪ leaves(b))`.
pub fn merged_summary(
    mixing: &impl NodePriors,
    op: MergeOp,
    a: &Summary,
    b: &Summary,
    log_f: f64,
) -> Summary {
    let shape = op.shape(a, b);
    Summary::internal(
        mixing,
        a.n_leaves + b.n_leaves,
        shape.n_children,
        log_f,
        shape.sum_log_p_children,
        shape.sum_log_d_children,
    )
}
