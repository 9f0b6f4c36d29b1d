//! The Gibbs re-attachment move: a detached subtree goes back to a position drawn from (an
//! accurate approximation of) its exact conditional over every valid position, with a
//! Metropolis–Hastings correction that makes the move exact whatever the approximation.
//!
//! # The conditional over positions
//! Detach the subtree `S` under a non-root node `v` (root time `t_v`, `m_S` leaves, upward
//! message `N(μ_S, σ² v_S)` at its root); the rest is the tree `R`. The positions are the
//! points `(u, t)` of every branch of `R` above a node `u` with `t` between the branch's top
//! `a_u` and `e_u = min(t_u, t_v)`, and every branch point `b` of `R` earlier than `t_v`.
//! Given `R` and `S`, the state is a function of the position, and the joint density as a
//! function of it is
//!
//! ```text
//!   p(X, T') = p(X_R | R) p(R) Z_S p_S · π(position),
//!   π(u, t) = exp(P_u) · S_w c (1 − t)^{c J_w − 1} · N(μ_S; m_w(t), σ² V(t) I),
//!   π(b)    = exp(P_b + Δ_b) · N(μ_S; m_b, σ² V_b I),
//! ```
//!
//! with `p_S`, `Z_S` the prior terms and message normalisers inside `S` (fixed) and:
//! - `P_u`, the change of the prior terms of `u`'s ancestors when each gains `m_S` leaves on
//!   the path to `u`: a branch point `b` whose branch `k` grows from `n_k` to `n_k + m_S`
//!   (of `m_b` leaves) changes its `ln S_b` by
//!   `ln Γ(n_k + m_S − β)/Γ(n_k − β) − ln Γ(m_b + m_S + α)/Γ(m_b + α)` and its `J_b` by
//!   `H_{m_b+m_S−1} − H_{m_b−1} − H_{n_k+m_S−1} + H_{n_k−1}`; summed from the root down, one
//!   term per node, in a pre-order pass;
//! - the new branch point `w` at `t` with branches of `n_u` and `m_S` leaves: its structure
//!   factor `S_w` and `J_w = H_{n_u+m_S−1} − H_{n_u−1} − H_{m_S−1}` (eqs 7, 12);
//! - `Δ_b`, the change of `b`'s own term when it gains a branch of `m_S` leaves:
//!   `ln[α + Kβ] + ln Γ(m_S − β)/Γ(1 − β) − ln Γ(m_b + m_S + α)/Γ(m_b + α)` and
//!   `J_b` grows by `H_{m_b+m_S−1} − H_{m_b−1} − H_{m_S−1}`;
//! - the likelihood `p(X_S | X_R, position) = Z_S N(μ_S; m, σ²(s + v_S + t_v − t) I)`, where
//!   `N(m, σ² s)` is the posterior of the location at the position given `X_R` under `R`:
//!   the product of the message from below (`N(μ_u, σ²(v_u + t_u − t))`) and the message
//!   from above (`N(μ↓_u, σ²(A_u + t − a_u))`, the posterior of the location of `u`'s
//!   parent given the data outside `u`'s subtree). The messages from above of every node
//!   come from one pre-order pass over `R` (at a branch point, the product of its own
//!   message from above and the other children's messages, in precision form from prefix
//!   and suffix sums: the message layer's [`Outside`]). With `λ = (v_u + t_u − t)/(…sum…)`,
//!   `m = μ_u + λ(μ↓_u − μ_u)`, and the squared distance `‖μ_S − m‖²` is a quadratic in `λ`
//!   whose coefficients are dot products computed once per branch, expanded about the
//!   nearer end ([`BranchJoin`]): each branch costs `O(D)` once and `O(1)` per time.
//!
//! A move therefore costs `O(N D)` for the passes and `O(N G)` for the grids below.
//!
//! # The proposal and its correction
//! On a branch, the time is handled in the variable `z = ln(1 + r/ε)`, `r = e_u − t` the
//! distance above the branch's lower end, `ε` the variance scale there (the larger of
//! `V(e_u)`, `1 − e_u`, a fraction of `‖μ_S − m(e_u)‖²/(σ² D)` and `10⁻⁹` of the branch):
//! near the end, where a subtree of close points puts its mass, `z` is logarithmic in `r`.
//! `ln π` in `z` (Jacobian `ε + r`) is evaluated on a uniform grid of `G` segments (`G` from
//! the span and the curvature, between [`MIN_SEGMENTS`] and [`MAX_SEGMENTS`]) and
//! interpolated linearly: the proposal is the piecewise exponential density through the
//! grid values, which is integrated and sampled exactly. Branch points weigh `π(b)`
//! exactly. A position is drawn in proportion to these masses, then the time within its
//! segment by inversion.
//!
//! The proposal `q` depends only on `R` and `S`, which the reverse move (detaching `S`
//! again) sees unchanged, so the move is an independence Metropolis–Hastings step within
//! the conditional: accept with probability
//!
//! ```text
//!   min(1, p(X, T') q(old) / (p(X, T) q(new)) · (N_T − 1)/(N_T' − 1)),
//! ```
//!
//! the joint densities from the chain's caches (not from the formulas above, which serve
//! only the proposal), the last factor for the uniform choice among the `N_T − 1` non-root
//! nodes (one more or one fewer after a move between a branch and a branch point). Where
//! `q ∝ π` the ratio is one; the grid makes it close to one (see `BENCHMARKS.md`).
//!
//! This is the move of the C++ sampler of Knowles & Ghahramani (slice sampling over all
//! positions), made exact by the correction and cheap by the cached messages.

