//! A rose tree joined from parts fitted apart (on different machines), scored exactly.
//!
//! Every node's `ln p(D_T | T)` (eq 1.5) depends only on `ln f` of the nodes below it and on
//! their shape, and `ln f` of a node depends only on the statistics of its rows, which add
//! up over disjoint parts. So a part fitted where its rows are stored contributes its tree
//! (with `ln f` at every node) and its rows' total statistics, and the nodes above the parts
//! are scored from those totals alone: the joined tree's evidence is the exact
//! `ln p(D | T)`, without the rows ever being in one place. This is how
//! `rosetree.dask` joins its subtrees; the approximate search ([`super::approximate`])
//! joins its parts the same way but evaluates the whole tree from the rows, which it has.

use super::RoseTree;
use super::evaluate::from_log_f;
use super::mixing::Mixing;
use crate::error::{Result, RoseTreeError};
use crate::models::ClusterModel;
use crate::tree::Topology;

/// One part of the data: its tree (`None` for a part of one row), the global row of each of
/// its leaves, and the statistics of all its rows.
#[derive(Debug, Clone)]
pub struct Part<S> {
    /// The part's fitted tree; its leaf `i` is data row `rows[i]`.
    pub tree: Option<RoseTree>,
    /// The data row of each leaf.
    pub rows: Vec<usize>,
    /// The statistics of the part's rows together.
    pub stats: S,
}

/// The joined tree and the statistics of its top nodes (the nodes above the parts, in the
/// order of `top` in [`stitch`]).
#[derive(Debug, Clone)]
pub struct Stitched<S> {
    /// The tree over all `n_rows` rows, scored exactly.
    pub tree: RoseTree,
    /// Statistics of each top node.
    pub top_stats: Vec<S>,
}

/// Joins `parts` under the nodes `top` into one tree over rows `0..n_rows` and scores it
/// under `model` and `mixing`.
///
/// `top[k]` lists the children of top node `k`: `c < parts.len()` is the root of part `c`,
/// `c ≥ parts.len()` is top node `c − parts.len()`, which must come earlier in `top`. The
/// last top node is the root. With one part and no top nodes, the part is the tree. Node
/// ids of the result: leaves are the data rows; then each part's internal nodes, part by
/// part in their own order; then the top nodes.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] when the parts' rows are not exactly `0..n_rows`
/// once each, a part's tree does not have one leaf per row, or `top` does not join every
/// part once; [`RoseTreeError::Numerical`] where a node's `ln p` is NaN.
pub fn stitch<M: ClusterModel>(
    model: &M,
    mixing: &Mixing,
    n_rows: usize,
    parts: &[Part<M::Stats>],
    top: &[Vec<usize>],
) -> Result<Stitched<M::Stats>> {
    let bad = |reason: String| RoseTreeError::param("parts", reason);
    let mut seen = vec![false; n_rows];
    let mut log_f = vec![f64::NAN; n_rows];
    let mut internal: Vec<Vec<usize>> = Vec::new();
    let mut roots = Vec::with_capacity(parts.len());
    for (p, part) in parts.iter().enumerate() {
        for &r in &part.rows {
            if r >= n_rows || std::mem::replace(&mut seen[r], true) {
                return Err(bad(format!(
                    "part {p} holds row {r}, which is out of range or in another part"
                )));
            }
        }
        let Some(tree) = &part.tree else {
            if part.rows.len() != 1 {
                return Err(bad(format!(
                    "part {p} has no tree but {} rows",
                    part.rows.len()
                )));
            }
            log_f[part.rows[0]] = model.log_marginal(&part.stats)?;
            roots.push(part.rows[0]);
            continue;
        };
        let m = tree.n_leaves();
        if m != part.rows.len() {
            return Err(bad(format!(
                "part {p}'s tree has {m} leaves for {} rows",
                part.rows.len()
            )));
        }
        // Part node ids to ids of the joined tree: leaves are rows, internal nodes follow.
        let first = n_rows + internal.len();
        let id = |v: usize| if v < m { part.rows[v] } else { first + v - m };
        for (v, values) in tree.values().iter().enumerate() {
            if v < m {
                log_f[part.rows[v]] = values.log_f;
            }
        }
        for node in &tree.nodes()[m..] {
            internal.push(node.children.iter().map(|&c| id(c)).collect());
        }
        roots.push(id(tree.root()));
    }
    if let Some(r) = seen.iter().position(|&s| !s) {
        return Err(bad(format!("row {r} is in no part")));
    }
    for values in parts.iter().filter_map(|p| p.tree.as_ref()) {
        log_f.extend(values.values()[values.n_leaves()..].iter().map(|v| v.log_f));
    }
    if top.is_empty() && parts.len() != 1 {
        return Err(bad(format!(
            "{} parts need top nodes to join them",
            parts.len()
        )));
    }
    let mut top_stats: Vec<M::Stats> = Vec::with_capacity(top.len());
    for (k, children) in top.iter().enumerate() {
        let stats_of = |c: usize| -> Result<&M::Stats> {
            if c < parts.len() {
                Ok(&parts[c].stats)
            } else if c - parts.len() < k {
                Ok(&top_stats[c - parts.len()])
            } else {
                Err(RoseTreeError::param(
                    "top",
                    format!("top node {k} lists child {c}, which is not an earlier node"),
                ))
            }
        };
        let Some((&head, rest)) = children.split_first() else {
            return Err(RoseTreeError::param(
                "top",
                format!("top node {k} has no children"),
            ));
        };
        let mut merged = stats_of(head)?.clone();
        for &c in rest {
            merged = model.merge(&merged, stats_of(c)?);
        }
        log_f.push(model.log_marginal(&merged)?);
        top_stats.push(merged);
        let base = n_rows + internal.len() - k;
        internal.push(
            children
                .iter()
                .map(|&c| {
                    if c < parts.len() {
                        roots[c]
                    } else {
                        base + c - parts.len()
                    }
                })
                .collect(),
        );
    }
    let topology = Topology::new(n_rows, internal)
        .map_err(|e| RoseTreeError::param("top", format!("the joined tree is not a tree: {e}")))?;
    Ok(Stitched {
        tree: from_log_f(&topology, &log_f, mixing)?,
        top_stats,
    })
}

