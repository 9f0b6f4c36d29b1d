//! The four merges of greedy rose-tree construction (BRT §1.4, Figure 1.5) and their
//! likelihood-ratio score (eq 1.23), or the merged node's posterior merge probability.

use super::mixing::{Mixing, NodePriors, Summary};
use super::score::{Score, log_add_exp_pair, log_add_exp_score};

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

/// The terms of one operation's score: `u = ln π_m + ln f_m − ln p(a) − ln p(b)`, the split
/// ratio `r − e^{r_small}` ([`Mixing::split_ratio`](super::Mixing::split_ratio)) and the
/// merged node's log odds `ln π_m + ln f_m − ln(1 − π_m) − Σ_children ln p`.
#[derive(Clone, Copy)]
struct Terms {
    u: f64,
    r: f64,
    r_small: f64,
    log_odds: f64,
}

impl Terms {
    /// The terms of `op` on `a` and `b` (`n` leaves in all, `denom = ln p(a) + ln p(b)`,
    /// `parts_log_d = ln d_a + ln d_b`); `dissolved` are the roots that `op` dissolves.
    #[inline(always)]
    fn of(
        mixing: &impl NodePriors,
        op: MergeOp,
        (a, b): (&Summary, &Summary),
        (n, denom, parts_log_d): (usize, f64, f64),
        log_f: f64,
        dissolved: &[&Summary],
    ) -> Self {
        let shape = op.shape(a, b);
        let prior = mixing.node_prior(shape.n_children, n, shape.sum_log_d_children);
        let (r, r_small) = mixing.split_ratio(
            shape.n_children,
            n,
            shape.sum_log_d_children,
            parts_log_d,
            dissolved,
        );
        Self {
            u: prior.log_pi + log_f - denom,
            r,
            r_small,
            log_odds: prior.log_pi + log_f - (prior.log_1m_pi + shape.sum_log_p_children),
        }
    }

    /// `ln L = logaddexp(u, r − e^{r_small} − Σ_dissolved excess)` as a [`Score`].
    #[inline(always)]
    fn score(&self, dissolved: &[&Summary]) -> Score {
        let (u, r, r_small) = (self.u, self.r, self.r_small);
        match dissolved {
            [] if r_small == f64::NEG_INFINITY => log_add_exp_pair(u, r),
            [] => log_add_exp_score(u, r, &[r_small]),
            [x] => log_add_exp_score(u, r, &[r_small, x.log_excess]),
            [x, y, ..] => log_add_exp_score(u, r, &[r_small, x.log_excess, y.log_excess]),
        }
    }

    /// `best`, a `(ln L, log odds, operation)`, or this merge by `op` (dissolving
    /// `dissolved`) if its `ln L` ranks strictly higher, so that ties keep the earlier
    /// operation. A merge that [loses to](Self::loses_to) `join` is not scored.
    #[inline(always)]
    fn better(
        &self,
        best: (Score, f64, MergeOp),
        op: MergeOp,
        join: &Self,
        dissolved: &[&Summary],
    ) -> (Score, f64, MergeOp) {
        if self.loses_to(join, dissolved) {
            return best;
        }
        let s = self.score(dissolved);
        if s.total_cmp(&best.0).is_gt() {
            (s, self.log_odds, op)
        } else {
            best
        }
    }

