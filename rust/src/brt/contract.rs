//! Edge contraction after greedy construction (step 5 of the BRT slides): repeatedly merge
//! an internal node into its parent while that raises `ln p(D | T)`.
//!
//! Contracting node `v` into its parent `u` leaves every leaf set unchanged, so no cluster
//! marginal likelihood is recomputed: only `u`'s child count and child products change, and
//! the new `ln p` is propagated up the path to the root.

use super::merge::Summary;
use super::mixing::Mixing;
use crate::tree::RoseTree;

/// Relative improvement of the root's log evidence below which a contraction is not taken,
/// so that rounding noise cannot make the pass cycle.
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
    for (id, node) in nodes.iter().enumerate() {
        let s = if id < n {
            Summary::leaf(node.log_f, mixing)
        } else {
            recompute(mixing, node.log_f, &children[id], &summary)
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
            let mut new = Summary::internal(
                mixing,
                su.n_leaves,
                su.n_children - 1 + sv.n_children,
                su.log_f,
                su.sum_log_p_children - sv.log_p + sv.sum_log_p_children,
                su.sum_log_d_children - sv.log_d + sv.sum_log_d_children,
            );
            let (mut old, mut w) = (su, u);
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
            if new.log_p <= before + MIN_GAIN * before.abs().max(1.0) {
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
        .map(|id| alive[id].then(|| summary[id].to_node(std::mem::take(&mut children[id]))))
        .collect();
    RoseTree::from_sparse_nodes(sparse)
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
