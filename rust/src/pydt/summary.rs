//! One tree that summarises the samples of a chain: average linkage on the mean divergence
//! times.
//!
//! Each sample gives every pair of leaves the time `t` of the branch point where their
//! paths part. One minus it, averaged over the samples, is a distance between the leaves
//! (a pair that parts early is far apart), and average linkage (UPGMA, the `kodama` crate)
//! merges on it. Each merge becomes a branch point at one minus its average distance:
//! average linkage never merges below a merge it contains, so these times fall from the
//! leaves (`t = 1`) to the root, and merges at the same time (within [`SAME_TIME`]) are one
//! branch point with more than two branches, as in the samples themselves.

use crate::error::{Result, RoseTreeError};
use crate::tree::{Topology, Tree};

/// Merges of average linkage whose times differ by at most this much are one branch point.
pub const SAME_TIME: f64 = 1e-12;

/// The most rows for which a chain is summarised by [`mean_divergence_tree`]: its mean
/// divergence times take `n (n − 1) / 2` numbers (64 MB at this size). Above it, a fit
/// reports its best sample.
pub const MAX_ROWS: usize = 4000;

/// The tree of the mean divergence times of `samples`, which are trees over the same leaves
/// with heights: the leaves at 1 and every branch point at its divergence time.
///
/// `O(n²)` memory and `O(s · n²)` time for `s` samples of `n` leaves.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] on `samples` for no sample, samples over different
/// numbers of leaves, or a sample without heights or with an infinite one.
pub fn mean_divergence_tree(samples: &[&Tree]) -> Result<Tree> {
    let bad = |why: String| Err(RoseTreeError::param("samples", why));
    let Some(first) = samples.first() else {
        return bad("no sample to summarise".into());
    };
    let n = first.n_leaves();
    if let Some(k) = samples.iter().position(|s| s.n_leaves() != n) {
        return bad(format!(
            "sample {k} has {} leaves, sample 0 has {n}",
            samples[k].n_leaves()
        ));
    }
    if n == 1 {
        return Tree::new(&Topology::new(1, Vec::new())?, Some(vec![1.0]));
    }
    let pairs = n * (n - 1) / 2;
    let mut distance = vec![0.0; pairs];
    for (k, sample) in samples.iter().enumerate() {
        // Each branch point's distance from the leaves, `1 − t`.
        let Ok(gaps) = sample.distances() else {
            return bad(format!("sample {k} has no divergence times"));
        };
        if let Some(v) = gaps.iter().position(|g| !g.is_finite()) {
            return bad(format!("sample {k} has node {v} at an infinite time"));
        }
        add_parting_distances(sample, &gaps, n, &mut distance);
    }
    let count = samples.len() as f64;
    for d in &mut distance {
        *d /= count;
    }
    let dendrogram = kodama::linkage(&mut distance, n, kodama::Method::Average);
    let steps = dendrogram.steps();
    let times: Vec<f64> = steps.iter().map(|s| 1.0 - s.dissimilarity).collect();
    // Each merge's branches, a merge at its child's time taking over the child's branches.
    let mut branches: Vec<Option<Vec<usize>>> = vec![None; steps.len()];
    for (k, step) in steps.iter().enumerate() {
        let mut own = Vec::new();
        for c in [step.cluster1, step.cluster2] {
            if c >= n && times[c - n] - times[k] <= SAME_TIME {
                own.extend(branches[c - n].take().expect("a merge is joined once"));
            } else {
                own.push(c);
            }
        }
        branches[k] = Some(own);
    }
    // The merges left are the branch points, numbered in order after the leaves.
    let mut id = vec![usize::MAX; steps.len()];
    let mut internal = Vec::new();
    let mut heights = vec![1.0; n];
    for (k, own) in branches.into_iter().enumerate() {
        if let Some(own) = own {
            id[k] = n + internal.len();
            internal.push(
                own.iter()
                    .map(|&c| if c < n { c } else { id[c - n] })
                    .collect(),
            );
            heights.push(times[k]);
        }
    }
    Tree::new(&Topology::new(n, internal)?, Some(heights))
}