    /// Whether this absorb or collapse (`self`, dissolving `dissolved`) has a lower `ln L`
    /// than `join`, decided without computing it: a cheap, sound test (`false` says
    /// nothing).
    ///
    /// The dissolving merge has `ln L = r + ln(e^x + e^{−E})` with `x = u − r` and
    /// `E ≥ e^{le}` for the largest dissolved excess `le`, so `ln L < r` when
    /// `e^x < 1 − e^{−E}`. Since `ln(1 − e^{−E}) ≥ min(le, −1) − 0.21` (for `le ≤ −1`,
    /// `1 − e^{−z} ≥ z(1 − z/2)` with `z = e^{le} ≤ 1/e`; above, it grows with `le`), the test
    /// `x ≤ min(le, −1) − 1.5` gives `e^x ≤ e^{−1.29} (1 − e^{−E})`: `ln L` lies below `r` by
    /// far more than any rounding of the exact path, whose score then lies below `r` too. A
    /// join without a small split part scores `logaddexp(u_join, r_join) ≥ r_join`, so the
    /// merge loses whenever `r ≤ r_join` (always under `"brt"`, where every `r` is
    /// `ln(1 − γ)`). Most absorbs and collapses of a greedy search dissolve a root whose
    /// cluster term is hopeless and gain too little cluster term to pay for it: this spares
    /// their transcendental functions. (`le ≤ −10¹²`, where the rounding of `x` could reach
    /// the margin, and NaN take the exact path.)
    #[inline(always)]
    fn loses_to(&self, join: &Self, dissolved: &[&Summary]) -> bool {
        if !(self.r_small == f64::NEG_INFINITY
            && join.r_small == f64::NEG_INFINITY
            && self.r <= join.r)
        {
            return false;
        }
        let x = self.u - self.r;
        let mut le = f64::NEG_INFINITY;
        for d in dissolved {
            if d.log_excess.is_nan() {
                return false;
            }
            if d.log_excess > le {
                le = d.log_excess;
            }
        }
        x <= -2.5 && le > -1e12 && x <= le - 1.5
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
///
/// An absorb or collapse that provably ranks below the join is not scored (see
/// `Terms::loses_to`); in binary mode under [`MergeRule::Posterior`] no `ln L` is computed.
/// Neither changes any result.
#[inline(always)]
pub fn best_merge(
    mixing: &impl NodePriors,
    binary: bool,
    rule: MergeRule,
    a: &Summary,
    b: &Summary,
    log_f: f64,
) -> (Score, MergeOp) {
    // The join alone is small enough to inline into the pair-scoring loop.
    if binary || !(a.is_internal() || b.is_internal()) {
        let join = Terms::of(mixing, MergeOp::Join, (a, b), pair_totals(a, b), log_f, &[]);
        let key = match rule {
            MergeRule::LikelihoodRatio => join.score(&[]),
            MergeRule::Posterior => Score::from_f64(join.log_odds),
        };
        return (key, MergeOp::Join);
    }
    best_rose_merge(mixing, rule, a, b, log_f)
}

/// `n`, `ln p(a) + ln p(b)` and `ln d_a + ln d_b` of a pair.
#[inline(always)]
fn pair_totals(a: &Summary, b: &Summary) -> (usize, f64, f64) {
    (
        a.n_leaves + b.n_leaves,
        a.log_p + b.log_p,
        a.log_d + b.log_d,
    )
}

/// [`best_merge`] in rose-tree mode when `a` or `b` is internal: the join against the
/// absorbs and the collapse that apply.
#[inline(never)]
fn best_rose_merge(
    mixing: &impl NodePriors,
    rule: MergeRule,
    a: &Summary,
    b: &Summary,
    log_f: f64,
) -> (Score, MergeOp) {
    let pair = pair_totals(a, b);
    let join = Terms::of(mixing, MergeOp::Join, (a, b), pair, log_f, &[]);
    // Plain calls rather than closures, so that the best so far stays in registers.
    let mut best = (join.score(&[]), join.log_odds, MergeOp::Join);
    if a.is_internal() {
        let t = Terms::of(mixing, MergeOp::Absorb, (a, b), pair, log_f, &[a]);
        best = t.better(best, MergeOp::Absorb, &join, &[a]);
    }
    if b.is_internal() {
        let t = Terms::of(mixing, MergeOp::AbsorbReverse, (a, b), pair, log_f, &[b]);
        best = t.better(best, MergeOp::AbsorbReverse, &join, &[b]);
    }
    if a.is_internal() && b.is_internal() {
        let t = Terms::of(mixing, MergeOp::Collapse, (a, b), pair, log_f, &[a, b]);
        best = t.better(best, MergeOp::Collapse, &join, &[a, b]);
    }
    let (score, log_odds, op) = best;
    match rule {
        MergeRule::LikelihoodRatio => (score, op),
        MergeRule::Posterior => (Score::from_f64(log_odds), op),
    }
}

/// An upper bound on the likelihood ratio of a pair's best merge that costs no
/// transcendental function, for the engine's test of a pair against a candidate list's
/// floor ([`Linkage::score_above`](crate::agglomerate::Linkage::score_above)).
///
/// Where every merge that [`best_merge`] considers has the same split ratio `r` and no
/// small split part (joins, absorbs and collapses under `"brt"`, where `r = ln(1 − γ)`;
/// joins under `"gamma"`), each scores `logaddexp(u_op, r − E_op)` with `E_op ≥ 0`, at most
/// `r + ln(1 + e^{u_op − r})`, and `u_op = ln π_op + ln f − ln p(a) − ln p(b)` is largest
/// for the operation with the most children (`π` grows with the child count under
/// `"brt"`). So the pair's `ln L` is at most `r + ln(1 + eˣ)` with
/// `x = ln π_max + ln f − ln p(a) − ln p(b) − r`, and ranks below a floor
/// `F` whenever `x` lies below [`Score::softplus_cutoff`]`(F, r)`: no exponential, no
/// logarithm, and with a cheap estimate of `ln f`, not even the exact `ln f`. Under
/// [`MergeRule::Posterior`] and `"dp"` there is no bound.
#[derive(Debug, Clone, Copy)]
pub struct GainBound {
    /// The split ratio of the merges the bound covers.
    r: f64,
    /// Whether absorbs and collapses share `r` (`"brt"`) or only joins do (`"gamma"`).
    every_op: bool,
}

impl GainBound {
    /// The bound for `mixing` under `rule`, if there is one.
    pub fn new(mixing: &Mixing, rule: MergeRule) -> Option<Self> {
        if rule != MergeRule::LikelihoodRatio {
            return None;
        }
        let every_op = match mixing {
            Mixing::Brt { .. } => true,
            Mixing::Gamma { .. } => false,
            Mixing::Dp { .. } => return None,
        };
        // The join's split ratio, as `Terms::of` computes it (bit for bit: under "brt" every
        // operation's ratio is the integer coefficient 1 times ln(1 − γ)).
        let (r, r_small) = mixing.split_ratio(2, 2, 0.0, 0.0, &[]);
        (r.is_finite() && r_small == f64::NEG_INFINITY).then_some(Self { r, every_op })
    }

    /// The split ratio `r` of the covered merges.
    pub fn r(&self) -> f64 {
        self.r
    }

    /// `ln π` of the covered merge of trees with `n_children` children each (`0` for a
    /// leaf) and `n_leaves` leaves in all that has the most children, or `None` where some
    /// merge that [`best_merge`] considers is not covered.
    #[inline(always)]
    pub fn log_pi_max(
        &self,
        mixing: &impl NodePriors,
        binary: bool,
        (a, b): (usize, usize),
        n_leaves: usize,
    ) -> Option<f64> {
        let n_children = if binary || (a == 0 && b == 0) {
            2
        } else if self.every_op {
            // A collapse where both are internal, else the absorb into the internal one.
            a.max(1) + b.max(1)
        } else {
            return None;
        };
        Some(mixing.node_prior(n_children, n_leaves, 0.0).log_pi)
    }

    /// Whether a pair with `ln f` of its union at most `log_f` (as the search computes
    /// it) and `ln p` of its trees `(ln p(a), ln p(b))` provably ranks below the floor whose
    /// [`softplus_cutoff`](Score::softplus_cutoff) is `cutoff`; `log_pi` is
    /// [`log_pi_max`](Self::log_pi_max). The margin, a relative `1e-9` of the terms of `x`,
    /// covers the rounding of `x` here and in the exact score. `false` for NaN.
    #[inline(always)]
    pub fn below(&self, cutoff: f64, log_pi: f64, log_f: f64, (a, b): (f64, f64)) -> bool {
        let x = log_pi + log_f - (a + b) - self.r;
        let terms = log_pi.abs() + log_f.abs() + a.abs() + b.abs() + self.r.abs();
        x + 1e-9 * (1.0 + terms) < cutoff
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

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    use super::super::mixing::{Mixing, PriorTable};
    use super::*;
    use crate::math::log_sum_exp;

    /// [`best_merge`] without its fast paths, as it was written before them: every
    /// applicable operation scored exactly, the best kept (ties to the earlier operation).
    fn best_merge_reference(
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

    /// A tree's summary: a leaf, or a root whose log odds `u − v` (cluster term against
    /// split term) range from `−10¹³` through the plausible to far above, so that its
    /// excess ranges from `e^{−10¹³}` to large; now and then a non-finite excess.
    fn random_summary(rng: &mut Xoshiro256PlusPlus, mixing: &Mixing) -> Summary {
        if rng.random_bool(0.3) {
            return Summary::leaf(rng.random_range(-300.0..0.0), mixing);
        }
        let n_children = rng.random_range(2..7);
        let n_leaves = n_children + rng.random_range(0..40);
        let log_f = rng.random_range(-3000.0..-1.0);
        let log_odds = match rng.random_range(0..8) {
            0 => rng.random_range(-5000.0..-60.0),
            1 => -(10f64.powf(rng.random_range(4.0..13.5))),
            2 => rng.random_range(0.0..60.0),
            _ => rng.random_range(-60.0..5.0),
        };
        let sum_log_d_children = rng.random_range(-40.0..40.0);
        let mut s = Summary::internal(
            mixing,
            n_leaves,
            n_children,
            log_f,
            log_f - log_odds,
            sum_log_d_children,
        );
        // Excesses that no real tree has, to check that the fast paths leave them alone.
        if rng.random_bool(0.05) {
            s.log_excess = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY][rng.random_range(0..3)];
        }
        s
    }

    /// `ln f` of the union of `a` and `b` placing `u − r` of the join, or of an absorb or
    /// collapse, where the fast paths decide: plausible and hopeless merges, the edges of
    /// `Terms::loses_to` (`x = le − 1.5`, `x = −2.5`), near-ties of a dissolving merge with
    /// the join, and non-finite values.
    fn random_log_f(
        rng: &mut Xoshiro256PlusPlus,
        prior: &impl NodePriors,
        a: &Summary,
        b: &Summary,
    ) -> f64 {
        let pair = pair_totals(a, b);
        let join = Terms::of(prior, MergeOp::Join, (a, b), pair, 0.0, &[]);
        // ln f that puts the join's u − r at x.
        let at = |x: f64| x + join.r - join.u;
        let nudge = |rng: &mut Xoshiro256PlusPlus, x: f64| {
            let step = x.abs().max(1.0) * f64::EPSILON;
            x + step * f64::from(rng.random_range(-4i32..=4))
        };
        let dissolving: Vec<(MergeOp, Vec<&Summary>)> = [
            (a.is_internal(), MergeOp::Absorb, vec![a]),
            (b.is_internal(), MergeOp::AbsorbReverse, vec![b]),
            (
                a.is_internal() && b.is_internal(),
                MergeOp::Collapse,
                vec![a, b],
            ),
        ]
        .into_iter()
        .filter(|c| c.0)
        .map(|(_, op, d)| (op, d))
        .collect();
        let kind = rng.random_range(0..10);
        if kind >= 4 && !dissolving.is_empty() {
            let (op, dissolved) = &dissolving[rng.random_range(0..dissolving.len())];
            let t = Terms::of(prior, *op, (a, b), pair, 0.0, dissolved);
            // ln f that puts this operation's u − r at x.
            let at_op = |x: f64| x + t.r - t.u;
            let le = log_sum_exp(&dissolved.iter().map(|d| d.log_excess).collect::<Vec<_>>());
            let x = match kind {
                4 | 5 => nudge(rng, le - 1.5),
                6 => nudge(rng, -2.5),
                // e^x + e^{−E} = 1 + e^{x_join}: the exact tie with the join (brt, gamma).
                7 | 8 => {
                    let gain = t.u - join.u;
                    let split = (-(-le.exp()).exp_m1()).ln().max(le);
                    nudge(rng, split - (gain.exp_m1()).ln())
                }
                _ => rng.random_range(-100.0..40.0),
            };
            return at_op(x);
        }
        match kind {
            0 => at(rng.random_range(-80.0..40.0)),
            1 => at(rng.random_range(-5000.0..-80.0)),
            2 => {
                let edge = [-37.0, -38.1, -708.4, -745.2][rng.random_range(0..4)];
                at(nudge(rng, edge))
            }
            _ => [f64::NAN, f64::NEG_INFINITY, f64::INFINITY, at(-1e14)][rng.random_range(0..4)],
        }
    }

    fn mixings() -> [Mixing; 5] {
        [
            Mixing::Brt { gamma: 0.5 },
            Mixing::Brt { gamma: 0.05 },
            Mixing::Gamma { gamma: 0.3 },
            Mixing::Dp { alpha: 1.5 },
            Mixing::Dp { alpha: 1e-3 },
        ]
    }

    /// The fast paths return the reference's score, bit for bit, and its operation, for
    /// every mixing rule (tabulated or not), mode and merge rule.
    #[test]
    fn fast_paths_match_the_exact_path_bit_for_bit() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(20_240_611);
        let mut skipped = 0;
        let mut dissolving_wins = 0;
        for mixing in mixings() {
            // A table too short for some of the trees, so that untabulated priors are used.
            let table = PriorTable::new(mixing, 30);
            for _ in 0..20_000 {
                let a = random_summary(&mut rng, &mixing);
                let b = random_summary(&mut rng, &mixing);
                let log_f = random_log_f(&mut rng, &table, &a, &b);
                for binary in [false, true] {
                    for rule in [MergeRule::LikelihoodRatio, MergeRule::Posterior] {
                        let fast = best_merge(&table, binary, rule, &a, &b, log_f);
                        let exact = best_merge_reference(&table, binary, rule, &a, &b, log_f);
                        assert_eq!(
                            (fast.0.to_bits(), fast.1),
                            (exact.0.to_bits(), exact.1),
                            "{mixing:?} binary={binary} {rule:?}\n{a:?}\n{b:?}\nlog_f={log_f}"
                        );
                        let direct = best_merge(&mixing, binary, rule, &a, &b, log_f);
                        assert_eq!((direct.0.to_bits(), direct.1), (fast.0.to_bits(), fast.1));
                    }
                }
                let pair = pair_totals(&a, &b);
                let join = Terms::of(&table, MergeOp::Join, (&a, &b), pair, log_f, &[]);
                for (op, d) in [
                    (MergeOp::Absorb, vec![&a]),
                    (MergeOp::AbsorbReverse, vec![&b]),
                    (MergeOp::Collapse, vec![&a, &b]),
                ] {
                    if d.iter().all(|s| s.is_internal()) {
                        let t = Terms::of(&table, op, (&a, &b), pair, log_f, &d);
                        skipped += usize::from(t.loses_to(&join, &d));
                    }
                }
                let (_, op) = best_merge(&table, false, MergeRule::LikelihoodRatio, &a, &b, log_f);
                dissolving_wins += usize::from(op != MergeOp::Join);
            }
        }
        // Both outcomes of the test are exercised, and dissolving merges win often.
        assert!(skipped > 10_000, "{skipped}");
        assert!(dissolving_wins > 10_000, "{dissolving_wins}");
    }

    /// Whenever `Terms::loses_to` skips a merge, its exact `ln L` lies below `r` (so below
    /// the join's), with a margin: checked directly as `e^x < 1 − e^{−E}`, evaluated in
    /// double precision where `E = Σ e^{le}` is a double, and through `ln E` where it
    /// underflows.
    #[test]
    fn skipped_merges_score_below_the_split_term() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut checked = 0;
        for mixing in [Mixing::Brt { gamma: 0.5 }, Mixing::Brt { gamma: 0.05 }] {
            for _ in 0..50_000 {
                let a = random_summary(&mut rng, &mixing);
                let b = random_summary(&mut rng, &mixing);
                let log_f = random_log_f(&mut rng, &mixing, &a, &b);
                let pair = pair_totals(&a, &b);
                let join = Terms::of(&mixing, MergeOp::Join, (&a, &b), pair, log_f, &[]);
                for (op, d) in [
                    (MergeOp::Absorb, vec![&a]),
                    (MergeOp::AbsorbReverse, vec![&b]),
                    (MergeOp::Collapse, vec![&a, &b]),
                ] {
                    if !d.iter().all(|s| s.is_internal()) {
                        continue;
                    }
                    let t = Terms::of(&mixing, op, (&a, &b), pair, log_f, &d);
                    if !t.loses_to(&join, &d) {
                        continue;
                    }
                    let les: Vec<f64> = d.iter().map(|s| s.log_excess).collect();
                    let le = if les.contains(&f64::INFINITY) {
                        f64::INFINITY
                    } else {
                        log_sum_exp(&les)
                    };
                    // ln(1 − e^{−E}); below E = 1e-10 it is ln E − E/2 to a relative 1e-11.
                    let ln_split = if le > -23.0 {
                        (-(-le.exp()).exp_m1()).ln()
                    } else {
                        le
                    };
                    let x = t.u - t.r;
                    assert!(x < ln_split - 1.0, "{x} {le} {ln_split}");
                    assert!(t.r <= join.r);
                    let exact = t.score(&d);
                    assert!(exact.total_cmp(&Score::from_f64(t.r)).is_lt());
                    assert!(exact.total_cmp(&join.score(&[])).is_lt());
                    checked += 1;
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }

    /// Whenever [`GainBound`] puts a pair below a floor's cutoff, the pair's exact key
    /// (from [`best_merge_reference`], every operation scored) ranks strictly below the
    /// floor; floors are the keys of other random pairs, and the pairs' `ln f` are drawn
    /// near the floor as well as across the regimes of `random_log_f`.
    #[test]
    fn gain_bound_skips_only_pairs_below_the_floor() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2_024);
        let (mut skipped, mut kept) = (0, 0);
        for mixing in [
            Mixing::Brt { gamma: 0.5 },
            Mixing::Brt { gamma: 0.05 },
            Mixing::Brt { gamma: 1e-6 },
            Mixing::Gamma { gamma: 0.3 },
        ] {
            let bound = GainBound::new(&mixing, MergeRule::LikelihoodRatio).unwrap();
            let table = PriorTable::new(mixing, 30);
            for _ in 0..20_000 {
                let binary = rng.random_bool(0.3);
                let (fa, fb) = (
                    random_summary(&mut rng, &mixing),
                    random_summary(&mut rng, &mixing),
                );
                let f_log_f = random_log_f(&mut rng, &table, &fa, &fb);
                let floor = best_merge_reference(
                    &table,
                    binary,
                    MergeRule::LikelihoodRatio,
                    &fa,
                    &fb,
                    f_log_f,
                )
                .0;
                let Some(cut) = (!floor.is_nan())
                    .then(|| floor.softplus_cutoff(bound.r()))
                    .filter(|&c| c > f64::NEG_INFINITY)
                else {
                    continue;
                };
                let (a, b) = (
                    random_summary(&mut rng, &mixing),
                    random_summary(&mut rng, &mixing),
                );
                let counts = (a.n_children, b.n_children);
                let Some(log_pi) =
                    bound.log_pi_max(&table, binary, counts, a.n_leaves + b.n_leaves)
                else {
                    // Only "gamma" leaves absorbs and collapses uncovered.
                    assert!(matches!(mixing, Mixing::Gamma { .. }) && !binary);
                    assert!(a.is_internal() || b.is_internal());
                    continue;
                };
                // ln f that puts x = u_max − r at, or just around, the cutoff, or anywhere.
                let at = |x: f64| x + bound.r() + a.log_p + b.log_p - log_pi;
                let log_f = match rng.random_range(0..4) {
                    0 => at(cut - rng.random_range(0.0..1e-6) * (1.0 + cut.abs())),
                    1 => at(cut + rng.random_range(-3.0..3.0)),
                    2 => at(cut - rng.random_range(0.0..200.0)),
                    _ => random_log_f(&mut rng, &table, &a, &b),
                };
                let exact =
                    best_merge_reference(&table, binary, MergeRule::LikelihoodRatio, &a, &b, log_f);
                if bound.below(cut, log_pi, log_f, (a.log_p, b.log_p)) {
                    assert!(
                        exact.0.total_cmp(&floor).is_lt(),
                        "{mixing:?} binary={binary}\n{a:?}\n{b:?}\nlog_f={log_f}\nfloor={floor:?}"
                    );
                    skipped += 1;
                } else {
                    kept += 1;
                }
            }
        }
        assert!(skipped > 10_000 && kept > 10_000, "{skipped} {kept}");
        // No bound where the split ratios differ by operation or the rule is the posterior.
        assert!(GainBound::new(&Mixing::Dp { alpha: 1.0 }, MergeRule::LikelihoodRatio).is_none());
        assert!(GainBound::new(&Mixing::Brt { gamma: 0.5 }, MergeRule::Posterior).is_none());
    }

    /// The bound behind `Terms::loses_to`: `ln(1 − e^{−e^{le}}) ≥ min(le, −1) − 0.21`.
    #[test]
    fn split_loss_bound() {
        for k in 0..=20_000 {
            let le = -40.0 + 0.0045 * f64::from(k);
            let exact = (-(-le.exp()).exp_m1()).ln();
            assert!(exact >= le.min(-1.0) - 0.21, "{le}");
        }
    }
}