#[cfg(test)]
mod tests {
    use ndarray::Array2;

    use super::*;
    use crate::brt::{BrtParams, evaluate, fit};
    use crate::models::{
        BetaBernoulli, DirichletMultinomial, NormalGamma, NormalInverseWishart, StatsCodec,
    };

    /// Rows `0..n` of a pseudo-random `n × d` matrix with values in `0..k`.
    fn data(n: usize, d: usize, k: u64) -> Array2<f64> {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        Array2::from_shape_fn((n, d), |(i, j)| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Rows of two kinds, so that the parts' trees differ from their union's.
            ((state % k) as usize + if i % 2 == 0 { j % 2 } else { 0 }).min(k as usize - 1) as f64
        })
    }

    /// Parts fitted apart (odd and even rows, and one single row), joined under two top
    /// nodes, score what `evaluate` gives for the joined tree from all rows.
    fn check<M: StatsCodec + crate::models::RowQueries>(model: &M, x: &Array2<f64>) {
        let mixings = [
            Mixing::Brt { gamma: 0.5 },
            Mixing::Gamma { gamma: 0.3 },
            Mixing::Dp { alpha: 2.0 },
        ];
        for mixing in mixings {
            let params = BrtParams::new(mixing).check().unwrap();
            let n = x.nrows();
            let split: [Vec<usize>; 3] = [
                (0..n - 1).filter(|i| i % 2 == 0).collect(),
                (0..n - 1).filter(|i| i % 2 == 1).collect(),
                vec![n - 1],
            ];
            let parts: Vec<Part<M::Stats>> = split
                .iter()
                .map(|rows| {
                    let sub = x.select(ndarray::Axis(0), rows);
                    let leaves = model.leaf_stats_all(sub.view()).unwrap();
                    let stats = leaves[1..]
                        .iter()
                        .fold(leaves[0].clone(), |a, b| model.merge(&a, b));
                    // Through the encoding, as between machines.
                    let stats = model.decode_stats(&model.encode_stats(&stats)).unwrap();
                    let tree = (rows.len() > 1).then(|| fit(model, &params, sub.view()).unwrap());
                    Part {
                        tree,
                        rows: rows.clone(),
                        stats,
                    }
                })
                .collect();
            let top = vec![vec![0, 2], vec![3, 1]];
            let joined = stitch(model, &mixing, n, &parts, &top).unwrap();
            let leaves = model.leaf_stats_all(x.view()).unwrap();
            let direct = evaluate(model, &mixing, &joined.tree.topology(), &leaves).unwrap();
            let (a, b) = (joined.tree.log_evidence(), direct.log_evidence());
            assert!((a - b).abs() < 1e-9 * b.abs(), "{mixing:?}: {a} vs {b}");
            for (u, v) in joined.tree.values().iter().zip(direct.values()) {
                assert!((u.log_p - v.log_p).abs() < 1e-9 * v.log_p.abs().max(1.0));
            }
            // The root's statistics are those of all rows.
            let all = leaves[1..]
                .iter()
                .fold(leaves[0].clone(), |a, b| model.merge(&a, b));
            let root = model.log_marginal(&joined.top_stats[1]).unwrap();
            let want = model.log_marginal(&all).unwrap();
            assert!((root - want).abs() < 1e-9 * want.abs());
        }
    }

    #[test]
    fn stitched_evidence_is_the_evidence_of_the_joined_tree() {
        let binary = data(41, 5, 2);
        check(&BetaBernoulli::new(&[0.7], &[1.3], 5).unwrap(), &binary);
        let counts = data(41, 4, 6);
        check(
            &DirichletMultinomial::new(&[0.5], 4, true).unwrap(),
            &counts,
        );
        let real = data(41, 3, 50).mapv(|v| v / 7.0);
        check(
            &NormalGamma::new(&[3.0], 1.0, 2.0, &[4.0], 3).unwrap(),
            &real,
        );
        check(
            &NormalInverseWishart::from_data(real.view(), None, None).unwrap(),
            &real,
        );
    }

    #[test]
    fn stitch_rejects_parts_that_do_not_cover_the_rows() {
        let x = data(6, 3, 2);
        let model = BetaBernoulli::new(&[1.0], &[1.0], 3).unwrap();
        let leaves = model.leaf_stats_all(x.view()).unwrap();
        let single = |r: usize| Part {
            tree: None,
            rows: vec![r],
            stats: leaves[r].clone(),
        };
        let mixing = Mixing::Brt { gamma: 0.5 };
        let twice = [single(0), single(0)];
        assert!(stitch(&model, &mixing, 2, &twice, &[vec![0, 1]]).is_err());
        let missing = [single(0), single(1)];
        assert!(stitch(&model, &mixing, 3, &missing, &[vec![0, 1]]).is_err());
        let forward = [single(0), single(1), single(2)];
        assert!(stitch(&model, &mixing, 3, &forward, &[vec![0, 4], vec![1, 2]]).is_err());
        assert!(model.decode_stats(&[1.0, 1.0, 0.5, 0.0, 1.0]).is_err());
        assert!(model.decode_stats(&[1.0, 1.0, 0.0]).is_err());
    }
}
