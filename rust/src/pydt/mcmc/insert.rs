//! Rows added to a fitted diffusion tree without refitting (`partial_fit`): each new row
//! becomes a leaf at a position drawn from its conditional posterior given the current tree,
//! then a number of Markov chain sweeps restricted to the paths from the new leaves to the
//! root refine the places where the tree changed.
//!
//! # Attaching a row
//! A new row is a subtree of one leaf (time 1, message `N(x, 0)`) detached from the tree `R`
//! of the rows so far. Its conditional over positions given `R`, the data and the
//! hyperparameters is the `π` of the [Gibbs re-attachment move](super::reattach): on the
//! branch above any node at any time, or at any branch point, with
//! `p(X, T') = p(X_R | R) p(R) π(position)`. For one leaf this is the generative process
//! of §1 (`p(T') = p(R) q(position)` by exchangeability) times the likelihood of the new
//! row given `X_R` at that position. The position is drawn from that move's proposal: on
//! each branch the piecewise exponential density through grid values of `ln π`, exact at
//! the branch points, an accurate approximation of the conditional (a Gibbs move that
//! starts from it is accepted about 99 % of the time). There is no old position to correct
//! against, so the draw is not corrected; the sweeps that follow are exact. A row equal to
//! another puts the conditional's mass against `t = 1`, where its draws may round onto 1;
//! after [`REJECTION_TRIES`] such draws the row is placed by the
//! generative process instead (the prior, not the conditional).
//!
//! Under the probit likelihood the data of the chain are latent values: those of the fitted
//! rows are drawn given the tree before the first row is placed (a chain starts them at
//! `±σ`, tied between equal rows), and a new row's are drawn from their marginal
//! `N(0, σ²)` given its signs.
//!
//! # Restricted sweeps
//! Let `A(T)` be the non-root nodes whose subtree holds a new leaf: the new leaves and the
//! nodes on their paths to the root. A restricted sweep makes `K` subtree moves, `K` the
//! size of `A` when the sweeps begin and the same for all of them (a number of moves that
//! followed the state would favour the states with fewer), each of a node picked uniformly
//! from `A(T)` as it is at the time of the move (the Gibbs
//! re-attachment move, or the prior move when the chain is set to
//! [`SubtreeMove::Prior`](super::SubtreeMove::Prior)), then slice-samples the times of the
//! branch points in `A(T)` and of the root, then updates each learnt hyperparameter (those
//! updates see the whole tree). A moved node keeps its subtree, so it stays in `A`: the
//! reverse move picks it with probability `1/|A(T')|`, the Metropolis–Hastings ratio
//! carries `|A(T)|/|A(T')|` where a full sweep has `N_T/N_T'`, and every move leaves the
//! posterior invariant. The restricted chain is not irreducible (the rest of the tree
//! moves only where a new leaf's path reaches it): it refines where the data changed and
//! does not mix over the whole tree as a full sweep does.
//!
//! # Random streams
//! One `Xoshiro256PlusPlus`, seeded from the caller's seed and the number of rows already in
//! the tree (so that successive calls with one seed do not repeat a stream), draws the
//! positions in row order and then drives the sweeps.

use ndarray::{ArrayView1, ArrayView2};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::{
    Chain, Isotropic, Likelihood, McmcConfig, McmcResult, NodeState, Pick, REJECTION_TRIES, Start,
    TraceRow, drive,
};
use crate::error::{Result, RoseTreeError};
use crate::pydt::probit::{check_binary, drawn_latent};
use crate::tree::arena::NodeId;

/// The odd constant of Fibonacci hashing, `2⁶⁴/φ`: spreads the row count over the seed.
const SEED_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

impl Chain<Isotropic> {
    /// Adds `row` as a new leaf (the next row of the data) at a position drawn from its
    /// conditional posterior given the current tree (see the [module docs](self)), and
    /// returns the leaf. A probit chain takes a binary row (0, 1 or `NaN`), whose latent
    /// values are drawn from their marginal `N(0, σ²)` given the signs (unconstrained where
    /// missing); the position is drawn given those.
    ///
    /// Leaves keep their ids; every branch point's id grows by one. Costs `O(N (D + G))`,
    /// one scan of the Gibbs re-attachment move. Where the conditional is so peaked at
    /// `t = 1` that [`REJECTION_TRIES`] of its draws round onto 1 (a row equal to another
    /// in many columns), the position is drawn from the generative process instead.
    ///
    /// # Errors
    /// [`RoseTreeError::ShapeMismatch`] for a row of another length;
    /// [`RoseTreeError::InvalidData`] for a non-finite entry (a value other than 0, 1 or
    /// `NaN` for a probit chain), naming the row as the new leaf's index;
    /// [`RoseTreeError::Numerical`] when no drawn time can be placed in double precision
    /// (see [`Chain::subtree_move`]). On an error after the checks the chain is unusable.
    pub fn insert_row<R: Rng + ?Sized>(
        &mut self,
        row: ArrayView1<'_, f64>,
        rng: &mut R,
    ) -> Result<NodeId> {
        let (n, d) = (self.n_leaves(), self.x.ncols());
        if row.len() != d {
            return Err(RoseTreeError::ShapeMismatch {
                what: "row".into(),
                expected: format!("{d} values"),
                found: format!("{}", row.len()),
            });
        }
        let shape = |e: ndarray::ShapeError| RoseTreeError::Numerical(format!("{e}"));
        match &mut self.observed {
            Some(observed) => {
                check_binary(row.insert_axis(ndarray::Axis(0)))
                    .map_err(|_| bad_entry(n, row, |v| v.is_nan() || v == 0.0 || v == 1.0))?;
                observed.push_row(row).map_err(shape)?;
                let sd = self.lik.sigma2.sqrt();
                let latent = row.mapv(|v| drawn_latent(v, sd, rng));
                self.x.push_row(latent.view()).map_err(shape)?;
            }
            None => {
                if row.iter().any(|v| !v.is_finite()) {
                    return Err(bad_entry(n, row, f64::is_finite));
                }
                self.x.push_row(row).map_err(shape)?;
            }
        }
        let detached = self.arena.add_leaf(1.0, NodeState::default())?;
        let leaf = detached.root();
        self.set_tables();
        self.refresh();
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut drawn = None;
        for _ in 0..REJECTION_TRIES {
            match self.propose(leaf, None, &mut scratch, rng) {
                Ok(None) => {}
                Ok(Some((at, _, _))) => {
                    drawn = Some(at);
                    break;
                }
                Err(e) => {
                    self.scratch = scratch;
                    return Err(e);
                }
            }
        }
        self.scratch = scratch;
        let at = match drawn {
            Some(at) => at,
            None => self.draw_attachment(1.0, rng)?,
        };
        self.arena.attach(&detached, at)?;
        self.refresh();
        Ok(leaf)
    }
}

