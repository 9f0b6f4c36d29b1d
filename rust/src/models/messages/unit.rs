//! Isotropic Brownian messages in units of the rate, with the rate split out of their
//! normalisers (Knowles & Ghahramani eq 10; Teh, Daumé & Roy eqs 11–13).
//!
//! Brownian motion with covariance `σ²I` per unit time is [`BrownianDiffusion`] with
//! `Λ = σ²I`. Its messages `N(y; μ, σ² v I)` are kept here by the mean `μ` (in data
//! coordinates, not whitened) and the variance factor `v` in units of `σ²`: propagating along
//! a branch of length `ℓ` (`v ↦ v + ℓ`) and multiplying messages (eq 13) never involve
//! `σ²`. Only the normalisers do. Merging `N(μ₁, σ² v₁ I)` and `N(μ₂, σ² v₂ I)` in `D`
//! dimensions gives
//!
//! ```text
//!   ln Z = −(D/2) ln(2πσ²) − (D/2) ln(v₁ + v₂) − ‖μ₁ − μ₂‖² / (2σ² (v₁ + v₂))   (eq 11),
//! ```
//!
//! so `k` such normalisers sum to
//!
//! ```text
//!   Σ ln Z = −(k D/2) ln(2πσ²) − (D/2) L − Q / (2σ²),
//!   L = Σ ln(v₁ + v₂),   Q = Σ ‖μ₁ − μ₂‖² / (v₁ + v₂),
//! ```
//!
//! where `k`, `L` and `Q` do not depend on `σ²` ([`SplitLogZ`]). A [`UnitMessage`] carries,
//! besides `μ` and `v`, the split normalisers of every merge below it, so a tree's
//! likelihood at a new `σ²` costs `O(1)` ([`SplitLogZ::log_z`]) once the messages are
//! known, and a change below one node costs one pass up its path.
//!
//! Merging the children of a node one at a time gives the same product and the same total
//! normaliser as eq 13's `k`-way product (the product of Gaussians is associative); a node
//! with `K` children contributes `K − 1` factors. With the root pinned at the origin (the
//! diffusion tree's `y(0) = 0`) the root's message, propagated along the branch from the
//! origin, is integrated against a point mass at 0 ([`UnitMessage::against_origin`]): one
//! more factor, so that a tree over `N` points has `N` of them.
//!
//! # Two-way passing
//! The message that reaches a node's location from outside its subtree, and the posterior
//! there, follow from the same algebra:
//! - at a branch point with the message from above `N(μ_0, σ² v_0)` and children's messages
//!   `N(μ_i, σ² v_i)` (each propagated to the branch point), child `k`'s outside message is
//!   the product of all but its own, in precision form `1/v = Σ_{i≠k} 1/v_i`,
//!   `μ/v = Σ_{i≠k} μ_i/v_i`, with no difference that could lose the digits of a short
//!   branch ([`Outside`]);
//! - a node `v` whose own message is `N(μ_v, σ² u)`, below its parent `a` by `ℓ`, given the
//!   parent's value: `x_v | x_a ~ N(k x_a + (1 − k) μ_v, σ² ℓu/(ℓ + u))`, `k = u/(ℓ + u)`
//!   ([`UnitMessage::given_parent`]), whence the posterior marginals top-down and
//!   backward sampling;
//! - a third message `N(y, σ² v_l)` joining a branch at a point where the messages from
//!   below and above have variance factors `v_a`, `v_b`: the posterior there is
//!   `N(μ_u + w(μ_o − μ_u), σ² v_a v_b/(v_a + v_b))`, `w = v_a/(v_a + v_b)`, and the join's
//!   normaliser is eq 11 with `v₁ + v₂ = v_a v_b/(v_a + v_b) + v_l` and the squared
//!   distance a quadratic in `w` ([`BranchJoin`]: `O(D)` once, `O(1)` per point).
//!
//! [`BrownianDiffusion`]: super::BrownianDiffusion

use std::f64::consts::PI;

/// The `σ²`-free parts of a sum of isotropic Brownian merge normalisers (see the
/// [module docs](self)): their number `k`, `L = Σ ln(v₁ + v₂)` and
/// `Q = Σ ‖μ₁ − μ₂‖²/(v₁ + v₂)`.
///
/// # Examples
/// One merge of two points `1` apart at total variance factor `2`, in one dimension, with
/// `σ² = 3`: eq 11 is `ln N(1; 0, 6)`.
/// ```
/// use rosetree::models::messages::SplitLogZ;
///
/// let z = SplitLogZ::normal(1.0, 2.0);
/// let want = -0.5 * (2.0 * std::f64::consts::PI * 6.0).ln() - 1.0 / 12.0;
/// assert!((z.log_z(1, 3.0) - want).abs() < 1e-15);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SplitLogZ {
    /// `k`, the number of normalisers.
    pub factors: usize,
    /// `L = Σ ln(v₁ + v₂)`.
    pub ln_var: f64,
    /// `Q = Σ ‖μ₁ − μ₂‖²/(v₁ + v₂)`.
    pub quad: f64,
}

