//! Probit sites on a Gaussian tree: one-dimensional Gaussian messages in precision form, and
//! expectation propagation (Minka 2001; Rasmussen & Williams 2006, §3.6) with the probit
//! factors of binary observations treated as Gaussian pseudo-observations.
//!
//! # The model, one column at a time
//! A tree carries a Gaussian process from a point mass at the origin: along a branch the
//! value moves by `N(0, ℓ)`, `ℓ` the branch's *variance* (for Brownian motion at rate `σ²`,
//! `σ²` times its length; the root node's branch starts at the origin). At leaf `n` the
//! value `z_n` is seen only through its sign `y_n = ±1`: the factor `1[y_n z_n > 0]`, a
//! probit factor whose Gaussian noise is the leaf's own branch. A leaf without an
//! observation has no factor.
//!
//! # Messages in precision form
//! A message `N(μ, v)` is kept as `λ = 1/v`, `η = μ/v` ([`Precision`]); `λ = 0` is the
//! uninformative message, so a leaf without a site and a subtree without sites need no
//! special case. Crossing a branch of variance `ℓ`, `(λ, η) ↦ (λ, η)/(1 + ℓλ)`; a product
//! adds `(λ, η)`. The upward message of a node is the sum of its children's lifted messages
//! ([`ScalarTree::upward`]); the cavity of a leaf is its downward message: the origin's
//! `(1/ℓ_root, 0)`, then at each node on the path the other children's lifted messages added
//! and the branch below crossed ([`ScalarTree::cavity`]). Given the parent's value `x_a`,
//! a node with upward message `(λ, η)` below a branch `ℓ` is
//! `N(f x_a + ℓ f η, ℓ f)` with `f = 1/(1 + ℓλ)` ([`Precision::posterior_below`]).
//!
//! # Expectation propagation
//! The posterior `p(z | y) ∝ N(z; 0, C) Π_n 1[y_n z_n > 0]` (`C` the tree's covariance) is
//! approximated by `N(z; 0, C) Π_n Z̃_n N(z_n; μ̃_n, 1/τ̃_n)`, one Gaussian site per observed
//! leaf.
//!
//! *Cavity.* The product of the prior with every site but `n`'s, marginal at `z_n`, is the
//! message into leaf `n` from the rest of the tree: `N(μ_{−n}, s²)`.
//!
//! *Tilted moments.* With `ẑ = y_n μ_{−n}/s` and `r = φ(ẑ)/Φ(ẑ)`, the normaliser and
//! moments of `1[y z > 0] N(z; μ_{−n}, s²)` are (the truncated normal's; R&W eq 3.58 with
//! its `√(1 + s²)` replaced by `s`, the factor having no unit noise)
//!
//! ```text
//!   Z_n = Φ(ẑ),   μ̂ = μ_{−n} + y_n s r,   σ̂² = s² (1 − g),   g = r (ẑ + r) ∈ (0, 1).
//! ```
//!
//! *Site update* ([`site_update`]). Matching moments, `τ̃_n = 1/σ̂² − 1/s²` and
//! `τ̃_n μ̃_n = μ̂/σ̂² − μ_{−n}/s²`. Written without cancellation (with `μ_{−n} = y_n s ẑ`):
//!
//! ```text
//!   τ̃_n = g / (s² (1 − g)),   μ̃_n = μ_{−n} + y_n s / (ẑ + r),
//! ```
//!
//! since `μ̂/σ̂² − μ_{−n}/s² = y_n r (ẑ² + ẑ r + 1)/(s (1 − g))`, divided by `τ̃_n`. A
//! truncation always shrinks the variance (`0 < g < 1`), so `τ̃_n > 0`: this EP never makes
//! a negative site precision. The sites are updated one at a time, in leaf order, until the
//! tilted means and standard deviations move by less than a tolerance in a sweep
//! ([`ScalarTree::expectation_propagation`]); each update refreshes the upward messages on
//! its leaf's path, so a sweep costs `O(N · depth · K)`.
//!
//! *Normaliser.* `Z̃_n` makes the site reproduce `Z_n` against its cavity:
//! `ln Z̃_n = ln Z_n − ln N(μ_{−n}; μ̃_n, 1/τ̃_n + s²)` ([`site_log_normaliser`]). The
//! approximation of the evidence is
//!
//! ```text
//!   ln p(y) ≈ ln Z_EP = Σ_n ln Z̃_n + ln N(μ̃; 0, C + diag(1/τ̃)),
//! ```
//!
//! the last term being the Gaussian likelihood of the pseudo-observations `μ̃_n` with noise
//! variances `1/τ̃_n` at the leaves (R&W eq 3.65): the normalisers of the products that
//! make the upward messages of the sites, which EP keeps anyway, in split form
//! ([`SplitLogZ`]; [`ScalarTree::log_pseudo_likelihood`]). A Gaussian-likelihood method
//! can use the sites as those pseudo-observations.