use rand::Rng;

use super::{Chain, Isotropic, Pick};
use crate::error::Result;
use crate::math::ln_gamma_ratio;
use crate::models::messages::{BranchJoin, JoinPoint, Outside};
use crate::tree::arena::{Attachment, NodeId};

/// The fewest grid segments on a branch.
pub const MIN_SEGMENTS: usize = 3;

/// The most grid segments on a branch.
pub const MAX_SEGMENTS: usize = 48;

/// The widest segment in `z` (a factor `e^{0.5}` in `ε + r`).
const SEGMENT_WIDTH: f64 = 2.0;

/// The fraction of `‖μ_S − m‖²/(σ² D)` below which a branch's variance scale `ε` is not set:
/// the likelihood of two close points peaks near `V = ‖μ_S − m‖²/(σ² D)`.
const FLOOR_FRACTION: f64 = 0.05;

/// The smallest `ε` relative to the branch's length.
const MIN_FLOOR: f64 = 1e-9;

/// A candidate position.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Position {
    /// Somewhere on the branch above the node.
    Branch(NodeId),
    /// At the branch point.
    Node(NodeId),
}

/// Buffers kept between moves.
#[derive(Debug, Clone, Default)]
pub(super) struct Scratch {
    /// Per arena slot: the mean of the message from above (`D` values) and its variance.
    down_mean: Vec<f64>,
    down_var: Vec<f64>,
    /// Per arena slot: `P_u`, the path's prior change (see the [module docs](self)).
    path: Vec<f64>,
    /// The candidate positions with their log masses.
    positions: Vec<(Position, f64)>,
    /// Pre-order stack.
    stack: Vec<NodeId>,
    /// The outside messages of a branch point's children.
    outside: Outside,
    /// Per move, by leaf count `n`: `ln S` of a new branch point over `n` and `m_S` leaves,
    /// `ln Γ(n + m_S − β)/Γ(n − β)` and `ln Γ(n + m_S + α)/Γ(n + α)` (`NaN`: not yet
    /// computed; the same few counts recur all over a tree).
    memo_structure: Vec<f64>,
    memo_branch: Vec<f64>,
    memo_point: Vec<f64>,
    /// Grid values of the branch being sampled or scored, and its segments' weights.
    grid: Vec<f64>,
    weights: Vec<f64>,
}

/// `table[key]`, computed by `f` the first time.
fn memo(table: &mut [f64], key: usize, f: impl FnOnce() -> f64) -> f64 {
    if table[key].is_nan() {
        table[key] = f();
    }
    table[key]
}

