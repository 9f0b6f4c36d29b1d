//! The re-attachment move against independent computations: each position's density
//! against the chain's cached log joint after attaching there, the proposal's density
//! against its mass (quadrature) and its draws, and the move's acceptance.

use ndarray::Array2;

use super::*;
use crate::pydt::PydtParams;
use crate::pydt::mcmc::{Chain, McmcConfig, Start, SubtreeMove, run};
use crate::pydt::tests::{params, rng, small_trees, tanh_sinh};

fn data(n: usize, d: usize, k: usize) -> Array2<f64> {
    Array2::from_shape_fn((n, d), |(i, j)| {
        (((i * 7 + j * 3 + k) % 5) as f64 - 2.0) * 0.4 + 0.01 * i as f64
    })
}

fn non_root(chain: &Chain) -> Vec<NodeId> {
    let root = chain.arena.root();
    chain
        .arena
        .pre_order(root)
        .unwrap()
        .filter(|&v| v != root)
        .collect()
}

/// Every position of `v`'s subtree with the move's log density there (three times per
/// branch), on the chain with `v` detached.
fn predicted(chain: &Chain, v: NodeId) -> Vec<(Attachment, f64)> {
    let sub = chain.moving(v).unwrap();
    let mut scratch = Scratch::default();
    let mut grid = Vec::new();
    chain.scan(&sub, &mut scratch, &mut grid).unwrap();
    let mut out = Vec::new();
    for (pos, mass) in scratch.positions.clone() {
        match pos {
            Position::Node(b) => out.push((Attachment::Node(b), mass)),
            Position::Branch(u) => {
                let branch = chain.branch(u, &sub, &mut scratch);
                for f in [0.05, 0.5, 0.97] {
                    let time = branch.end - f * branch.len;
                    let r = branch.end - time;
                    out.push((Attachment::Branch { below: u, time }, branch.ln_density(r)));
                }
            }
        }
    }
    out
}