use super::SplitLogZ;
use crate::tree::Tree;
use crate::tree::arena::{Arena, NodeId};

/// `(ln Φ(z), φ(z)/Φ(z))`, in double precision for every finite `z`: from `erfc` (libm)
/// for `z ≥ −5`, and below from the continued fraction of Mills' ratio
/// `(1 − Φ(x))/φ(x) = 1/(x + 1/(x + 2/(x + 3/(x + …))))` at `x = −z` (Lentz's method;
/// written by hand, no crate in use has it). The fraction needs at most 25 terms for
/// `x ≥ 5`, keeps full precision where `Φ(z)` underflows (`z < −38`), and is more accurate
/// than libm's `erfc` in the tail (which errs by about `1e-13` at `x = 25`).
pub fn ln_cdf_and_ratio(z: f64) -> (f64, f64) {
    let ln_pdf = -0.5 * z * z - 0.5 * (2.0 * std::f64::consts::PI).ln();
    if z >= -5.0 {
        let tail = 0.5 * libm::erfc(z.abs() * std::f64::consts::FRAC_1_SQRT_2);
        // Φ(z) = 1 − tail above 0 (ln by ln_1p), tail itself below.
        let (ln_cdf, cdf) = if z > 0.0 {
            ((-tail).ln_1p(), 1.0 - tail)
        } else {
            (tail.ln(), tail)
        };
        return (ln_cdf, ln_pdf.exp() / cdf);
    }
    let mills = mills_ratio(-z);
    (ln_pdf + mills.ln(), 1.0 / mills)
}

/// Mills' ratio `(1 − Φ(x))/φ(x)` for `x ≥ 5` by its continued fraction (see
/// [`ln_cdf_and_ratio`]).
pub(crate) fn mills_ratio(x: f64) -> f64 {
    // f = x + 1/(x + 2/(x + …)); the ratio is 1/f. Lentz's method.
    let tiny = 1e-300;
    let mut f = x;
    let (mut c, mut d) = (f, 0.0);
    for k in 1..2000 {
        let a = k as f64;
        d = x + a * d;
        if d.abs() < tiny {
            d = tiny;
        }
        d = 1.0 / d;
        c = x + a / c;
        if c.abs() < tiny {
            c = tiny;
        }
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    1.0 / f
}

/// One probit site's EP update (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SiteUpdate {
    /// The site mean `μ̃`.
    pub mean: f64,
    /// The site precision `τ̃ > 0`.
    pub precision: f64,
    /// The tilted distribution's mean `μ̂`.
    pub tilted_mean: f64,
    /// The tilted distribution's standard deviation `σ̂`.
    pub tilted_sd: f64,
    /// `ln Z_n = ln Φ(ẑ)`, the tilted normaliser.
    pub ln_z: f64,
}

/// The EP update of the probit site of sign `y = ±1` from its cavity `N(mean, var)`
/// (see the [module docs](self)).
///
/// # Examples
/// A flat cavity around 0 truncated to `z > 0`: `Z = ½`, `μ̂ = √(2/π)`.
/// ```
/// use rosetree::models::messages::site_update;
///
/// let s = site_update(0.0, 1.0, 1.0);
/// assert!((s.ln_z - 0.5f64.ln()).abs() < 1e-15);
/// assert!((s.tilted_mean - (2.0 / std::f64::consts::PI).sqrt()).abs() < 1e-15);
/// assert!(s.precision > 0.0);
/// ```
pub fn site_update(mean: f64, var: f64, y: f64) -> SiteUpdate {
    let s = var.sqrt();
    let zh = y * mean / s;
    let (ln_z, r) = ln_cdf_and_ratio(zh);
    let g = r * (zh + r);
    SiteUpdate {
        mean: mean + y * s / (zh + r),
        precision: g / (var * (1.0 - g)),
        tilted_mean: mean + y * s * r,
        tilted_sd: s * (1.0 - g).sqrt(),
        ln_z,
    }
}