/// The subtree being moved.
struct Moving<'a> {
    mean: &'a [f64],
    var: f64,
    time: f64,
    n_leaves: usize,
}

/// A branch's log density `ln π(u, t)` as a function of `r = e − t` (see the
/// [module docs](self)), up to a constant common to all positions.
struct Branch {
    /// The branch's lower end `e = min(t_u, t_v)` and length `L = e − a`.
    end: f64,
    len: f64,
    /// The message from above at the top (variance), the one from below at `t_u`
    /// (variance), `t_u − e` and `t_v − e`.
    var_above: f64,
    var_below: f64,
    below_gap: f64,
    sub_gap: f64,
    /// `v_S`.
    sub_var: f64,
    /// The subtree's message joining the branch's posterior, and the reciprocal of the
    /// variance factors from below and above summed (the same at every `r`).
    join: BranchJoin,
    inv_total: f64,
    /// `1 − e`, the prior's constant and the exponent `c J_w − 1`.
    one_minus_end: f64,
    prior: f64,
    exponent: f64,
    /// `D/2` and `1/(2σ²)` (`D = 0`: no likelihood).
    half_d: f64,
    inv_two_sigma2: f64,
    /// The variable's scale `ε` and the grid: segments and their width in `z`.
    eps: f64,
    segments: usize,
    width: f64,
    /// Where the density cannot be evaluated at `r = 0` (a pole of `V` or of `1 − t`).
    singular_end: bool,
}

impl Branch {
    /// The posterior at `r` (its variance `s`, `λ` and `‖μ_S − m‖²`) and `V`.
    fn moments(&self, r: f64) -> (JoinPoint, f64) {
        let above = self.var_above + (self.len - r);
        let below = self.var_below + self.below_gap + r;
        let at = self.join.at_scaled(below, above, self.inv_total);
        let v = at.var + self.sub_var + self.sub_gap + r;
        (at, v)
    }

    /// `−(D/2) ln V − ‖μ_S − m‖²/(2σ² V)` at `r`: eq 11 without its constant
    /// `−(D/2) ln(2πσ²)`, which every position shares.
    fn ln_likelihood(&self, r: f64) -> f64 {
        if self.half_d == 0.0 {
            return 0.0;
        }
        let (at, v) = self.moments(r);
        -self.half_d * v.ln() - at.sq_dist * self.inv_two_sigma2 / v
    }

    /// `ln π(u, e − r)` up to the common constant.
    fn ln_density(&self, r: f64) -> f64 {
        self.prior + self.exponent * (self.one_minus_end + r).ln() + self.ln_likelihood(r)
    }

    /// Fills `grid` with the density in `z` at the `G + 1` grid nodes `z_k = k·width` (`−∞`
    /// where it is not finite; at `z_0` slightly inside when the end is singular).
    fn fill_nodes(&self, grid: &mut Vec<f64>) {
        grid.clear();
        let ln_eps = self.eps.ln();
        let ratio = self.width.exp();
        let mut grow = 1.0;
        for k in 0..=self.segments {
            let r = if k == 0 {
                if self.singular_end {
                    0.01 * self.eps
                } else {
                    0.0
                }
            } else {
                self.eps * (grow - 1.0)
            };
            grow *= ratio;
            let h = self.ln_density(r) + ln_eps + k as f64 * self.width;
            grid.push(if h.is_finite() { h } else { f64::NEG_INFINITY });
        }
    }

    /// The segments' masses of a filled grid in units of `e^{h_max}`, into `out`, and
    /// `h_max` (`−∞` when every node is).
    fn segment_weights(&self, grid: &[f64], out: &mut Vec<f64>) -> f64 {
        let top = grid.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        out.clear();
        if top == f64::NEG_INFINITY {
            out.resize(self.segments, 0.0);
            return top;
        }
        // ∫₀¹ e^{h₀ + δx} dx = (e^{h₁} − e^{h₀})/δ, relative to e^{h_max}.
        out.extend(grid.windows(2).map(|pair| {
            let (h0, h1) = segment_ends(pair[0], pair[1]);
            if h0 == f64::NEG_INFINITY {
                return 0.0;
            }
            let (e0, delta) = ((h0 - top).exp(), h1 - h0);
            let mean = if delta.abs() < 1e-6 {
                e0 * (1.0 + 0.5 * delta)
            } else {
                ((h1 - top).exp() - e0) / delta
            };
            self.width * mean
        }));
        top
    }

