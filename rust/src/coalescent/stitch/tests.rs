//! Stitching: the log joint from summaries equals the log joint of the rows on the tree
//! returned (an upward pass over every row), the joins are timed as Greedy-Rate1 times a
//! pair, one part is the part itself, and bad inputs are refused.

use ndarray::{Array2, Axis};
use rand::Rng;

use super::*;
use crate::coalescent::{greedy_rate1, log_joint};
use crate::models::messages::tests::{normal, rng};
use crate::models::messages::{
    BrownianDiffusion, MaskedBrownian, MessageCodec, MultinomialMutation, Root,
};
use crate::parallel::Threads;

fn mixture(n: usize, d: usize, seed: u64) -> Array2<f64> {
    let mut g = rng(seed);
    let centres: Vec<Vec<f64>> = (0..3)
        .map(|_| (0..d).map(|_| 6.0 * normal(&mut g)).collect())
        .collect();
    Array2::from_shape_fn((n, d), |(i, j)| centres[i % 3][j] + normal(&mut g))
}

/// The rows split at random into `k` parts, each fitted by Greedy-Rate1 and summarised.
fn parts_of<M: MessageCodec>(
    model: &M,
    x: &Array2<f64>,
    k: usize,
    seed: u64,
) -> Vec<Part<M::Message>> {
    let mut g = rng(seed);
    let mut rows = vec![Vec::new(); k];
    for r in 0..x.nrows() {
        rows[if r < k { r } else { g.random_range(0..k) }].push(r);
    }
    let threads = Threads::new(Some(1)).unwrap();
    rows.into_iter()
        .map(|rows| {
            let leaves = model
                .leaf_messages(x.select(Axis(0), &rows).view())
                .unwrap();
            let tree = (rows.len() > 1).then(|| {
                greedy_rate1(model, leaves.clone(), &threads, &|| false)
                    .unwrap()
                    .tree
            });
            let mut summary = part_summary(model, &leaves, tree.as_ref()).unwrap();
            // As the summary travels between machines: encoded and decoded.
            let encoded = model.encode_message(&summary.message);
            summary.message = model.decode_message(&encoded).unwrap();
            Part {
                rows,
                tree,
                summary,
            }
        })
        .collect()
}

/// A chain joining parts `0, 1, …` in turn.
fn chain(k: usize) -> Vec<[usize; 2]> {
    (0..k - 1)
        .map(|j| [if j == 0 { 0 } else { k + j - 1 }, j + 1])
        .collect()
}

fn check_against_rows<M: MessageCodec>(model: &M, x: &Array2<f64>, k: usize, seed: u64) {
    let parts = parts_of(model, x, k, seed);
    let stitched = stitch(model, x.nrows(), &parts, &chain(k)).unwrap();
    check_timed_tree(&stitched.tree).unwrap();
    let want = log_joint(model, x.view(), &stitched.tree).unwrap();
    assert!(
        (stitched.log_joint - want).abs() <= 1e-9 * want.abs().max(1.0),
        "{} vs {want}",
        stitched.log_joint
    );
    // Evidence of every node: the parts' (from their rows) and the top's (from summaries)
    // against the whole tree's.
    let leaves = model.leaf_messages(x.view()).unwrap();
    let all = subtree_log_evidence_from_leaves(model, &leaves, &stitched.tree).unwrap();
    for (part, nodes) in parts.iter().zip(&stitched.part_nodes) {
        let part_leaves = model
            .leaf_messages(x.select(Axis(0), &part.rows).view())
            .unwrap();
        let e = part_evidence(model, &part_leaves, part.tree.as_ref()).unwrap();
        let m = part.rows.len();
        for (&r, &ev) in part.rows.iter().zip(&e[..m]) {
            assert!((all[r] - ev).abs() <= 1e-9 * ev.abs().max(1.0));
        }
        for (&v, &ev) in nodes.iter().zip(&e[m..]) {
            assert!((all[v] - ev).abs() <= 1e-9 * ev.abs().max(1.0));
            // The node has the part's leaves below it, as the part's node does.
            assert!(
                stitched
                    .tree
                    .leaves_of(v)
                    .iter()
                    .all(|r| part.rows.contains(r))
            );
        }
    }
    for (&v, &ev) in stitched.top_nodes.iter().zip(&stitched.top_evidence) {
        assert!(
            (all[v] - ev).abs() <= 1e-9 * ev.abs().max(1.0),
            "{} vs {ev}",
            all[v]
        );
    }
    assert_eq!(*stitched.top_nodes.last().unwrap(), stitched.tree.root());
}

#[test]
fn brownian_log_joint_from_summaries_is_that_of_the_rows() {
    let x = mixture(60, 3, 1);
    let model = BrownianDiffusion::isotropic(2.0, 3)
        .unwrap()
        .with_noise(0.1)
        .unwrap();
    for k in [2, 3, 7] {
        check_against_rows(&model, &x, k, k as u64);
    }
    let gaussian_root = BrownianDiffusion::diagonal(&[1.0, 2.0, 0.5], 3)
        .unwrap()
        .with_root(Root::Gaussian { s0: 4.0 })
        .unwrap();
    check_against_rows(&gaussian_root, &x, 4, 9);
}