#[test]
fn every_position_density_is_the_log_joint_up_to_one_constant() {
    for (a, b, c) in [(0.7, 0.3, 1.3), (0.0, 0.0, 2.0), (2.0, 0.5, 0.6)] {
        let p = params(a, b, c);
        for (k, t) in small_trees().into_iter().enumerate() {
            let n = t.n_leaves();
            for d in [0, 3] {
                let x = data(n, d, k);
                let mut chain = Chain::new(x.view(), &t, p, 0.8).unwrap();
                if chain.log_prior() == f64::NEG_INFINITY {
                    // A multi-way branch point that the DDT forbids: no finite reference.
                    continue;
                }
                for v in non_root(&chain) {
                    let detached = chain.arena.detach(v).unwrap();
                    chain.refresh();
                    let positions = predicted(&chain, v);
                    assert!(positions.len() >= 3);
                    let mut offsets = Vec::new();
                    for (at, ln_pi) in positions {
                        chain.arena.attach(&detached, at).unwrap();
                        chain.refresh();
                        if ln_pi.is_finite() {
                            offsets.push(chain.log_joint() - ln_pi);
                        } else {
                            // Only a third branch where α + 2β = 0 has no density.
                            assert_eq!(ln_pi, f64::NEG_INFINITY);
                            assert_eq!(chain.log_prior(), f64::NEG_INFINITY, "{at:?}");
                        }
                        let again = chain.arena.detach(v).unwrap();
                        assert_eq!(again.root(), v);
                        chain.refresh();
                    }
                    chain.arena.reattach(&detached).unwrap();
                    chain.refresh();
                    let first = offsets[0];
                    for o in &offsets {
                        assert!(
                            (o - first).abs() < 1e-9 * (1.0 + first.abs()),
                            "α={a} β={b} c={c} d={d} tree {k} node {v}: {offsets:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn the_proposal_density_integrates_to_its_mass_and_its_draws_follow_it() {
    let p = params(0.5, 0.2, 1.0);
    let mut r = rng(4);
    for (k, t) in small_trees().into_iter().enumerate() {
        let n = t.n_leaves();
        let x = data(n, 2, k);
        let mut chain = Chain::new(x.view(), &t, p, 0.5).unwrap();
        for v in non_root(&chain) {
            let detached = chain.arena.detach(v).unwrap();
            chain.refresh();
            let sub = chain.moving(v).unwrap();
            let mut scratch = Scratch::default();
            let mut grid = Vec::new();
            chain.scan(&sub, &mut scratch, &mut grid).unwrap();
            let branches: Vec<NodeId> = scratch
                .positions
                .iter()
                .filter_map(|&(p, _)| match p {
                    Position::Branch(u) => Some(u),
                    Position::Node(_) => None,
                })
                .collect();
            for u in branches {
                let branch = chain.branch(u, &sub, &mut scratch);
                let mut weights = Vec::new();
                let mass = branch.fill(&mut grid, &mut weights);
                assert!(branch.segments >= MIN_SEGMENTS && branch.segments <= MAX_SEGMENTS);
                // ∫ q dt over the branch, segment by segment in z (where q is smooth).
                let mut total = 0.0;
                for s in 0..branch.segments {
                    let (z0, z1) = (s as f64 * branch.width, (s + 1) as f64 * branch.width);
                    total += tanh_sinh(z0, z1, 1.0 / 16.0, &mut |z| {
                        let r = branch.eps * z.exp_m1();
                        (branch.ln_proposal(&grid, r) + branch.eps.ln() + z).exp()
                    });
                }
                assert!(
                    (total.ln() - mass).abs() < 1e-6,
                    "tree {k} node {v} branch {u}: {} vs {mass}",
                    total.ln()
                );
                // Draws per segment against the segments' masses.
                let top = branch.segment_weights(&grid, &mut weights);
                let masses: Vec<f64> = weights.iter().map(|w| w.ln() + top).collect();
                let draws = 4000;
                let mut counts = vec![0usize; branch.segments];
                for _ in 0..draws {
                    let r = branch.sample(&grid, &mut r);
                    assert!(r > 0.0 && r < branch.len);
                    let z = (r / branch.eps).ln_1p();
                    counts[((z / branch.width) as usize).min(branch.segments - 1)] += 1;
                }
                for (s, &m) in masses.iter().enumerate() {
                    let q = (m - mass).exp();
                    let f = counts[s] as f64 / draws as f64;
                    let se = (q * (1.0 - q) / draws as f64).sqrt().max(1e-3);
                    assert!((f - q).abs() < 5.0 * se, "segment {s}: {f} vs {q}");
                }
            }
            chain.arena.reattach(&detached).unwrap();
            chain.refresh();
        }
    }
}

#[test]
fn the_move_is_accepted_almost_always_on_data_from_the_model() {
    let p = params(1.0, 0.2, 1.0);
    let (x, tree) = crate::pydt::sample(40, 5, &p, 1.0, 7).unwrap();
    let mut chain = Chain::new(x.view(), &tree, p, 1.0).unwrap();
    let mut r = rng(9);
    let moves = 2000;
    let accepted = (0..moves)
        .filter(|_| chain.gibbs_move(&mut r).unwrap())
        .count();
    let rate = accepted as f64 / moves as f64;
    assert!(rate > 0.9, "acceptance {rate}");
}

#[test]
fn chains_with_the_move_are_the_same_for_any_thread_count() {
    let p = params(0.5, 0.2, 1.0);
    let (x, _) = crate::pydt::sample(25, 3, &p, 1.0, 2).unwrap();
    let config = McmcConfig {
        n_iter: 6,
        burn_in: 2,
        subtree_move: SubtreeMove::Gibbs,
        ..McmcConfig::default()
    };
    let go = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let start = Start {
                tree: None,
                params: p,
                sigma2: 1.0,
            };
            run(x.view(), start, &config, 11, &|| false, &mut |_, _| {}).unwrap()
        })
    };
    let (one, two) = (go(1), go(2));
    assert_eq!(one.trace, two.trace);
    assert_eq!(one.last.tree.heights(), two.last.tree.heights());
    assert_eq!(
        one.last.tree.topology().internal(),
        two.last.tree.topology().internal()
    );
    let _: PydtParams = one.last.params;
}