    /// Fills `grid` and returns the branch's log mass under the proposal.
    fn fill(&self, grid: &mut Vec<f64>, weights: &mut Vec<f64>) -> f64 {
        self.fill_nodes(grid);
        let top = self.segment_weights(grid, weights);
        top + weights.iter().sum::<f64>().ln()
    }

    /// Draws `r` from the piecewise exponential proposal of a filled grid.
    fn sample<R: Rng + ?Sized>(&self, grid: &[f64], rng: &mut R) -> f64 {
        let mut weights = Vec::with_capacity(self.segments);
        self.segment_weights(grid, &mut weights);
        let sum: f64 = weights.iter().sum();
        let mut u = rng.random::<f64>() * sum;
        let mut k = self.segments - 1;
        for (j, &w) in weights.iter().enumerate() {
            if u < w {
                k = j;
                break;
            }
            u -= w;
        }
        // A remainder left by rounding goes to the last segment with mass.
        if weights[k] == 0.0 {
            k = weights.iter().rposition(|&w| w > 0.0).unwrap_or(k);
        }
        let (h0, h1) = segment_ends(grid[k], grid[k + 1]);
        let delta = h1 - h0;
        let w: f64 = rng.random::<f64>();
        // Inversion of the density ∝ e^{δx} on [0, 1].
        let x = if delta.abs() < 1e-9 {
            w
        } else if delta > 0.0 {
            1.0 + (w + (1.0 - w) * (-delta).exp()).ln() / delta
        } else {
            (w * delta.exp_m1()).ln_1p() / delta
        };
        let z = (k as f64 + x.clamp(0.0, 1.0)) * self.width;
        self.eps * z.exp_m1()
    }

    /// `ln` of the proposal's density in `t` at `r` (before normalising by the total over
    /// all positions), from a filled grid.
    fn ln_proposal(&self, grid: &[f64], r: f64) -> f64 {
        if !(r > 0.0 && r < self.len) {
            return f64::NEG_INFINITY;
        }
        let z = (r / self.eps).ln_1p();
        let k = ((z / self.width) as usize).min(self.segments - 1);
        let x = z / self.width - k as f64;
        let (h0, h1) = segment_ends(grid[k], grid[k + 1]);
        if h0 == f64::NEG_INFINITY {
            return f64::NEG_INFINITY;
        }
        h0 + (h1 - h0) * x - self.eps.ln() - z
    }
}

/// A segment's end values, with an end that is `−∞` replaced by the other (a constant
/// density on the segment; `−∞` for both when both are).
fn segment_ends(h0: f64, h1: f64) -> (f64, f64) {
    match (h0 == f64::NEG_INFINITY, h1 == f64::NEG_INFINITY) {
        (false, false) => (h0, h1),
        (true, false) => (h1, h1),
        (false, true) => (h0, h0),
        (true, true) => (f64::NEG_INFINITY, f64::NEG_INFINITY),
    }
}

impl Chain<Isotropic> {
    /// One Gibbs re-attachment move (see the [module docs](self)); returns whether the
    /// Metropolis–Hastings correction accepted it (it may have put the subtree back where
    /// it was).
    ///
    /// # Errors
    /// Only on a broken invariant of the arena.
    pub fn gibbs_move<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Result<bool> {
        self.gibbs_move_of(Pick::NonRoot, rng)
    }