/// Adds `gaps[v]` to `distance` (condensed, row-major over `i < j`) for every pair of leaves
/// of `tree` that part at the branch point `v`.
fn add_parting_distances(tree: &Tree, gaps: &[f64], n: usize, distance: &mut [f64]) {
    let index = |i: usize, j: usize| {
        let (i, j) = if i < j { (i, j) } else { (j, i) };
        n * i - i * (i + 1) / 2 + (j - i - 1)
    };
    // Node ids are in topological order (children before parents): each node's leaves are
    // its children's, concatenated.
    let mut leaves: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
    for (v, &gap) in gaps.iter().enumerate().skip(n) {
        let children = &tree.node(v).children;
        for (a, &ca) in children.iter().enumerate() {
            for &cb in &children[a + 1..] {
                for &i in &leaves[ca] {
                    for &j in &leaves[cb] {
                        distance[index(i, j)] += gap;
                    }
                }
            }
        }
        let mut own = Vec::with_capacity(tree.node(v).n_leaves);
        for &c in children {
            own.append(&mut leaves[c]);
        }
        leaves.push(own);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(n: usize, internal: Vec<Vec<usize>>, heights: Vec<f64>) -> Tree {
        Tree::new(&Topology::new(n, internal).unwrap(), Some(heights)).unwrap()
    }

    /// Two samples that disagree on which of three leaves parts first: the mean distances,
    /// worked by hand, decide the summary.
    #[test]
    fn the_mean_divergence_times_decide_the_summary() {
        // ((0, 1) at 0.8, 2) at 0.2 and ((0, 2) at 0.6, 1) at 0.4.
        let a = tree(
            3,
            vec![vec![0, 1], vec![3, 2]],
            vec![1.0, 1.0, 1.0, 0.8, 0.2],
        );
        let b = tree(
            3,
            vec![vec![0, 2], vec![3, 1]],
            vec![1.0, 1.0, 1.0, 0.6, 0.4],
        );
        // Mean distances: d(0,1) = (0.2 + 0.6)/2 = 0.4, d(0,2) = (0.8 + 0.4)/2 = 0.6,
        // d(1,2) = (0.8 + 0.6)/2 = 0.7. UPGMA joins 0 and 1 at 0.4, then 2 at
        // (0.6 + 0.7)/2 = 0.65: times 0.6 and 0.35.
        let summary = mean_divergence_tree(&[&a, &b]).unwrap();
        assert_eq!(summary.node(3).children, vec![0, 1]);
        assert_eq!(summary.node(4).children, vec![2, 3]);
        let h = summary.heights().unwrap();
        assert!(
            (h[3] - 0.6).abs() < 1e-15 && (h[4] - 0.35).abs() < 1e-15,
            "{h:?}"
        );
    }

    /// A multi-way branch point of the samples stays one: its merges tie.
    #[test]
    fn merges_at_one_time_are_one_branch_point() {
        let star = tree(4, vec![vec![0, 1, 2, 3]], vec![1.0, 1.0, 1.0, 1.0, 0.3]);
        let summary = mean_divergence_tree(&[&star, &star]).unwrap();
        assert_eq!(summary.nodes().len(), 5);
        let mut children = summary.node(4).children.clone();
        children.sort_unstable();
        assert_eq!(children, vec![0, 1, 2, 3]);
        assert!((summary.heights().unwrap()[4] - 0.3).abs() < 1e-15);
    }

    #[test]
    fn samples_must_agree_and_have_times() {
        let two = tree(2, vec![vec![0, 1]], vec![1.0, 1.0, 0.5]);
        let three = tree(3, vec![vec![0, 1, 2]], vec![1.0, 1.0, 1.0, 0.5]);
        let bare = Tree::new(&Topology::new(2, vec![vec![0, 1]]).unwrap(), None).unwrap();
        let endless = tree(2, vec![vec![0, 1]], vec![1.0, 1.0, f64::NEG_INFINITY]);
        let cases = [
            vec![],
            vec![&two, &three],
            vec![&two, &bare],
            vec![&two, &endless],
        ];
        for samples in cases {
            let err = mean_divergence_tree(&samples).unwrap_err();
            assert!(
                matches!(err, RoseTreeError::InvalidParameter { .. }),
                "{err}"
            );
        }
    }
}