/// An [`RoseTreeError::InvalidData`] for the first entry of `row` (row index `i`) that
/// `ok` refuses.
fn bad_entry(i: usize, row: ArrayView1<'_, f64>, ok: impl Fn(f64) -> bool) -> RoseTreeError {
    let j = row.iter().position(|&v| !ok(v)).unwrap_or(0);
    RoseTreeError::data(
        i,
        Some(j),
        format!(
            "must be finite (0, 1 or NaN for binary data), got {}",
            row[j]
        ),
    )
}

/// Adds the rows of `x_new` to the tree `start.tree` of the rows of `x` (see the
/// [module docs](self)): each row in turn becomes a leaf at a position drawn from its
/// conditional given the tree so far ([`Chain::insert_row`]; leaf `x.nrows() + i` is row
/// `i` of `x_new`), then `config.n_iter` restricted sweeps run with `config`'s likelihood,
/// subtree move, learnt hyperparameters and priors (burn-in and thinning choose the kept
/// states, as in [`run`](super::run)). `progress(sweep, row)` is called after each sweep.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] naming `tree` when `start.tree` is `None`, and
/// those of [`run`](super::run) for the configuration and the tree;
/// [`RoseTreeError::ShapeMismatch`] when `x_new` has another number of columns;
/// [`RoseTreeError::InvalidData`] for an entry of `x_new` that is not finite (not 0, 1 or
/// `NaN` with [`Likelihood::Probit`]), naming its row of `x_new`; those of
/// [`Chain::insert_row`]; [`RoseTreeError::Interrupted`] when `interrupt` returns true.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::pydt::PydtParams;
/// use rosetree::pydt::mcmc::{self, McmcConfig, Start, insert};
///
/// let x = array![[0.0, 0.1], [0.1, 0.0], [3.0, 3.1]];
/// let config = McmcConfig { n_iter: 5, burn_in: 0, ..McmcConfig::default() };
/// let start = Start { tree: None, params: PydtParams::new(0.5, 0.2, 1.0)?, sigma2: 1.0 };
/// let fit = mcmc::run(x.view(), start, &config, 0, &|| false, &mut |_, _| {})?;
/// let grown = insert::partial_fit(
///     x.view(),
///     array![[3.1, 3.0]].view(),
///     Start { tree: Some(&fit.last.tree), ..start },
///     &config,
///     0,
///     &|| false,
///     &mut |_, _| {},
/// )?;
/// assert_eq!(grown.last.tree.n_leaves(), 4);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
pub fn partial_fit(
    x: ArrayView2<'_, f64>,
    x_new: ArrayView2<'_, f64>,
    start: Start<'_>,
    config: &McmcConfig,
    seed: u64,
    interrupt: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(usize, &TraceRow),
) -> Result<McmcResult> {
    let Start {
        tree,
        params,
        sigma2,
    } = start;
    config.check(&params)?;
    let tree = tree.ok_or_else(|| {
        RoseTreeError::param(
            "tree",
            "partial_fit adds rows to a fitted tree; none was given",
        )
    })?;
    if x_new.ncols() != x.ncols() {
        return Err(RoseTreeError::ShapeMismatch {
            what: "x_new".into(),
            expected: format!("{} columns", x.ncols()),
            found: format!("{} columns", x_new.ncols()),
        });
    }
    match config.likelihood {
        Likelihood::Probit => check_binary(x_new)?,
        Likelihood::Gaussian => {
            if let Some(((i, j), v)) = x_new.indexed_iter().find(|(_, v)| !v.is_finite()) {
                return Err(RoseTreeError::data(
                    i,
                    Some(j),
                    format!("must be finite, got {v}"),
                ));
            }
        }
    }
    let mut chain = Chain::with_likelihood(x, tree, params, sigma2, config.likelihood)?;
    let mut rng =
        Xoshiro256PlusPlus::seed_from_u64(seed ^ (x.nrows() as u64).wrapping_mul(SEED_MIX));
    // A probit chain starts its latent values at ±σ, tied wherever rows are: a draw given
    // the tree first, so that new rows are placed among values the tree explains.
    chain.update_latent(&mut rng)?;
    let mut leaves = Vec::with_capacity(x_new.nrows());
    for row in x_new.rows() {
        if interrupt() {
            return Err(RoseTreeError::Interrupted);
        }
        leaves.push(chain.insert_row(row, &mut rng)?);
    }
    drive(
        &mut chain,
        config,
        Pick::Holding(&leaves),
        &mut rng,
        interrupt,
        progress,
    )
}

#[cfg(test)]
mod tests;