    /// [`gibbs_move`](Self::gibbs_move) of a node picked uniformly under `pick`.
    pub(super) fn gibbs_move_of<R: Rng + ?Sized>(
        &mut self,
        pick: Pick<'_>,
        rng: &mut R,
    ) -> Result<bool> {
        let Some((v, n_before)) = self.pick_node(pick, rng) else {
            return Ok(false);
        };
        let old_joint = self.log_joint();
        let detached = self.arena.detach(v)?;
        self.refresh();
        let mut scratch = std::mem::take(&mut self.scratch);
        let proposal = self.propose(v, Some(detached.origin()), &mut scratch, rng);
        self.scratch = scratch;
        let Some((at, ln_q_old, ln_q_new)) = proposal? else {
            self.arena.reattach(&detached)?;
            self.refresh();
            return Ok(false);
        };
        self.attach_or_undo(
            v,
            &detached,
            at,
            old_joint,
            (ln_q_old, ln_q_new),
            (pick, n_before),
            rng,
        )
    }

    /// Scans every position of the detached subtree `v` (see the [module docs](self)) and
    /// draws one: returns it with the log proposal densities of the old position (`origin`;
    /// `NaN` without one) and of the new one, or `None` when the drawn time cannot be placed
    /// in double precision.
    pub(super) fn propose<R: Rng + ?Sized>(
        &self,
        v: NodeId,
        origin: Option<Attachment>,
        scratch: &mut Scratch,
        rng: &mut R,
    ) -> Result<Option<(Attachment, f64, f64)>> {
        let sub = self.moving(v)?;
        let mut grid = std::mem::take(&mut scratch.grid);
        self.scan(&sub, scratch, &mut grid)?;
        // A position in proportion to its mass; a remainder left by rounding goes to the
        // last position with mass.
        let top = scratch
            .positions
            .iter()
            .fold(f64::NEG_INFINITY, |acc, &(_, m)| acc.max(m));
        let sum: f64 = scratch
            .positions
            .iter()
            .map(|&(_, m)| (m - top).exp())
            .sum();
        let mut u = rng.random::<f64>() * sum;
        let mut chosen = None;
        for &(pos, m) in &scratch.positions {
            let p = (m - top).exp();
            if u < p {
                chosen = Some(pos);
                break;
            }
            u -= p;
        }
        let chosen = chosen.or_else(|| {
            scratch
                .positions
                .iter()
                .rev()
                .find(|&&(_, m)| m > f64::NEG_INFINITY)
                .map(|&(p, _)| p)
        });
        let Some(chosen) = chosen else {
            scratch.grid = grid;
            return Ok(None);
        };
        let (at, ln_q_new) = match chosen {
            Position::Node(b) => (
                Attachment::Node(b),
                self.position_mass(&scratch.positions, chosen),
            ),
            Position::Branch(b) => {
                let branch = self.branch(b, &sub, scratch);
                branch.fill_nodes(&mut grid);
                let r = branch.sample(&grid, rng);
                let time = branch.end - r;
                let top = self.top_time(b);
                if !(time > top && time < branch.end) {
                    scratch.grid = grid;
                    return Ok(None);
                }
                // Scored at the time as stored, so that the reverse move sees the same.
                let r = branch.end - time;
                (
                    Attachment::Branch { below: b, time },
                    branch.ln_proposal(&grid, r),
                )
            }
        };
        let ln_q_old = match origin {
            None => f64::NAN,
            Some(Attachment::Node(b)) => self.position_mass(&scratch.positions, Position::Node(b)),
            Some(Attachment::Branch { below, time }) => {
                let branch = self.branch(below, &sub, scratch);
                branch.fill_nodes(&mut grid);
                branch.ln_proposal(&grid, branch.end - time)
            }
        };
        scratch.grid = grid;
        Ok(Some((at, ln_q_old, ln_q_new)))
    }

