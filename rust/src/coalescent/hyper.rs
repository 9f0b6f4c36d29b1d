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
//! `(Ψ + S)/(ν + m + d + 1)`. The Python layer forms the MAP for the shape of `Λ` in use.
//!
//! # Mutation: one feature at a time
//! Given the tree the features are independent, so `ln p(x | π, λ) = Σ_d ln p(x_d | π, λ_d)`.
//! [`feature_log_likelihoods`] returns each term for a vector of trial rates in one call, so a
//! one-dimensional search runs on all features at once.

use nalgebra::DMatrix;
use ndarray::{Array2, ArrayView2, Axis};

use super::check_timed_tree;
use crate::error::{Result, RoseTreeError};
use crate::models::messages::{
    BrownianDiffusion, MessageModel, MultinomialMutation, Root, tree_log_likelihood,
};
use crate::parallel::Threads;
use crate::tree::Tree;

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