/// `ln Z̃_n`, the normaliser that makes the site `N(site_mean, 1/site_precision)` reproduce
/// the tilted normaliser against the cavity `N(mean, var)` (see the [module docs](self));
/// for a flat site (`τ̃` below the smallest normal double) the constant `Z_n` itself.
pub fn site_log_normaliser(
    (mean, var): (f64, f64),
    y: f64,
    site_mean: f64,
    site_precision: f64,
) -> f64 {
    let ln_z = ln_cdf_and_ratio(y * mean / var.sqrt()).0;
    if site_precision >= f64::MIN_POSITIVE {
        let sq = (mean - site_mean) * (mean - site_mean);
        ln_z - SplitLogZ::normal(sq, 1.0 / site_precision + var).log_z(1, 1.0)
    } else {
        ln_z
    }
}

/// A one-dimensional Gaussian message `N(μ, v)` in precision form `λ = 1/v`, `η = μ/v`
/// (see the [module docs](self)); the default `(0, 0)` is uninformative.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Precision {
    /// `λ = 1/v`.
    pub lambda: f64,
    /// `η = μ/v`.
    pub eta: f64,
}

impl Precision {
    /// The site or observation `N(mean, 1/precision)`.
    #[must_use]
    pub fn site(mean: f64, precision: f64) -> Self {
        Self {
            lambda: precision,
            eta: precision * mean,
        }
    }

    /// The message after crossing a branch of variance `len`: `(λ, η)/(1 + ℓλ)`.
    #[must_use]
    pub fn propagate(self, len: f64) -> Self {
        let f = 1.0 / (1.0 + len * self.lambda);
        Self {
            lambda: self.lambda * f,
            eta: self.eta * f,
        }
    }

    /// The product of two messages: the sum of the natural parameters.
    #[must_use]
    pub fn times(self, other: Self) -> Self {
        Self {
            lambda: self.lambda + other.lambda,
            eta: self.eta + other.eta,
        }
    }

    /// `(μ, v) = (η/λ, 1/λ)`.
    pub fn moments(self) -> (f64, f64) {
        (self.eta / self.lambda, 1.0 / self.lambda)
    }

    /// The posterior marginal `N(m_v, P_v)` of a node whose upward message is `self`, below
    /// a branch of variance `len` from a parent whose posterior marginal is
    /// `N(parent_mean, parent_var)`, and the expected squared increment along the branch:
    /// with `f = 1/(1 + ℓλ)`, `x_v | x_a ~ N(f x_a + ℓfη, ℓf)`, so
    /// `m_v = f m_a + ℓfη`, `P_v = f² P_a + ℓf` and
    /// `E(x_v − x_a)² = (ℓf(η − λ m_a))² + (ℓλf)² P_a + ℓf`.
    pub fn posterior_below(self, len: f64, (parent_mean, parent_var): (f64, f64)) -> [f64; 3] {
        let (lambda, eta, l) = (self.lambda, self.eta, len);
        let f = 1.0 / (1.0 + l * lambda);
        let shrink = l * lambda * f;
        [
            f * parent_mean + l * f * eta,
            f * f * parent_var + l * f,
            (l * f * (eta - lambda * parent_mean)).powi(2) + shrink * shrink * parent_var + l * f,
        ]
    }
}

/// A tree of one-dimensional Gaussian messages: parents, children and branch variances,
/// indexed by node (see the [module docs](self)). The root node's branch starts at the
/// origin, a point mass at 0.
#[derive(Debug, Clone)]
pub struct ScalarTree {
    parent: Vec<Option<usize>>,
    children: Vec<Vec<usize>>,
    len: Vec<f64>,
    root: usize,
    /// The nodes, children before parents.
    post_order: Vec<usize>,
    /// The leaves, in increasing order.
    leaves: Vec<usize>,
}

/// Buffers and results of [`ScalarTree::expectation_propagation`], kept between columns.
#[derive(Debug, Clone, Default)]
pub struct EpColumn {
    up: Vec<Precision>,
    moments: Vec<(f64, f64)>,
    path: Vec<usize>,
    /// The site means `μ̃` by node (0 without a site).
    pub site_means: Vec<f64>,
    /// The site precisions `τ̃` by node (0 without a site).
    pub site_precisions: Vec<f64>,
    /// `Σ ln Z̃_n` over the sites.
    pub log_site_normalisers: f64,
    /// `ln Z_EP`.
    pub log_marginal: f64,
    /// The sweeps made.
    pub sweeps: usize,
    /// Whether the sites converged.
    pub converged: bool,
}

