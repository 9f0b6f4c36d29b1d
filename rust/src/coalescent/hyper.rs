//! What hyperparameter re-estimation needs of a fitted tree (Teh, Daumé & Roy 2007, §4.4):
//! the sufficient statistic of `Λ` under Brownian diffusion, and the per-feature log
//! likelihoods of the mutation model at trial rates.
//!
//! # Brownian diffusion: independent contrasts
//! Messages are `N(μ, vΛ)`, and at a binary merge of two messages propagated to the merge
//! time, `N(μ_l, w_lΛ)` and `N(μ_r, w_rΛ)`, the normaliser is (eq 11)
//! `Z_i = N(u_i; 0, w_iΛ)` with the contrast `u_i = μ_l − μ_r` and `w_i = w_l + w_r`. The
//! merged message is `N((μ_l/w_l + μ_r/w_r)/(1/w_l + 1/w_r), (1/w_l + 1/w_r)⁻¹Λ)`: its mean
//! and variance factor, and so every later contrast and weight, do not depend on `Λ`
//! (Felsenstein's independent contrasts). With `m` contrasts (the `n − 1` merges, and with a
//! Gaussian root `N(0, s0Λ)` one more, `u = μ_root`, `w = v_root + s0`)
//!
//! ```text
//! ln p(x | π, Λ) = −(md/2) ln 2π − (d/2) Σ_i ln w_i − (m/2) ln|Λ| − ½ tr(Λ⁻¹ S),
//! S = Σ_i u_i u_iᵀ / w_i,
//! ```
//!
//! so `S` and `m` ([`brownian_contrasts`]) are all that `Λ`'s posterior needs of the data and
//! the tree; with an inverse-Wishart prior `IW(ν, Ψ)` (density `∝ |Λ|^{−(ν+d+1)/2}
//! exp(−½ tr(ΨΛ⁻¹))`) the posterior is `IW(ν + m, Ψ + S)`, whose mode is
//! `(Ψ + S)/(ν + m + d + 1)`; [`super::learn`] forms the mode for the shape of `Λ` in use.
//!
//! # Mutation: one feature at a time
//! Given the tree the features are independent, so `ln p(x | π, λ) = Σ_d ln p(x_d | π, λ_d)`.
//! [`feature_log_likelihoods`] returns each term for a vector of trial rates in one call.
//! [`rate_map`] finds the rates' posterior mode under `Gamma(a, b_d)` priors (shape `a`,
//! rate `b_d`): each feature's `ln p(x_d | π, λ_d) + ln Gamma(λ_d; a, b_d)` (or, for one rate
//! shared by every feature, the sum of the likelihood terms plus one prior term) maximised
//! over `ln λ` by golden-section search ([`crate::optimize::golden_max`]) on
//! `[ln λ₀ − 12, ln λ₀ + 12]` around the current rate `λ₀`, to about `10⁻⁵` in `ln λ`; a
//! feature keeps its current rate where the search finds nothing better, so the objective
//! never decreases.

use nalgebra::DMatrix;
use ndarray::{Array2, ArrayView2, Axis};

use super::check_timed_tree;
use crate::error::{Result, RoseTreeError};
use crate::math::ln_gamma;
use crate::models::messages::{
    BrownianDiffusion, MessageModel, MultinomialMutation, Root, tree_log_likelihood,
};
use crate::optimize::golden_max;
use crate::parallel::Threads;
use crate::tree::Tree;

/// Half the width of the search bracket on `ln λ` around the current rate.
const LOG_RATE_SPAN: f64 = 12.0;