    /// Fills `scratch.positions` with every position of the detached subtree `sub` and its
    /// log mass under the proposal, in pre-order of the remaining tree (see the
    /// [module docs](self)).
    fn scan(&self, sub: &Moving<'_>, scratch: &mut Scratch, grid: &mut Vec<f64>) -> Result<()> {
        let d = self.x.ncols();
        let slots = self.arena.n_slots();
        scratch.down_mean.clear();
        scratch.down_mean.resize(slots * d, 0.0);
        scratch.down_var.clear();
        scratch.down_var.resize(slots, 0.0);
        scratch.path.clear();
        scratch.path.resize(slots, 0.0);
        scratch.positions.clear();
        scratch.stack.clear();
        // The children's messages at a branch point (borrowed from the caches, so kept here
        // rather than in the scratch).
        let mut msgs = Vec::new();
        let n = self.n_leaves();
        for table in [
            &mut scratch.memo_structure,
            &mut scratch.memo_branch,
            &mut scratch.memo_point,
        ] {
            table.clear();
            table.resize(n + 1, f64::NAN);
        }
        let root = self.arena.root();
        scratch.stack.push(root);
        while let Some(u) = scratch.stack.pop() {
            let top = self.top_time(u);
            if top >= sub.time {
                continue;
            }
            let branch = self.branch(u, sub, scratch);
            let mass = branch.fill(grid, &mut scratch.weights);
            scratch.positions.push((Position::Branch(u), mass));
            let node = self.arena.node(u)?;
            if node.is_leaf() || node.time() >= sub.time {
                continue;
            }
            let at_node = scratch.path[u.index()]
                + self.node_change(u, sub.n_leaves, scratch)
                + branch.ln_likelihood(0.0);
            scratch.positions.push((Position::Node(u), at_node));
            self.pass_down(u, sub.n_leaves, scratch, &mut msgs);
            // Children in reverse: the pre-order visits them in order.
            scratch.stack.extend(node.children().iter().rev());
        }
        Ok(())
    }