impl ScalarTree {
    /// The tree `tree` with the variance `length(v)` on the branch above each node `v` (the
    /// root node's from the origin).
    pub fn from_tree(tree: &Tree, length: impl Fn(usize) -> f64) -> Self {
        let nodes = tree.nodes();
        Self {
            parent: nodes.iter().map(|node| node.parent).collect(),
            children: nodes.iter().map(|node| node.children.clone()).collect(),
            len: (0..nodes.len()).map(length).collect(),
            root: tree.root(),
            // Children have smaller ids than their parents.
            post_order: (0..nodes.len()).collect(),
            leaves: (0..tree.n_leaves()).collect(),
        }
    }

    /// The tree of `arena` under its root (detached subtrees left out), by slot, with the
    /// variance `length(v)` on the branch above each node `v`.
    pub fn from_arena<C>(arena: &Arena<C>, length: impl Fn(NodeId) -> f64) -> Self {
        let slots = arena.n_slots();
        let mut tree = Self {
            parent: vec![None; slots],
            children: vec![Vec::new(); slots],
            len: vec![0.0; slots],
            root: arena.root().index(),
            post_order: Vec::new(),
            leaves: Vec::new(),
        };
        let post = arena.post_order(arena.root()).expect("the root exists");
        for v in post {
            let node = arena.node(v).expect("live node");
            let i = v.index();
            tree.parent[i] = node.parent().map(NodeId::index);
            tree.children[i] = node.children().iter().map(|k| k.index()).collect();
            tree.len[i] = length(v);
            tree.post_order.push(i);
            if node.is_leaf() {
                tree.leaves.push(i);
            }
        }
        tree.leaves.sort_unstable();
        tree
    }

    /// The number of node slots.
    pub fn n_slots(&self) -> usize {
        self.parent.len()
    }

    /// The leaves in the tree, in increasing order.
    pub fn leaves(&self) -> &[usize] {
        &self.leaves
    }

    /// The nodes, children before parents.
    pub fn post_order(&self) -> &[usize] {
        &self.post_order
    }

    /// The variance of the branch above `v`.
    pub fn len(&self, v: usize) -> f64 {
        self.len[v]
    }

    /// Node `k`'s upward message after crossing its branch.
    fn lift(&self, up: &[Precision], k: usize) -> Precision {
        up[k].propagate(self.len[k])
    }

    /// The sum of `v`'s children's lifted upward messages.
    fn gather(&self, up: &[Precision], v: usize) -> Precision {
        self.children[v]
            .iter()
            .map(|&k| self.lift(up, k))
            .fold(Precision::default(), Precision::times)
    }

    /// Fills the upward messages of the internal nodes from those of the leaves in `up`.
    pub fn upward(&self, up: &mut [Precision]) {
        for &v in &self.post_order {
            if !self.children[v].is_empty() {
                up[v] = self.gather(up, v);
            }
        }
    }

    /// Recomputes the upward messages on the path from leaf `n` to the root.
    pub fn refresh_path(&self, up: &mut [Precision], n: usize) {
        let mut v = n;
        while let Some(p) = self.parent[v] {
            up[p] = self.gather(up, p);
            v = p;
        }
    }

    /// The cavity `(mean, variance)` of leaf `n`: its downward message (`path` is scratch).
    pub fn cavity(&self, up: &[Precision], n: usize, path: &mut Vec<usize>) -> (f64, f64) {
        path.clear();
        let mut v = n;
        path.push(v);
        while let Some(p) = self.parent[v] {
            path.push(p);
            v = p;
        }
        let mut down = Precision {
            lambda: 1.0 / self.len[self.root],
            eta: 0.0,
        };
        for w in path.windows(2).rev() {
            let (child, node) = (w[0], w[1]);
            for &k in &self.children[node] {
                if k != child {
                    down = down.times(self.lift(up, k));
                }
            }
            down = down.propagate(self.len[child]);
        }
        down.moments()
    }

    /// The posterior marginals of every node given its upward message `up` (from the
    /// leaves' sites or observations) and the origin, parents before children: calls
    /// `visit(v, [m_v, P_v, E(x_v − x_a)²])` ([`Precision::posterior_below`]); `post` is
    /// scratch of one `(m, P)` per slot.
    pub fn posterior(
        &self,
        up: &[Precision],
        post: &mut Vec<(f64, f64)>,
        mut visit: impl FnMut(usize, [f64; 3]),
    ) {
        post.clear();
        post.resize(self.n_slots(), (0.0, 0.0));
        for &v in self.post_order.iter().rev() {
            let parent = self.parent[v].map_or((0.0, 0.0), |a| post[a]);
            let m = up[v].posterior_below(self.len[v], parent);
            post[v] = (m[0], m[1]);
            visit(v, m);
        }
    }

