//! Draws from the Pitman–Yor diffusion tree: the sequential generative process of §1 for
//! the tree ([`sample_tree`]), Brownian motion along it for the data
//! ([`sample_locations`]), and both from one seed ([`sample`]).
//!
//! # Divergence times, exactly
//! In the time `τ = −ln(1 − t) = A(t)/c`, the divergence hazard `a(t) w_m` of a branch that
//! `m` earlier points followed is the constant `c w_m`: from a branch point at `τ_s` a point
//! diverges at `τ_s + E/(c w_m)` with `E ~ Exp(1)`, which is the inverse of the cumulative
//! hazard `A(t) = −c ln(1 − t)` applied to an exponential draw. If that is later than the
//! branch's lower end, the point reaches the branch point there and chooses a branch
//! (eqs 2–3); a branch into a leaf ends at `τ = ∞`, so a point always diverges before it.
//! The tree keeps `τ` until the end, so that the draws are exact sums of exponentials, and
//! then stores `t = −expm1(−τ)` (accurate near 0).
//!
//! # Times beyond double precision
//! Double precision cannot store a time within about `10⁻¹⁶` of its child's or of 1 (`τ`
//! beyond about 36.7). The process puts divergences there when `c w_m` is small (a small
//! `c`, a large `α`, many points): with `α = 1.5`, `c = 0.7`, a point that diverges from a
//! branch into a leaf does so beyond `τ = 37` with probability at least
//! `e^{−37 c w_1} ≈ 4·10⁻⁴`. Such a draw cannot be returned as a [`Tree`] (its
//! times would be equal), so [`sample_tree`] draws the whole tree again, up to
//! [`MAX_ATTEMPTS`] times, and reports [`RoseTreeError::Numerical`] if none is
//! representable. The trees returned are therefore draws from the process conditioned on
//! all times being representable; that differs from the process by at most the probability
//! of the event, in total variation, which is negligible unless `c w_m` is small.
//!
//! # Locations
//! The paper draws each point's location at its divergence and then runs it to `t = 1`.
//! Since the tree's law does not involve the locations, drawing the whole tree first and
//! then the locations from the origin down (each node `N(x_parent, σ²(t − t_parent) I)`)
//! gives the same joint distribution, and keeps the tree of a seed the same whatever the
//! dimension.
//!
//! # Random streams
//! [`sample`] draws the tree from `Xoshiro256PlusPlus::seed_from_u64(seed)` and the locations
//! from the same generator after one `jump()` (2¹²⁸ steps ahead): disjoint streams, the
//! result a function of the seed alone.