#[test]
fn masked_log_joint_from_summaries_is_that_of_the_rows() {
    let mut x = mixture(50, 4, 2);
    let mut g = rng(3);
    for v in &mut x {
        if g.random::<f64>() < 0.2 {
            *v = f64::NAN;
        }
    }
    let base = BrownianDiffusion::diagonal(&[1.0, 2.0, 1.0, 0.5], 4)
        .unwrap()
        .with_noise(0.05)
        .unwrap();
    check_against_rows(&MaskedBrownian::new(base).unwrap(), &x, 5, 4);
}

#[test]
fn multinomial_log_joint_from_summaries_is_that_of_the_rows() {
    let mut g = rng(5);
    let x = Array2::from_shape_fn((40, 6), |(i, j)| {
        ((i % 2 + j + g.random_range(0..2)) % 3) as f64
    });
    let model = MultinomialMutation::from_data(x.view(), &[3], &[0.7]).unwrap();
    check_against_rows(&model, &x, 3, 6);
    check_against_rows(&model, &x, 6, 7);
}

#[test]
fn a_join_of_two_rows_is_timed_as_greedy_rate1_times_them() {
    // Points ±0.5 in one dimension, Λ = 1: the duration maximising −δ + ln N(1; 0, 2δ) is
    // δ* = (√5 − 1)/4 (eq 12 with rate 1).
    let model = BrownianDiffusion::isotropic(1.0, 1).unwrap();
    let x = ndarray::array![[0.5], [-0.5]];
    let parts = parts_of(&model, &x, 2, 0);
    let stitched = stitch(&model, 2, &parts, &[[0, 1]]).unwrap();
    let t = stitched.tree.heights().unwrap()[2];
    assert!((t + (5f64.sqrt() - 1.0) / 4.0).abs() < 1e-15, "{t}");
    // ln p = −C(2,2)·|t| + ln N(1; 0, 2|t|), the flat root contributing 0.
    let v = 2.0 * t.abs();
    let want = t - 0.5 * (2.0 * std::f64::consts::PI * v).ln() - 1.0 / (2.0 * v);
    assert!((stitched.log_joint - want).abs() < 1e-13);
}

#[test]
fn one_part_is_the_part_itself() {
    let x = mixture(30, 2, 8);
    let model = BrownianDiffusion::isotropic(1.5, 2)
        .unwrap()
        .with_noise(0.1)
        .unwrap();
    let threads = Threads::new(Some(1)).unwrap();
    let leaves = model.leaf_messages(x.view()).unwrap();
    let fit = greedy_rate1(&model, leaves.clone(), &threads, &|| false).unwrap();
    let part = Part {
        rows: (0..30).collect(),
        tree: Some(fit.tree.clone()),
        summary: part_summary(&model, &leaves, Some(&fit.tree)).unwrap(),
    };
    let stitched = stitch(&model, 30, &[part], &[]).unwrap();
    assert_eq!(stitched.tree, fit.tree);
    assert!((stitched.log_joint - fit.log_joint).abs() <= 1e-10 * fit.log_joint.abs());
}

#[test]
fn bad_parts_and_tops_are_refused() {
    let model = BrownianDiffusion::isotropic(1.0, 1).unwrap();
    let x = ndarray::array![[0.0], [1.0], [2.0]];
    let parts = parts_of(&model, &x, 3, 0);
    let invalid = |r: Result<Stitched>| assert!(matches!(r, Err(RoseTreeError::InvalidTree(_))));
    invalid(stitch(&model, 3, &parts, &[[0, 1]]));
    invalid(stitch(&model, 3, &parts, &[[0, 1], [0, 2]]));
    invalid(stitch(&model, 3, &parts, &[[0, 4], [1, 2]]));
    invalid(stitch(&model, 4, &parts, &[[0, 1], [3, 2]]));
    let mut twice = parts.clone();
    twice[1].rows = vec![0];
    invalid(stitch(&model, 3, &twice, &[[0, 1], [3, 2]]));
    assert!(stitch(&model, 3, &parts, &[[0, 1], [3, 2]]).is_ok());
    invalid(
        part_summary(&model, &model.leaf_messages(x.view()).unwrap(), None).map(|_| unreachable!()),
    );
}

#[test]
fn messages_that_are_not_messages_are_refused() {
    let brownian = BrownianDiffusion::isotropic(1.0, 2).unwrap();
    assert!(brownian.decode_message(&[0.0, 1.0, 0.5]).is_ok());
    for bad in [&[0.0, 1.0][..], &[0.0, f64::NAN, 0.5], &[0.0, 1.0, -1.0]] {
        assert!(matches!(
            brownian.decode_message(bad),
            Err(RoseTreeError::InvalidParameter { .. })
        ));
    }
    let masked = MaskedBrownian::new(brownian).unwrap();
    assert!(
        masked
            .decode_message(&[0.0, 1.0, 0.5, f64::INFINITY])
            .is_ok()
    );
    assert!(masked.decode_message(&[0.0, 1.0, -0.5, 1.0]).is_err());
    let mutation = MultinomialMutation::new(&[vec![0.5, 0.5]], &[1.0]).unwrap();
    assert!(mutation.decode_message(&[1.0, 1.0]).is_ok());
    assert!(mutation.decode_message(&[1.0, -1.0]).is_err());
    assert!(mutation.decode_message(&[1.0]).is_err());
}