    /// `ln N(μ̃; 0, C + diag(1/τ̃))` of the pseudo-observations at the leaves, given their
    /// upward messages `up` (the sites at the leaves, [`upward`](Self::upward) above them;
    /// a message with `λ` below the smallest normal double is no observation): the sum of
    /// the normalisers of the products that make the upward messages, each child's message
    /// multiplied in after crossing its branch, `N(μ_a; μ_b, v_a + v_b)` (eq 11 in one
    /// dimension), and of the root's message against the origin, `N(0; μ_r, v_r + ℓ_r)`.
    pub fn log_pseudo_likelihood(&self, up: &[Precision]) -> f64 {
        let informative = |m: Precision| (m.lambda >= f64::MIN_POSITIVE).then(|| m.moments());
        let mut log_z = SplitLogZ::default();
        for &v in &self.post_order {
            let mut acc: Option<Precision> = None;
            for &k in &self.children[v] {
                let lifted = self.lift(up, k);
                let Some((mean, var)) = informative(lifted) else {
                    continue;
                };
                acc = Some(match acc {
                    None => lifted,
                    Some(a) => {
                        let (m0, v0) = a.moments();
                        log_z += SplitLogZ::normal((m0 - mean) * (m0 - mean), v0 + var);
                        a.times(lifted)
                    }
                });
            }
        }
        if let Some((mean, var)) = informative(up[self.root]) {
            log_z += SplitLogZ::normal(mean * mean, var + self.len[self.root]);
        }
        log_z.log_z(1, 1.0)
    }

    /// Expectation propagation for one column (see the [module docs](self)): `observed`
    /// the `(leaf, y = ±1)` of the observed leaves in increasing order, the sites starting
    /// from `warm(leaf) = (μ̃, τ̃)` when given, else flat; sweeps until no tilted mean or
    /// standard deviation moves by more than `tol · scale` (at most `max_iter` sweeps).
    /// The sites, normalisers and `ln Z_EP` are left in `col`.
    pub fn expectation_propagation(
        &self,
        observed: &[(usize, f64)],
        warm: Option<&dyn Fn(usize) -> (f64, f64)>,
        (tol, scale, max_iter): (f64, f64, usize),
        col: &mut EpColumn,
    ) {
        let slots = self.n_slots();
        for buf in [&mut col.site_means, &mut col.site_precisions] {
            buf.clear();
            buf.resize(slots, 0.0);
        }
        col.up.clear();
        col.up.resize(slots, Precision::default());
        col.moments.clear();
        col.moments.resize(slots, (f64::NAN, f64::NAN));
        if let Some(w) = warm {
            for &(i, _) in observed {
                let (m, t) = w(i);
                (col.site_means[i], col.site_precisions[i]) = (m, t);
                col.up[i] = Precision::site(m, t);
            }
            self.upward(&mut col.up);
        }
        let mut converged = false;
        let mut sweeps = 0;
        while sweeps < max_iter && !converged {
            sweeps += 1;
            let mut change: f64 = 0.0;
            for &(i, y) in observed {
                let (m, v) = self.cavity(&col.up, i, &mut col.path);
                let s = site_update(m, v, y);
                let (m0, s0) = col.moments[i];
                let moved = ((s.tilted_mean - m0).abs() + (s.tilted_sd - s0).abs()) / scale;
                change = change.max(if moved.is_nan() { f64::INFINITY } else { moved });
                col.moments[i] = (s.tilted_mean, s.tilted_sd);
                col.site_means[i] = s.mean;
                col.site_precisions[i] = s.precision;
                col.up[i] = Precision::site(s.mean, s.precision);
                self.refresh_path(&mut col.up, i);
            }
            converged = change < tol;
        }
        col.sweeps = sweeps;
        col.converged = converged;
        // The normalisers against the final cavities.
        let mut ln_sites = 0.0;
        for &(i, y) in observed {
            let cavity = self.cavity(&col.up, i, &mut col.path);
            ln_sites += site_log_normaliser(cavity, y, col.site_means[i], col.site_precisions[i]);
        }
        col.log_site_normalisers = ln_sites;
        col.log_marginal = ln_sites + self.log_pseudo_likelihood(&col.up);
    }
}

#[cfg(test)]
mod tests;
