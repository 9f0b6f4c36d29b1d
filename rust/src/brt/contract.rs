//! Edge contraction after greedy construction (step 5 of the BRT slides): repeatedly merge
//! an internal node into its parent while that raises `ln p(D | T)`.
//!
//! Contracting node `v` into its parent `u` leaves every leaf set unchanged, so no cluster
//! marginal likelihood is recomputed: only `u`'s child count and child products change, and
//! the new `ln p` is propagated up the path to the root.

use super::mixing::Mixing;
use super::mixing::Summary;
use super::score::{Score, log_add_exp_score};
use crate::brt::RoseTree;

/// Under `"dp"`, the relative improvement of the root's log evidence below which a
/// contraction is not taken, so that rounding noise cannot make the pass cycle.
const MIN_GAIN: f64 = 1e-12;

/// Contracts edges of `tree` greedily, in passes over the internal nodes in id order, until
/// no contraction improves the root's log evidence.
pub fn contract_edges(tree: &RoseTree, mixing: &Mixing) -> RoseTree {
    let n = tree.n_leaves();
    let nodes = tree.nodes();
    let root = tree.root();
    let mut children: Vec<Vec<usize>> = nodes.iter().map(|v| v.children.clone()).collect();
    let mut parent: Vec<Option<usize>> = nodes.iter().map(|v| v.parent).collect();
    let mut alive = vec![true; nodes.len()];
    let mut summary: Vec<Summary> = Vec::with_capacity(nodes.len());
    for (id, values) in tree.values().iter().enumerate() {
        let s = if id < n {
            Summary::leaf(values.log_f, mixing)
        } else {
            recompute(mixing, values.log_f, &children[id], &summary)
        };
        summary.push(s);
    }

    loop {
        let mut improved = false;
        for v in n..root {
            let Some(u) = parent[v].filter(|_| alive[v]) else {
                continue;
            };
            let (su, sv) = (summary[u], summary[v]);
            if !improves(mixing, &su, &sv, &summary, &parent, u, root) {
                continue;
            }
            // Apply: u adopts v's children, then u and its ancestors are recomputed exactly.
            let grandchildren = std::mem::take(&mut children[v]);
            for &c in &grandchildren {
                parent[c] = Some(u);
            }
            children[u].retain(|&c| c != v);
            children[u].extend(grandchildren);
            alive[v] = false;
            let mut w = Some(u);
            while let Some(x) = w {
                summary[x] = recompute(mixing, summary[x].log_f, &children[x], &summary);
                w = parent[x];
            }
            improved = true;
        }
        if !improved {
            break;
        }
    }

    let sparse = (0..nodes.len())
        .map(|id| alive[id].then(|| (std::mem::take(&mut children[id]), summary[id].values())))
        .collect();
    RoseTree::from_sparse_nodes(sparse)
}

/// Whether contracting `v` into its parent `u` raises the root's `ln p(D | T)`.
///
/// Under `"brt"` and `"gamma"` a node's `π` depends on its own child count only and a
/// parent's `p` grows with each child's, so the root gains exactly when `u` does:
/// `ln p(u′) − ln p(u) = logaddexp(A, B)` with `A = ln π_{u′} + ln f_u − ln p(u)` and
/// `B = [ln(1 − π_{u′}) − ln(1 − π_u) − ln(1 − π_v)] − excess_u − excess_v` (the excesses of
/// [`Summary::log_excess`]; the bracket is `0` for `"brt"` and `−ln(1 − γ)` for `"gamma"`),
/// decided by its sign in the exact ranking of [`super::score`]. Under `"dp"` the change of
/// `d_u` reaches every ancestor's `π`, so the new root evidence is computed along the path
/// and must exceed the old by a relative `MIN_GAIN`.
fn improves(
    mixing: &Mixing,
    su: &Summary,
    sv: &Summary,
    summary: &[Summary],
    parent: &[Option<usize>],
    u: usize,
    root: usize,
) -> bool {
    let n_children = su.n_children - 1 + sv.n_children;
    let sum_log_d = su.sum_log_d_children - sv.log_d + sv.sum_log_d_children;
    if !mixing.depends_on_subtree() {
        let prior = mixing.node_prior(n_children, su.n_leaves, sum_log_d);
        let a = prior.log_pi + su.log_f - su.log_p;
        let (r, _) = mixing.split_ratio(n_children, su.n_leaves, sum_log_d, 0.0, &[su, sv]);
        let gain = log_add_exp_score(a, r, &[su.log_excess, sv.log_excess]);
        return gain.total_cmp(&Score::from_f64(0.0)).is_gt();
    }
    let mut new = Summary::internal(
        mixing,
        su.n_leaves,
        n_children,
        su.log_f,
        su.sum_log_p_children - sv.log_p + sv.sum_log_p_children,
        sum_log_d,
    );
    let (mut old, mut w) = (*su, u);
    while let Some(pw) = parent[w] {
        let s = summary[pw];
        let up = Summary::internal(
            mixing,
            s.n_leaves,
            s.n_children,
            s.log_f,
            s.sum_log_p_children - old.log_p + new.log_p,
            s.sum_log_d_children - old.log_d + new.log_d,
        );
        (old, new, w) = (s, up, pw);
    }
    let before = summary[root].log_p;
    new.log_p > before + MIN_GAIN * before.abs().max(1.0)
}

fn recompute(mixing: &Mixing, log_f: f64, children: &[usize], summary: &[Summary]) -> Summary {
    Summary::internal(
        mixing,
        children.iter().map(|&c| summary[c].n_leaves).sum(),
        children.len(),
        log_f,
        children.iter().map(|&c| summary[c].log_p).sum(),
        children.iter().map(|&c| summary[c].log_d).sum(),
    )
}