/// The independent contrasts of the rows of `x` on a timed binary tree (module docs): the
/// scatter `S = Σ_i u_i u_iᵀ / w_i` in the data's coordinates and the number of contrasts
/// `m` (`n − 1`, plus one for a Gaussian root).
///
/// # Errors
/// [`RoseTreeError::InvalidTree`] if the tree is not a timed binary coalescent tree over the
/// rows of `x`; [`RoseTreeError::InvalidData`] for non-finite data;
/// [`RoseTreeError::Numerical`] for a contrast of zero weight between different rows (two
/// rows merged after no time at all, which has zero density under every `Λ`).
///
/// With observation noise `η` ([`BrownianDiffusion::with_noise`]) each leaf's pendant
/// branch is `η` longer: the contrasts stay independent `N(0, wΛ)`, so the closed form holds.
pub fn brownian_contrasts(
    x: ArrayView2<'_, f64>,
    tree: &Tree,
    root: Root,
    noise: f64,
) -> Result<(Array2<f64>, usize)> {
    let heights = check_timed_tree(tree)?;
    let (n, d) = x.dim();
    if tree.n_leaves() != n {
        return Err(RoseTreeError::InvalidTree(format!(
            "the tree has {} leaves but X has {n} rows",
            tree.n_leaves()
        )));
    }
    // Contrasts and weights do not depend on Λ: pass messages under Λ = I, where the
    // whitened means are the data's own coordinates.
    let model = BrownianDiffusion::isotropic(1.0, d)?.with_noise(noise)?;
    let mut messages: Vec<Option<_>> = model
        .leaf_messages(x)?
        .into_iter()
        .map(|(m, _)| Some(m))
        .collect();
    messages.resize(tree.nodes().len(), None);
    let mut scatter = DMatrix::<f64>::zeros(d, d);
    let mut add = |u: Vec<f64>, w: f64, what: &dyn Fn() -> String| -> Result<()> {
        if u.iter().all(|v| *v == 0.0) {
            return Ok(());
        }
        if w.is_nan() || w <= 0.0 {
            return Err(RoseTreeError::Numerical(format!(
                "{} has weight {w}: different rows merged after no time",
                what()
            )));
        }
        let u = nalgebra::DVector::from_vec(u);
        scatter += &u * u.transpose() / w;
        Ok(())
    };
    for (v, node) in tree.nodes().iter().enumerate().skip(n) {
        let [l, r] = [node.children[0], node.children[1]];
        let incoming: Vec<_> = [l, r]
            .iter()
            .map(|&c| {
                let msg = messages[c].take().expect("each child has one parent");
                model.propagate(&msg, heights[c] - heights[v])
            })
            .collect();
        let (a, b) = (&incoming[0], &incoming[1]);
        let u = a
            .whitened_mean()
            .iter()
            .zip(b.whitened_mean())
            .map(|(p, q)| p - q)
            .collect();
        add(u, a.variance() + b.variance(), &|| {
            format!("the contrast at node {v}")
        })?;
        messages[v] = Some(model.combine(&incoming).0);
    }
    let mut m = n - 1;
    if let Root::Gaussian { s0 } = root {
        let top = messages[tree.root()]
            .take()
            .expect("the root has a message");
        add(top.whitened_mean().to_vec(), top.variance() + s0, &|| {
            "the root's contrast with the origin".into()
        })?;
        m += 1;
    }
    Ok((Array2::from_shape_fn((d, d), |(i, j)| scatter[(i, j)]), m))
}

/// `ln p(x_d | π, λ_d)` for every feature `d` of the mutation model `model` with the rates
/// `rates` instead of its own (one rate per feature), each by its own upward pass over the
/// tree (`O(n K_d)`), in parallel over the features on `threads`.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] on `rates` for a wrong length or a rate that is not
/// finite and `> 0`; [`RoseTreeError::InvalidTree`] for a tree that is not a timed binary
/// coalescent tree over the rows of `x`; whatever the model reports for the data.
pub fn feature_log_likelihoods(
    model: &MultinomialMutation,
    x: ArrayView2<'_, f64>,
    tree: &Tree,
    rates: &[f64],
    threads: &Threads,
) -> Result<Vec<f64>> {
    check_timed_tree(tree)?;
    let d = x.ncols();
    if rates.len() != d {
        return Err(RoseTreeError::param(
            "rates",
            format!("needs one rate per feature ({d}), got {}", rates.len()),
        ));
    }
    let features: Vec<usize> = (0..d).collect();
    threads.try_map(&features, 8, |&f| {
        let one = MultinomialMutation::new(&[model.equilibrium(f).to_vec()], &[rates[f]])?;
        let column = x.select(Axis(1), &[f]);
        tree_log_likelihood(&one, column.view(), tree, 0.0)
    })
}

/// `ln Gamma(λ; a, b)`, shape `a`, rate `b`.
pub(super) fn gamma_log_density(rate: f64, a: f64, b: f64) -> f64 {
    a * b.ln() - ln_gamma(a) + (a - 1.0) * rate.ln() - b * rate
}