    /// The detached subtree under `v`.
    fn moving(&self, v: NodeId) -> Result<Moving<'_>> {
        let node = self.arena.node(v)?;
        Ok(Moving {
            mean: node.cache().msg.mean(),
            var: node.cache().msg.var(),
            time: node.time(),
            n_leaves: node.n_leaves(),
        })
    }

    /// The log mass of a scanned position.
    fn position_mass(&self, positions: &[(Position, f64)], at: Position) -> f64 {
        positions
            .iter()
            .find(|&&(p, _)| p == at)
            .map_or(f64::NEG_INFINITY, |&(_, m)| m)
    }

    /// The log density of the branch above `u` (see the [module docs](self)), from the
    /// scanned messages from above and path terms.
    // Inlined: the caller then builds the (large) value in place.
    #[inline(always)]
    fn branch(&self, u: NodeId, sub: &Moving<'_>, scratch: &mut Scratch) -> Branch {
        let d = self.x.ncols();
        let node = self.arena.node(u).expect("live node");
        let (t_u, n_u) = (node.time(), node.n_leaves());
        let top = self.top_time(u);
        let end = t_u.min(sub.time);
        let len = end - top;
        let above = &scratch.down_mean[u.index() * d..(u.index() + 1) * d];
        let join = BranchJoin::new(node.cache().msg.mean(), above, sub.mean);
        let (m_s, c) = (sub.n_leaves, self.params.c());
        let j_w = self.h[n_u + m_s - 1] - self.h[n_u - 1] - self.h[m_s - 1];
        let mut branch = Branch {
            end,
            len,
            var_above: scratch.down_var[u.index()],
            var_below: node.cache().msg.var(),
            below_gap: t_u - end,
            sub_gap: sub.time - end,
            sub_var: sub.var,
            join,
            inv_total: 1.0
                / (scratch.down_var[u.index()] + len + node.cache().msg.var() + (t_u - end)),
            one_minus_end: 1.0 - end,
            prior: scratch.path[u.index()]
                + memo(&mut scratch.memo_structure, n_u, || {
                    self.params.ln_structure(&[n_u, m_s])
                })
                + c.ln(),
            exponent: c * j_w - 1.0,
            half_d: 0.5 * d as f64,
            inv_two_sigma2: 0.5 / self.lik.sigma2,
            eps: 0.0,
            segments: MIN_SEGMENTS,
            width: 0.0,
            singular_end: false,
        };
        let (at0, v0) = branch.moments(0.0);
        let (lambda, q0) = (at0.weight, at0.sq_dist);
        let mut eps = (1.0 - end).max(MIN_FLOOR * len);
        if d > 0 {
            eps = eps
                .max(v0)
                .max(FLOOR_FRACTION * q0 / (self.lik.sigma2 * d as f64));
        }
        let span = (len / eps).ln_1p();
        // Enough segments for the span in z and for the curvature of the likelihood in λ:
        // ‖μ↓ − μ_u‖²/(σ² V) over the λ range of the branch.
        let lambda_top = branch.moments(len).0.weight;
        let curvature = if d > 0 {
            (lambda_top - lambda).abs() * (join.gap_sq() / (self.lik.sigma2 * v0.max(eps))).sqrt()
        } else {
            0.0
        };
        let wanted = (span / SEGMENT_WIDTH).max(curvature).ceil();
        branch.segments = (wanted as usize).clamp(MIN_SEGMENTS, MAX_SEGMENTS);
        branch.width = span / branch.segments as f64;
        branch.eps = eps;
        branch.singular_end = (d > 0 && v0 == 0.0) || end == 1.0;
        branch
    }

    /// `Δ_b`: the change of branch point `b`'s prior term when it gains a branch of `m_s`
    /// leaves (see the [module docs](self)).
    fn node_change(&self, b: NodeId, m_s: usize, scratch: &mut Scratch) -> f64 {
        let node = self.arena.node(b).expect("live node");
        let (alpha, beta, c) = (self.params.alpha(), self.params.beta(), self.params.c());
        let (m, k) = (node.n_leaves(), node.children().len());
        let new = (alpha + k as f64 * beta).max(0.0).ln();
        let structure = new + ln_gamma_ratio(1.0 - beta, (m_s - 1) as f64)
            - memo(&mut scratch.memo_point, m, || {
                ln_gamma_ratio(m as f64 + alpha, m_s as f64)
            });
        let gap = self.h[m + m_s - 1] - self.h[m - 1] - self.h[m_s - 1];
        structure + c * gap * (-node.time()).ln_1p()
    }

    /// The messages from above and the path terms of the children of branch point `b`,
    /// from `b`'s own (see the [module docs](self)).
    fn pass_down<'a>(
        &'a self,
        b: NodeId,
        m_s: usize,
        scratch: &mut Scratch,
        msgs: &mut Vec<(usize, &'a [f64], f64)>,
    ) {
        let node = self.arena.node(b).expect("live node");
        let t_b = node.time();
        let (alpha, beta, c) = (self.params.alpha(), self.params.beta(), self.params.c());
        let m = node.n_leaves();
        let ln1m = (-t_b).ln_1p();
        let gap_m = self.h[m + m_s - 1] - self.h[m - 1];
        let shift_m = memo(&mut scratch.memo_point, m, || {
            ln_gamma_ratio(m as f64 + alpha, m_s as f64)
        });
        // The message from above at b's location and the children's; each child's message
        // from above is the product of all the others.
        let above_var = scratch.down_var[b.index()] + (t_b - self.top_time(b));
        let children = node.children();
        msgs.clear();
        msgs.extend(children.iter().map(|&k| {
            let child = self.arena.node(k).expect("live node");
            let msg = &child.cache().msg;
            (k.index(), msg.mean(), msg.var() + (child.time() - t_b))
        }));
        scratch.outside.compute(
            &mut scratch.down_mean,
            &mut scratch.down_var,
            (b.index(), above_var),
            msgs,
        );
        let path_b = scratch.path[b.index()];
        for &k in children {
            let n_k = self.arena.node(k).expect("live node").n_leaves();
            let structure = memo(&mut scratch.memo_branch, n_k, || {
                ln_gamma_ratio(n_k as f64 - beta, m_s as f64)
            }) - shift_m;
            let gap = gap_m - (self.h[n_k + m_s - 1] - self.h[n_k - 1]);
            scratch.path[k.index()] = path_b + structure + c * gap * ln1m;
        }
    }
}

#[cfg(test)]
mod tests;