impl SplitLogZ {
    /// One normaliser: the density of a difference of means with squared norm `sq_dist`
    /// at variance factor `var` (eq 11).
    #[must_use]
    pub fn normal(sq_dist: f64, var: f64) -> Self {
        Self {
            factors: 1,
            ln_var: var.ln(),
            quad: sq_dist / var,
        }
    }

    /// `Σ ln Z = −(k D/2) ln(2πσ²) − (D/2) L − Q/(2σ²)` in `d` dimensions at rate `sigma2`;
    /// `0` when `d = 0` (messages without features have no normaliser).
    #[must_use]
    pub fn log_z(&self, d: usize, sigma2: f64) -> f64 {
        if d == 0 {
            return 0.0;
        }
        let (n, d) = (self.factors as f64, d as f64);
        -0.5 * n * d * (2.0 * PI * sigma2).ln() - 0.5 * d * self.ln_var - 0.5 * self.quad / sigma2
    }
}

impl std::ops::AddAssign for SplitLogZ {
    /// The normalisers of both: counts and both sums added.
    fn add_assign(&mut self, other: Self) {
        self.factors += other.factors;
        self.ln_var += other.ln_var;
        self.quad += other.quad;
    }
}

/// An isotropic Brownian message `N(y; μ, σ² v I)` in units of the rate `σ²`, with the
/// split normalisers of the merges below it (see the [module docs](self)). `v = 0` is a
/// point mass (an observed leaf), `v = ∞` the uninformative message.
///
/// # Examples
/// Three points in one dimension merged below a node at time `t`, then against the origin:
/// the diffusion tree's likelihood at any `σ²` from one pass.
/// ```
/// use rosetree::models::messages::UnitMessage;
///
/// let (t1, t2) = (0.3, 0.6); // ((0, 1) at t2, 2) at t1, leaves at t = 1
/// let leaf = |x: f64| UnitMessage::point(vec![x]);
/// let mut cherry = UnitMessage::uninformative(1);
/// cherry.absorb(&leaf(0.5), 1.0 - t2);
/// cherry.absorb(&leaf(-0.2), 1.0 - t2);
/// let mut root = UnitMessage::uninformative(1);
/// root.absorb(&cherry, t2 - t1);
/// root.absorb(&leaf(1.1), 1.0 - t1);
/// let z = root.against_origin(t1);
/// assert_eq!(z.factors, 3);
/// for sigma2 in [0.5, 2.0] {
///     assert!(z.log_z(1, sigma2).is_finite());
/// }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UnitMessage {
    mean: Vec<f64>,
    var: f64,
    log_z: SplitLogZ,
}

impl UnitMessage {
    /// The point mass at `mean` (`v = 0`, no normaliser): an observed leaf.
    #[must_use]
    pub fn point(mean: Vec<f64>) -> Self {
        Self {
            mean,
            var: 0.0,
            log_z: SplitLogZ::default(),
        }
    }

    /// `N(mean, σ² var I)`, no normaliser: a leaf observed with noise of variance factor
    /// `var` (`var = ∞`: unobserved).
    #[must_use]
    pub fn observed(mean: Vec<f64>, var: f64) -> Self {
        Self {
            mean,
            var,
            log_z: SplitLogZ::default(),
        }
    }

    /// The uninformative message in `d` dimensions (`v = ∞`), the start of a product.
    #[must_use]
    pub fn uninformative(d: usize) -> Self {
        Self {
            mean: vec![0.0; d],
            var: f64::INFINITY,
            log_z: SplitLogZ::default(),
        }
    }

    /// The mean `μ`.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// The variance factor `v`: the covariance is `σ² v I`.
    pub fn var(&self) -> f64 {
        self.var
    }

    /// The split normalisers of every merge below this message.
    pub fn log_z(&self) -> &SplitLogZ {
        &self.log_z
    }