/// The posterior mode of the mutation rates given the tree (module docs): one rate per
/// feature, or with `shared` one rate for every feature (`current` and `prior_rates` then
/// hold that rate and its prior's rate, repeated). `prior_shape` is the Gamma prior's shape
/// `a`, `prior_rates` its rate `b_d` per feature. Features in parallel on `threads`.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] naming `Lambda_prior` for a shape or rate that is
/// not finite and `> 0`, on `rates` for a current rate that is not; as
/// [`feature_log_likelihoods`] otherwise.
#[allow(clippy::too_many_arguments)]
pub fn rate_map(
    model: &MultinomialMutation,
    x: ArrayView2<'_, f64>,
    tree: &Tree,
    current: &[f64],
    shared: bool,
    prior_shape: f64,
    prior_rates: &[f64],
    threads: &Threads,
) -> Result<Vec<f64>> {
    check_timed_tree(tree)?;
    let d = x.ncols();
    let positive = |v: &f64| v.is_finite() && *v > 0.0;
    if current.len() != d || !current.iter().all(positive) {
        return Err(RoseTreeError::param(
            "rates",
            format!("needs {d} finite rates > 0, got {current:?}"),
        ));
    }
    if prior_rates.len() != d || !positive(&prior_shape) || !prior_rates.iter().all(positive) {
        return Err(RoseTreeError::param(
            "Lambda_prior",
            format!(
                "needs a shape > 0 and {d} finite rates > 0, got {prior_shape} and {prior_rates:?}"
            ),
        ));
    }
    // One feature's log likelihood at a trial rate; NaN where the pass fails.
    let feature = |f: usize, rate: f64| -> f64 {
        MultinomialMutation::new(&[model.equilibrium(f).to_vec()], &[rate])
            .and_then(|one| {
                let column = x.select(Axis(1), &[f]);
                tree_log_likelihood(&one, column.view(), tree, 0.0)
            })
            .unwrap_or(f64::NAN)
    };
    // ln λ from the bracket's lower end plus one, so that argmin's relative tolerance is an
    // absolute one of about 10⁻⁵ in ln λ.
    let search = |objective: &(dyn Fn(f64) -> f64 + Sync), start: f64| -> f64 {
        let lo = start - LOG_RATE_SPAN;
        let shifted = |v: f64| objective(v + lo - 1.0);
        let tol = 1e-5 / (2.0 * (2.0 * LOG_RATE_SPAN + 1.0));
        let found = golden_max(
            shifted,
            1.0,
            2.0 * LOG_RATE_SPAN + 1.0,
            1.0 + LOG_RATE_SPAN,
            tol,
        )
        .map(|v| v + lo - 1.0);
        match found {
            Some(u) if objective(u) > objective(start) => u.exp(),
            _ => start.exp(),
        }
    };
    if shared {
        let (a, b) = (prior_shape, prior_rates[0]);
        let objective = |u: f64| -> f64 {
            let rate = u.exp();
            let features: Vec<usize> = (0..d).collect();
            let terms = threads.try_map(&features, 8, |&f| Ok(feature(f, rate)));
            terms.map_or(f64::NAN, |t| t.iter().sum::<f64>()) + gamma_log_density(rate, a, b)
        };
        return Ok(vec![search(&objective, current[0].ln()); d]);
    }
    let features: Vec<usize> = (0..d).collect();
    threads.try_map(&features, 2, |&f| {
        let objective = |u: f64| -> f64 {
            let rate = u.exp();
            feature(f, rate) + gamma_log_density(rate, prior_shape, prior_rates[f])
        };
        Ok(search(&objective, current[f].ln()))
    })
}

#[cfg(test)]
mod tests {
    use ndarray::array;

    use super::*;
    use crate::tree::Topology;

    #[test]
    fn feature_terms_sum_to_the_whole_likelihood() {
        let x = array![[0., 1., 2.], [0., f64::NAN, 2.], [1., 1., 0.], [1., 0., 0.]];
        let tree = Tree::new(
            &Topology::new(4, vec![vec![0, 1], vec![2, 3], vec![4, 5]]).unwrap(),
            Some(vec![0.0, 0.0, 0.0, 0.0, -0.3, -0.7, -1.9]),
        )
        .unwrap();
        let rates = [0.4, 1.3, 2.2];
        let model = MultinomialMutation::from_data(x.view(), &[2, 2, 3], &rates).unwrap();
        let threads = Threads::new(Some(1)).unwrap();
        let terms = feature_log_likelihoods(&model, x.view(), &tree, &rates, &threads).unwrap();
        let whole = tree_log_likelihood(&model, x.view(), &tree, 0.0).unwrap();
        assert!((terms.iter().sum::<f64>() - whole).abs() < 1e-12);
        // Another rate for one feature changes that feature's term only.
        let other = [0.4, 5.0, 2.2];
        let moved = feature_log_likelihoods(&model, x.view(), &tree, &other, &threads).unwrap();
        assert_eq!((moved[0], moved[2]), (terms[0], terms[2]));
        assert!(moved[1] != terms[1]);
        assert!(matches!(
            feature_log_likelihoods(&model, x.view(), &tree, &[1.0], &threads),
            Err(RoseTreeError::InvalidParameter { .. })
        ));
    }