use ndarray::Array2;
use rand::Rng;
use rand::SeedableRng;
use rand_distr::{Exp1, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::{PydtParams, check_diffusion_tree, check_sigma2};
use crate::error::{Result, RoseTreeError};
use crate::tree::{Node, Tree};

/// A node of the tree being grown: its time `τ = −ln(1 − t)` (`∞` at a leaf), its branches
/// and the number of points that passed through it.
struct Growing {
    tau: f64,
    children: Vec<usize>,
    count: usize,
}

/// How many times [`sample_tree`] draws a tree before it gives up on one whose times double
/// precision can store (see the [module docs](self)).
pub const MAX_ATTEMPTS: usize = 100;

/// A tree over `n` points drawn by the generative process of §1 (see the
/// [module docs](self)): leaf `i` is the `i`-th point, heights are divergence times, and
/// the tree passes [`check_diffusion_tree`]. A branch point's branches are listed in the
/// order they were opened. A draw whose times double precision cannot tell apart (from
/// their children's or from 1) is discarded and drawn again.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] naming `n` for `n = 0`;
/// [`RoseTreeError::Numerical`] when [`MAX_ATTEMPTS`] draws in a row have such times
/// (a tiny `c` or a huge `α`; see the module docs).
pub fn sample_tree<R: Rng + ?Sized>(n: usize, params: &PydtParams, rng: &mut R) -> Result<Tree> {
    if n == 0 {
        return Err(RoseTreeError::param("n", "must be at least 1"));
    }
    // 1/(c w_m), the mean of the divergence time (in τ) on a branch of m earlier points.
    let mean_wait: Vec<f64> = (0..n)
        .map(|m| {
            if m == 0 {
                0.0
            } else {
                (-params.ln_rate_factor(m)).exp() / params.c()
            }
        })
        .collect();
    for _ in 0..MAX_ATTEMPTS {
        if let Some(tree) = grow(n, params, &mean_wait, rng) {
            return Ok(tree);
        }
    }
    Err(RoseTreeError::Numerical(format!(
        "{MAX_ATTEMPTS} sampled trees in a row had divergence times too close to their \
         children's or to t = 1 for double precision (small c or large alpha): increase c or \
         decrease alpha"
    )))
}

/// One run of the generative process; `None` if a time is beyond double precision.
fn grow<R: Rng + ?Sized>(
    n: usize,
    params: &PydtParams,
    mean_wait: &[f64],
    rng: &mut R,
) -> Option<Tree> {
    let (alpha, beta) = (params.alpha(), params.beta());
    // Arena: leaves first (leaf i is point i), branch points appended as they appear.
    let mut nodes: Vec<Growing> = (0..n)
        .map(|_| Growing {
            tau: f64::INFINITY,
            children: Vec::new(),
            count: 1,
        })
        .collect();
    let mut top = 0; // the node below the origin
    let mut path = Vec::new();
    for point in 1..n {
        path.clear();
        let mut tau_s = 0.0; // time of the upper end of the current branch
        let mut above: Option<usize> = None; // the branch point above it (None: the origin)
        let mut v = top;
        loop {
            let m = nodes[v].count;
            let e: f64 = rng.sample(Exp1);
            let tau = tau_s + e * mean_wait[m];
            if tau < nodes[v].tau || nodes[v].children.is_empty() {
                // Diverge on the branch: a new branch point between `above` and `v`. (A
                // branch into a leaf always ends in a divergence; a time that is not finite
                // there is beyond double precision.)
                if !tau.is_finite() {
                    return None;
                }
                let u = nodes.len();
                nodes.push(Growing {
                    tau,
                    children: vec![v, point],
                    count: m + 1,
                });
                match above {
                    Some(a) => {
                        let slot = nodes[a].children.iter().position(|&k| k == v);
                        let slot = slot.expect("the branch point above v lists v");
                        nodes[a].children[slot] = u;
                    }
                    None => top = u,
                }
                break;
            }
            // Reached the branch point v (a leaf is never reached: its τ is ∞).
            path.push(v);
            let k = nodes[v].children.len() as f64;
            let mut u = rng.random::<f64>() * (m as f64 + alpha);
            let mut next = None;
            for &child in &nodes[v].children {
                u -= nodes[child].count as f64 - beta;
                if u < 0.0 {
                    next = Some(child);
                    break;
                }
            }
            // A new branch has probability (α + Kβ)/(m + α); when that is 0, a draw left
            // over by rounding goes to the last branch.
            if next.is_none() && alpha + k * beta <= 0.0 {
                next = nodes[v].children.last().copied();
            }
            match next {
                Some(child) => {
                    above = Some(v);
                    tau_s = nodes[v].tau;
                    v = child;
                }
                None => {
                    nodes[v].children.push(point);
                    break;
                }
            }
        }
        for &p in &path {
            nodes[p].count += 1;
        }
    }
    finish(n, &nodes, top)
}

/// The grown arena as a [`Tree`]: leaves keep their ids, branch points are numbered in
/// post-order from `top` (children before parents, the root last), heights
/// `t = −expm1(−τ)`; `None` if two times or a time and 1 are equal in double precision.
fn finish(n: usize, nodes: &[Growing], top: usize) -> Option<Tree> {
    let mut id = vec![usize::MAX; nodes.len()];
    id[..n].iter_mut().enumerate().for_each(|(i, x)| *x = i);
    let mut out: Vec<Node> = (0..n)
        .map(|_| Node {
            children: Vec::new(),
            parent: None,
            n_leaves: 1,
        })
        .collect();
    let mut heights = vec![1.0; n];
    // Post-order with an explicit stack: (node, next child to visit).
    let mut stack = vec![(top, 0usize)];
    while let Some(entry) = stack.last_mut() {
        let v = entry.0;
        if v < n {
            stack.pop();
            continue;
        }
        if let Some(&child) = nodes[v].children.get(entry.1) {
            entry.1 += 1;
            stack.push((child, 0));
            continue;
        }
        stack.pop();
        let children: Vec<usize> = nodes[v].children.iter().map(|&k| id[k]).collect();
        let t = -(-nodes[v].tau).exp_m1();
        let n_leaves = children.iter().map(|&k| out[k].n_leaves).sum();
        id[v] = out.len();
        out.push(Node {
            children,
            parent: None,
            n_leaves,
        });
        heights.push(t);
    }
    let mut tree = Tree::from_nodes(n, out);
    tree.set_heights_unchecked(heights);
    check_diffusion_tree(&tree).is_ok().then_some(tree)
}

/// Brownian locations at the leaves of a diffusion tree: from the origin at `t = 0`, each
/// node is `N(x_parent, σ²(t − t_parent) I)` in `d` dimensions (the root node's parent is
/// the origin), and row `i` of the result is leaf `i` at `t = 1`. The rows are distributed
/// as in [`super::log_likelihood`]: each column is `N(0, σ²C)`.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] naming `d` for `d = 0` or `sigma2` unless it is
/// finite and `> 0`; [`RoseTreeError::InvalidTree`] from [`check_diffusion_tree`].
pub fn sample_locations<R: Rng + ?Sized>(
    tree: &Tree,
    d: usize,
    sigma2: f64,
    rng: &mut R,
) -> Result<Array2<f64>> {
    if d == 0 {
        return Err(RoseTreeError::param("d", "must be at least 1"));
    }
    check_sigma2(sigma2)?;
    let t = check_diffusion_tree(tree)?;
    let nodes = tree.nodes();
    let mut loc = Array2::<f64>::zeros((nodes.len(), d));
    // Parents have larger ids than their children: walk the ids downwards.
    for v in (0..nodes.len()).rev() {
        let (t0, start) = match nodes[v].parent {
            Some(p) => (t[p], Some(p)),
            None => (0.0, None),
        };
        let sd = (sigma2 * (t[v] - t0)).sqrt();
        for j in 0..d {
            let base = start.map_or(0.0, |p| loc[[p, j]]);
            let z: f64 = rng.sample(StandardNormal);
            loc[[v, j]] = base + sd * z;
        }
    }
    Ok(loc.slice(ndarray::s![..tree.n_leaves(), ..]).to_owned())
}

/// `n` points in `d` dimensions from the Pitman–Yor diffusion tree with hyperparameters
/// `params` and Brownian variance `sigma2` per unit time, with their tree: `(X, T)`, row `i`
/// of `X` at leaf `i`. The same seed gives the same result (see the
/// [module docs](self) for the two random streams).
///
/// # Errors
/// As [`sample_tree`] and [`sample_locations`].
///
/// # Examples
/// ```
/// use rosetree::pydt::{self, PydtParams};
///
/// let params = PydtParams::new(1.0, 0.0, 1.0)?;
/// let (x, tree) = pydt::sample(20, 2, &params, 1.0, 0)?;
/// assert_eq!(x.dim(), (20, 2));
/// assert_eq!(tree.n_leaves(), 20);
/// assert_eq!(pydt::sample(20, 2, &params, 1.0, 0)?.0, x);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
pub fn sample(
    n: usize,
    d: usize,
    params: &PydtParams,
    sigma2: f64,
    seed: u64,
) -> Result<(Array2<f64>, Tree)> {
    if d == 0 {
        return Err(RoseTreeError::param("d", "must be at least 1"));
    }
    check_sigma2(sigma2)?;
    let mut tree_rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut loc_rng = tree_rng.clone();
    loc_rng.jump();
    let tree = sample_tree(n, params, &mut tree_rng)?;
    let x = sample_locations(&tree, d, sigma2, &mut loc_rng)?;
    Ok((x, tree))
}