    /// Multiplies in `child`'s message propagated along a branch of length `branch`
    /// (`N(μ_c, σ²(v_c + ℓ))`), adding the child's own normalisers and, unless this
    /// message is still uninformative, the merge's (eqs 11, 13):
    /// `v ← v v_k/(v + v_k)`, `μ ← (μ v_k + μ_c v)/(v + v_k)`, `L += ln(v + v_k)`,
    /// `Q += ‖μ − μ_c‖²/(v + v_k)` with `v_k = v_c + ℓ`. An uninformative child changes
    /// nothing; `child` must have this message's dimension.
    #[inline]
    pub fn absorb(&mut self, child: &UnitMessage, branch: f64) {
        self.log_z += child.log_z;
        let var_k = child.var + branch;
        if var_k == f64::INFINITY {
            return;
        }
        if self.var == f64::INFINITY {
            self.mean.copy_from_slice(&child.mean);
            self.var = var_k;
            return;
        }
        let total = self.var + var_k;
        self.log_z.factors += 1;
        self.log_z.ln_var += total.ln();
        let mut dist = 0.0;
        for (m, &mk) in self.mean.iter_mut().zip(&child.mean) {
            dist += (*m - mk) * (*m - mk);
            *m = (*m * var_k + mk * self.var) / total;
        }
        self.log_z.quad += dist / total;
        self.var = self.var * var_k / total;
    }

    /// The split normalisers of the whole tree below this message when it is propagated
    /// along a further branch of length `branch` and integrated against the point mass at
    /// the origin: one more factor, `ln(v + ℓ)` and `‖μ‖²/(v + ℓ)` (the diffusion tree's
    /// root, eq 10). An uninformative message adds nothing.
    #[must_use]
    pub fn against_origin(&self, branch: f64) -> SplitLogZ {
        let s = self.var + branch;
        if s == f64::INFINITY {
            return self.log_z;
        }
        SplitLogZ {
            factors: self.log_z.factors + 1,
            ln_var: self.log_z.ln_var + s.ln(),
            quad: self.log_z.quad + self.mean.iter().map(|m| m * m).sum::<f64>() / s,
        }
    }

    /// The law of this node's value given its parent's, a branch of length `branch` above
    /// it, and the data below it (this message): see [`Bridge`].
    #[must_use]
    pub fn given_parent(&self, branch: f64) -> Bridge {
        let (u, ell) = (self.var, branch);
        let (parent, var) = if u == 0.0 {
            (0.0, 0.0)
        } else {
            (u / (ell + u), ell * u / (ell + u))
        };
        Bridge {
            parent,
            own: ell / (ell + u),
            var,
        }
    }

    /// The posterior marginal of this node's value given all the data,
    /// `N(m_v, σ² P_v I)`, from its parent's `N(m_a, σ² P_a I)` (`parent = None`: the
    /// origin, `m_a = 0`, `P_a = 0`) across a branch of length `branch`, written into
    /// `mean`; returns `P_v` and the expected squared length of the branch
    /// `E‖x_v − x_a‖² = (1 − k)² (‖μ_v − m_a‖² + Dσ² P_a) + Dσ² ℓu/(ℓ + u)`, with
    /// `P_v = k² P_a + ℓu/(ℓ + u)` and `m_v = k m_a + (1 − k) μ_v` ([`Bridge`]).
    pub fn posterior_below(
        &self,
        branch: f64,
        (parent, parent_var): (Option<&[f64]>, f64),
        sigma2: f64,
        mean: &mut [f64],
    ) -> (f64, f64) {
        let b = self.given_parent(branch);
        let df = self.mean.len() as f64;
        let mut dist = 0.0;
        for (j, (out, &mu)) in mean.iter_mut().zip(&self.mean).enumerate() {
            let m_a = parent.map_or(0.0, |p| p[j]);
            dist += (mu - m_a).powi(2);
            *out = b.parent * m_a + b.own * mu;
        }
        let stat = b.own * b.own * (dist + df * sigma2 * parent_var) + df * sigma2 * b.var;
        (b.parent * b.parent * parent_var + b.var, stat)
    }
}

/// A node's value given its parent's value `x_a` and the data below it:
/// `N(parent · x_a + own · μ_v, σ² var I)` with `parent = u/(ℓ + u)`, `own = ℓ/(ℓ + u)`
/// (`1 − parent`, without its cancellation) and `var = ℓu/(ℓ + u)`, where `N(μ_v, σ² u)` is
/// the node's message and `ℓ` its branch: the product of `N(x_a, σ²ℓ)` and the message.
/// A point mass (`u = 0`) gives `parent = 0`, `own = 1`, `var = 0`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bridge {
    /// The weight of the parent's value.
    pub parent: f64,
    /// The weight of the node's own message mean.
    pub own: f64,
    /// The conditional variance factor.
    pub var: f64,
}