    #[test]
    fn the_rate_map_beats_a_grid_and_refuses_bad_priors() {
        let x = array![[0., 1.], [0., 1.], [1., 0.], [1., 1.], [0., 0.]];
        let tree = Tree::new(
            &Topology::new(5, vec![vec![0, 1], vec![2, 3], vec![5, 4], vec![6, 7]]).unwrap(),
            Some(vec![0.0, 0.0, 0.0, 0.0, 0.0, -0.2, -0.5, -0.9, -2.0]),
        )
        .unwrap();
        let model = MultinomialMutation::from_data(x.view(), &[2, 2], &[1.0, 1.0]).unwrap();
        let threads = Threads::new(Some(1)).unwrap();
        let (a, b) = (2.0, [1.0, 0.5]);
        let objective = |f: usize, rate: f64| {
            let mut rates = [1.0, 1.0];
            rates[f] = rate;
            feature_log_likelihoods(&model, x.view(), &tree, &rates, &threads).unwrap()[f]
                + gamma_log_density(rate, a, b[f])
        };
        let got = rate_map(&model, x.view(), &tree, &[1.0, 1.0], false, a, &b, &threads).unwrap();
        for (f, &rate) in got.iter().enumerate() {
            let best = (0..=400)
                .map(|i| (-6.0 + i as f64 * 0.025).exp())
                .map(|r| objective(f, r))
                .fold(f64::NEG_INFINITY, f64::max);
            assert!(objective(f, rate) >= best - 1e-9, "feature {f}");
        }
        // One shared rate maximises the summed objective (one prior term).
        let shared = rate_map(
            &model,
            x.view(),
            &tree,
            &[1.0, 1.0],
            true,
            a,
            &[1.0, 1.0],
            &threads,
        )
        .unwrap();
        assert_eq!(shared[0], shared[1]);
        let total = |r: f64| {
            let ll = feature_log_likelihoods(&model, x.view(), &tree, &[r, r], &threads).unwrap();
            ll.iter().sum::<f64>() + gamma_log_density(r, a, 1.0)
        };
        let best = (0..=400)
            .map(|i| total((-6.0 + i as f64 * 0.025).exp()))
            .fold(f64::NEG_INFINITY, f64::max);
        assert!(total(shared[0]) >= best - 1e-9);
        for (shape, rates) in [(0.0, [1.0, 1.0]), (2.0, [1.0, f64::NAN])] {
            assert!(matches!(
                rate_map(&model, x.view(), &tree, &[1.0, 1.0], false, shape, &rates, &threads),
                Err(RoseTreeError::InvalidParameter { name, .. }) if name == "Lambda_prior"
            ));
        }
    }

    #[test]
    fn two_rows_give_one_contrast() {
        // u = x0 − x1, w = 2 × 1.5: S = u uᵀ / 3.
        let x = array![[1.0, 2.0], [0.0, -1.0]];
        let tree = Tree::new(
            &Topology::new(2, vec![vec![0, 1]]).unwrap(),
            Some(vec![0.0, 0.0, -1.5]),
        )
        .unwrap();
        let (s, m) = brownian_contrasts(x.view(), &tree, Root::Flat, 0.0).unwrap();
        assert_eq!(m, 1);
        let want = array![[1.0 / 3.0, 1.0], [1.0, 3.0]];
        assert!((&s - &want).iter().all(|v| v.abs() < 1e-15));
        // A Gaussian root adds the merged mean (0.5, 0.5) with weight 0.75 + s0.
        let (s, m) = brownian_contrasts(x.view(), &tree, Root::Gaussian { s0: 0.25 }, 0.0).unwrap();
        assert_eq!(m, 2);
        assert!((s[[0, 1]] - (1.0 + 0.25)).abs() < 1e-15);
    }
}