/// The outside messages of a branch point's children in precision form (see the
/// [module docs](self)): given the message from above and each child's message at the
/// branch point, each child gets the product of all the others. Messages live in flat
/// per-node buffers, `d` means per node; the buffers of the sums are kept between nodes.
///
/// The precisions of the others are summed from the left and from the right (no
/// difference, which would lose the digits of a child on a short branch). The natural
/// means are the total less the child's own, `η − μ_k/v_k`: that difference loses digits
/// only where the child's precision exceeds that of all the others together (then its own
/// term dominates the total), and for that child, at most one per branch point, the others
/// are summed directly. Elsewhere the child's own term is at most the others' weight, and
/// the error is a few units in the last place of the largest mean involved.
///
/// # Examples
/// ```
/// use rosetree::models::messages::Outside;
///
/// // Node 0 is the branch point, with N(0, 1) from above; its children 1 and 2 send
/// // N(2, 1) and N(4, 2).
/// let (mut means, mut vars) = (vec![0.0; 3], vec![1.0, 0.0, 0.0]);
/// let children: [(usize, &[f64], f64); 2] = [(1, &[2.0], 1.0), (2, &[4.0], 2.0)];
/// Outside::default().compute(&mut means, &mut vars, (0, 1.0), &children);
/// // Child 2 sees the product of N(0, 1) and N(2, 1): N(1, 1/2).
/// assert_eq!((means[2], vars[2]), (1.0, 0.5));
/// ```
#[derive(Debug, Clone, Default)]
pub struct Outside {
    /// The natural mean from above, and the total with every child's.
    above_eta: Vec<f64>,
    total_eta: Vec<f64>,
    /// Each child's precision, and the prefix sum of the precisions before it.
    own_prec: Vec<f64>,
    before_prec: Vec<f64>,
}

impl Outside {
    /// The outside messages of a branch point's children, written into the flat buffers
    /// `means` (`d` values per node) and `vars` (one variance factor per node): the message
    /// from above at the branch point is `N(means of node a, σ² var)` for
    /// `above = (a, var)`, and `children` are `(node, mean, var)` of the children's messages
    /// at the branch point, in order. Child `k`'s precision is `1/var + Σ_{i≠k} 1/var_i`,
    /// its natural mean `mean/var + Σ_{i≠k} mean_i/var_i`.
    pub fn compute(
        &mut self,
        means: &mut [f64],
        vars: &mut [f64],
        (above, var): (usize, f64),
        children: &[(usize, &[f64], f64)],
    ) {
        let Some(&(_, first, _)) = children.first() else {
            return;
        };
        let (d, k) = (first.len(), children.len());
        // Every entry used below is written before it is read.
        if self.total_eta.len() < d {
            self.total_eta.resize(d, 0.0);
            self.above_eta.resize(d, 0.0);
        }
        if self.own_prec.len() < k {
            self.own_prec.resize(k, 0.0);
            self.before_prec.resize(k, 0.0);
        }
        let (above_eta, total) = (&mut self.above_eta[..d], &mut self.total_eta[..d]);
        let from_above = &means[above * d..(above + 1) * d];
        let mut prefix_prec = 1.0 / var;
        for j in 0..d {
            above_eta[j] = from_above[j] * prefix_prec;
            total[j] = above_eta[j];
        }
        for (i, &(_, child, var)) in children.iter().enumerate() {
            let prec = 1.0 / var;
            self.before_prec[i] = prefix_prec;
            self.own_prec[i] = prec;
            prefix_prec += prec;
            for (t, &m) in total.iter_mut().zip(child) {
                *t += m * prec;
            }
        }
        let mut suffix_prec = 0.0;
        for (i, &(slot, child, _)) in children.iter().enumerate().rev() {
            let (own, rest) = (self.own_prec[i], self.before_prec[i] + suffix_prec);
            let v = 1.0 / rest;
            vars[slot] = v;
            let out = &mut means[slot * d..(slot + 1) * d];
            if own <= rest {
                for ((o, &t), &m) in out.iter_mut().zip(&*total).zip(child) {
                    *o = (t - m * own) * v;
                }
            } else {
                // The child outweighs all the others: sum them directly.
                out.copy_from_slice(above_eta);
                for (h, &(_, other, _)) in children.iter().enumerate() {
                    if h != i {
                        let prec = self.own_prec[h];
                        for (o, &m) in out.iter_mut().zip(other) {
                            *o += m * prec;
                        }
                    }
                }
                out.iter_mut().for_each(|o| *o *= v);
            }
            suffix_prec += own;
        }
    }
}

/// A message `N(y, σ² v_l)` joining the posterior at a point of a branch (see the
/// [module docs](self)), for many points of one branch: the dot products of the three means
/// once (`O(D)`), then `O(1)` per point.
///
/// The posterior at a point is the product of the message from below `N(μ_u, σ² v_a)` and
/// the one from above `N(μ_o, σ² v_b)`: mean `μ_u + w(μ_o − μ_u)`, `w = v_a/(v_a + v_b)`.
/// The squared distance `‖y − m‖² = ‖y − μ_u‖² − 2w (y − μ_u)·(μ_o − μ_u) + w² ‖μ_o − μ_u‖²`
/// is expanded about whichever end the posterior mean is nearer (`w ≤ ½`: below) to limit
/// cancellation.
///
/// # Examples
/// ```
/// use rosetree::models::messages::BranchJoin;
///
/// let join = BranchJoin::new(&[0.0, 0.0], &[2.0, 0.0], &[1.0, 1.0]);
/// let at = join.at(1.0, 1.0); // posterior N((1, 0), σ²/2)
/// assert_eq!((at.var, at.weight, at.sq_dist), (0.5, 0.5, 1.0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BranchJoin {
    /// `‖y − μ_u‖²`, `(y − μ_u)·(μ_o − μ_u)`, `‖y − μ_o‖²`, `(y − μ_o)·(μ_u − μ_o)`,
    /// `‖μ_o − μ_u‖²`.
    a_u: f64,
    b_u: f64,
    a_o: f64,
    b_o: f64,
    gap: f64,
}

/// The posterior at one point of a branch and the joining message's distance to it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JoinPoint {
    /// The posterior's variance factor `v_a v_b/(v_a + v_b)`.
    pub var: f64,
    /// `w = v_a/(v_a + v_b)`, the weight of the mean from above.
    pub weight: f64,
    /// `‖y − m‖²`, clamped at 0.
    pub sq_dist: f64,
}

impl BranchJoin {
    /// The join of the message with mean `joining` to the branch whose messages from
    /// below and above have means `below` and `above`.
    #[must_use]
    pub fn new(below: &[f64], above: &[f64], joining: &[f64]) -> Self {
        let (mut a_u, mut b_u, mut a_o, mut b_o, mut gap) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for ((&y, &u), &o) in joining.iter().zip(below).zip(above) {
            let (from_u, from_o, g) = (y - u, y - o, o - u);
            a_u += from_u * from_u;
            b_u += from_u * g;
            a_o += from_o * from_o;
            b_o -= from_o * g;
            gap += g * g;
        }
        Self {
            a_u,
            b_u,
            a_o,
            b_o,
            gap,
        }
    }

    /// `‖μ_o − μ_u‖²`.
    pub fn gap_sq(&self) -> f64 {
        self.gap
    }

    /// The point where the messages from below and above have variance factors `v_a`
    /// (`below`) and `v_b` (`above`); the join's normaliser is eq 11 with the squared
    /// distance `sq_dist` at variance factor `var + v_l`.
    #[must_use]
    pub fn at(&self, below: f64, above: f64) -> JoinPoint {
        let total = below + above;
        let w = below / total;
        JoinPoint {
            var: below * above / total,
            weight: w,
            sq_dist: self.sq_dist(w, || above / total),
        }
    }

    /// [`at`](Self::at) given `inv_total`, the reciprocal of `below + above`: along one
    /// branch the two variance factors trade length and their sum stays the same, so a grid
    /// on a branch needs one division in all instead of two or three per point. (The
    /// weights then round otherwise than [`at`](Self::at)'s.)
    #[must_use]
    pub fn at_scaled(&self, below: f64, above: f64, inv_total: f64) -> JoinPoint {
        let w = below * inv_total;
        JoinPoint {
            var: below * above * inv_total,
            weight: w,
            sq_dist: self.sq_dist(w, || above * inv_total),
        }
    }

    /// `‖y − m‖²` at the weight `w` of the mean from above, expanded about the nearer end
    /// (`1 − w`, when needed, from `above_weight`), clamped at 0.
    #[inline]
    fn sq_dist(&self, w: f64, above_weight: impl FnOnce() -> f64) -> f64 {
        let sq = if w <= 0.5 {
            self.a_u - 2.0 * w * self.b_u + w * w * self.gap
        } else {
            let w = above_weight();
            self.a_o - 2.0 * w * self.b_o + w * w * self.gap
        };
        sq.max(0.0)
    }
}

#[cfg(test)]
mod tests;
