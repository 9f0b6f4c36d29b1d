//! The most probable coarsening of a tree: the exact counterpart of edge contraction.
//!
//! A *coarsening* of a tree dissolves some of its internal nodes into their parents: every
//! cluster of the result is a cluster of the tree, and the root stays. Under `"brt"` and
//! `"gamma"` mixing a node's `π` depends on its own number of children only, and its
//! `ln p = ln(π f + (1 − π) Π_children p)` grows with each child's `ln p`. So the best
//! coarsening below a node, given how many children it keeps, takes the best coarsening of
//! each subtree it keeps as a child, and a dynamic programme over the tree finds the most
//! probable coarsening exactly:
//!
//! - `C_v[1] = P(v)`, the best `ln p` of `v`'s subtree with `v` kept;
//! - `C_v[c]`, `c ≥ 2`: the best `Σ P(u)` over `c` disjoint nodes `u` of `v`'s subtree that
//!   cover its leaves with `v` dissolved, a max-plus convolution of the children's `C`;
//! - `P(v) = max_{c ≥ 2} ln(π_c f_v + (1 − π_c) e^{C_v[c]})` for an internal `v`, `ln f` at a
//!   leaf.
//!
//! Greedy edge contraction ([`super::contract_edges`]) is a local search over the same
//! trees and never ends higher. Under `"dp"` mixing a node's `π` depends on the whole
//! subtree below it (through `d_T`), the argument fails, and this is refused.

use super::RoseTree;
use super::evaluate::from_log_f;
use super::mixing::Mixing;
use crate::error::{Result, RoseTreeError};
use crate::math::log_add_exp;
use crate::tree::Topology;

/// The most table entries (one `u32` each) [`coarsen`] keeps for its backtracking: 2²⁸,
/// 1 GiB. A tree needs `Σ_v (k_v − 1) n_v` of them (`k_v` children and `n_v` leaves at each
/// internal node `v`): about `n log₂ n` for a balanced binary tree, `n² / 2` for a chain.
pub const MAX_COARSEN_ENTRIES: u64 = 1 << 28;

/// The most sums [`coarsen`] forms: 2³⁰, about a second. A tree needs one for every pair of
/// leaves at most (each pair of parts of two children of a node), `n² / 2` for any tree of
/// `n` leaves: trees of up to about 46,000 leaves always pass.
pub const MAX_COARSEN_SUMS: u64 = 1 << 30;

/// The most probable coarsening of `tree` under `mixing` (see the module docs): the rose
/// tree of highest `ln p(D | T)` among those whose clusters are all clusters of `tree`, with
/// every node's quantities computed from the `ln f` that `tree` holds (no data are needed).
/// Where keeping more or fewer children gives the same `ln p` to the last bit, the node
/// keeps the fewest (the least dissolved). The comparisons are of sums of `ln p` in double
/// precision, so "most probable" holds up to their rounding.
///
/// Memory is `Σ_v (k_v − 1) n_v` over the internal nodes (`k_v` children, `n_v` leaves):
/// `O(n log n)` for a balanced binary tree, `O(n²)` for a chain. Time is at most one sum
/// for each pair of leaves, `O(n²)`.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::brt::{self, Mixing};
/// use rosetree::models::{BetaBernoulli, ClusterModel};
/// use rosetree::tree::Topology;
///
/// let x = array![[1., 1., 0.], [1., 1., 0.], [1., 1., 0.], [0., 0., 1.]];
/// let model = BetaBernoulli::new(&[1.0], &[1.0], 3)?;
/// let mixing = Mixing::Brt { gamma: 0.5 };
/// // ((0, 1), 2), 3: a binary tree.
/// let chain = Topology::new(4, vec![vec![0, 1], vec![4, 2], vec![5, 3]])?;
/// let tree = brt::evaluate(&model, &mixing, &chain, &model.leaf_stats_all(x.view())?)?;
/// let best = brt::coarsen(&tree, &mixing)?;
/// assert!(best.log_evidence() >= tree.log_evidence());
/// // The three equal rows become one node with three children.
/// assert_eq!(best.node(4).children, vec![0, 1, 2]);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] on `mixing` for [`Mixing::Dp`] and on `tree` when it
/// would need more than [`MAX_COARSEN_ENTRIES`] table entries or [`MAX_COARSEN_SUMS`] sums;
/// [`RoseTreeError::Numerical`]
/// where a node's `ln p` is NaN.
pub fn coarsen(tree: &RoseTree, mixing: &Mixing) -> Result<RoseTree> {
    if mixing.depends_on_subtree() {
        return Err(RoseTreeError::param(
            "mixing",
            "the most probable coarsening needs \"brt\" or \"gamma\" mixing: under \"dp\" a \
             node's prior depends on the whole subtree below it",
        ));
    }
    let n = tree.n_leaves();
    let nodes = tree.nodes();
    let (mut entries, mut sums) = (0_u64, 0_u64);
    for v in &nodes[n..] {
        let mut below = nodes[v.children[0]].n_leaves as u64;
        for &c in &v.children[1..] {
            let size = nodes[c].n_leaves as u64;
            sums += below * size;
            below += size;
            entries += below;
        }
    }
    if entries > MAX_COARSEN_ENTRIES || sums > MAX_COARSEN_SUMS {
        return Err(RoseTreeError::param(
            "tree",
            format!(
                "its most probable coarsening needs {entries} table entries and {sums} sums, \
                 more than {MAX_COARSEN_ENTRIES} or {MAX_COARSEN_SUMS} (too many leaves, or a \
                 tree too deep for its size)"
            ),
        ));
    }
    let log_f: Vec<f64> = tree.values().iter().map(|v| v.log_f).collect();
    if nodes.len() == n {
        // A single row: nothing to dissolve.
        return from_log_f(&tree.topology(), &log_f, mixing);
    }
    let plan = Plan::new(tree, &log_f, mixing);
    let (topology, kept) = plan.coarsened(tree)?;
    let kept_log_f: Vec<f64> = kept.iter().map(|&v| log_f[v]).collect();
    from_log_f(&topology, &kept_log_f, mixing)
}

/// The dynamic programme's choices: at each internal node, how many children it keeps
/// (`parts`) and, for the max-plus convolution of its children's tables, how many of the
/// parts each child after the first supplies (`splits[v][j − 1][c − 1]` for child `j` and
/// `c` parts of the children up to `j`).
struct Plan {
    parts: Vec<usize>,
    splits: Vec<Vec<Vec<u32>>>,
}

impl Plan {
    fn new(tree: &RoseTree, log_f: &[f64], mixing: &Mixing) -> Self {
        let n = tree.n_leaves();
        let nodes = tree.nodes();
        // C tables of the nodes whose parent is still to come, taken by the parent: entry
        // c − 1 is `None` where no c disjoint nodes cover the subtree (with 3 children, a
        // dissolved node cannot make 2 parts).
        let mut table: Vec<Option<Table>> = Vec::with_capacity(nodes.len());
        let mut parts = vec![1; nodes.len()];
        let mut splits: Vec<Vec<Vec<u32>>> = vec![Vec::new(); nodes.len()];
        for (v, node) in nodes.iter().enumerate() {
            if v < n {
                table.push(Some(vec![Some(log_f[v])]));
                continue;
            }
            let mut children = node.children.iter().map(|&u| {
                table[u]
                    .take()
                    .expect("children come before their parent, each once")
            });
            let mut acc = children.next().expect("an internal node has children");
            let mut node_splits = Vec::with_capacity(node.children.len() - 1);
            for next in children {
                let (merged, split) = max_plus(&acc, &next);
                acc = merged;
                node_splits.push(split);
            }
            // acc[c − 1]: the best Σ P over c parts with v dissolved (c ≥ k_v; c = k_v, one
            // part a child, is always possible).
            let k = node.children.len();
            let log_p = |c: usize| {
                acc[c - 1].map(|sum| {
                    let prior = mixing.node_prior(c, node.n_leaves, 0.0);
                    log_add_exp(prior.log_pi + log_f[v], prior.log_1m_pi + sum)
                })
            };
            let (mut best_c, mut best) = (k, log_p(k).expect("one part a child"));
            for c in k + 1..=acc.len() {
                if let Some(p) = log_p(c)
                    && p > best
                {
                    (best_c, best) = (c, p);
                }
            }
            acc[0] = Some(best);
            parts[v] = best_c;
            splits[v] = node_splits;
            table.push(Some(acc));
        }
        Self { parts, splits }
    }

    /// The coarsened tree's topology, and the ids in `tree` of its nodes (leaves first, then
    /// the kept internal nodes in increasing id order).
    fn coarsened(&self, tree: &RoseTree) -> Result<(Topology, Vec<usize>)> {
        let n = tree.n_leaves();
        let nodes = tree.nodes();
        let root = tree.root();
        let mut kept_children: Vec<Option<Vec<usize>>> = vec![None; nodes.len()];
        let mut to_expand = vec![root];
        while let Some(v) = to_expand.pop() {
            let mut children = Vec::with_capacity(self.parts[v]);
            // Parts of v's subtree in leaf order: (node, how many parts it supplies).
            let mut stack = self.split(tree, v, self.parts[v]);
            stack.reverse();
            while let Some((u, c)) = stack.pop() {
                if c == 1 {
                    children.push(u);
                    if u >= n {
                        to_expand.push(u);
                    }
                } else {
                    let mut inner = self.split(tree, u, c);
                    inner.reverse();
                    stack.extend(inner);
                }
            }
            kept_children[v] = Some(children);
        }
        let mut new_id = vec![usize::MAX; nodes.len()];
        let mut kept = Vec::new();
        for (v, c) in kept_children.iter().enumerate() {
            if v < n || c.is_some() {
                new_id[v] = kept.len();
                kept.push(v);
            }
        }
        let internal = kept[n..]
            .iter()
            .map(|&v| {
                let children = kept_children[v].as_ref().expect("a kept internal node");
                children.iter().map(|&c| new_id[c]).collect()
            })
            .collect();
        Ok((Topology::new(n, internal)?, kept))
    }

    /// How the `c` parts of internal node `v`'s subtree, `v` dissolved, fall to its
    /// children: `(child, parts)` in child order.
    fn split(&self, tree: &RoseTree, v: usize, c: usize) -> Vec<(usize, usize)> {
        let children = &tree.node(v).children;
        let mut out = vec![(0, 0); children.len()];
        let mut remaining = c;
        for j in (1..children.len()).rev() {
            let from_j = self.splits[v][j - 1][remaining - 1] as usize;
            out[j] = (children[j], from_j);
            remaining -= from_j;
        }
        out[0] = (children[0], remaining);
        out
    }
}

/// A table of a subtree: entry `c − 1`, the best `Σ ln p` over `c` parts, `None` where
/// there are no such parts.
type Table = Vec<Option<f64>>;

/// The max-plus convolution of two tables: `out[c − 1] = max_{i + j = c} a[i − 1] +
/// b[j − 1]` over the entries that exist, with the number of parts taken from `b` at each
/// `c` (on a tie, the most). Where every such sum is `−∞` (clusters the model finds
/// impossible), the first is kept, so that every count that exists has a split.
fn max_plus(a: &[Option<f64>], b: &[Option<f64>]) -> (Table, Vec<u32>) {
    let len = a.len() + b.len();
    let mut out: Table = vec![None; len];
    let mut from_b = vec![0_u32; len];
    for (i, x) in a.iter().enumerate() {
        let Some(x) = *x else { continue };
        for (j, y) in b.iter().enumerate() {
            let Some(y) = *y else { continue };
            // i + 1 parts from a, j + 1 from b: i + j + 2 in all, at index i + j + 1.
            let s = x + y;
            let at = i + j + 1;
            if out[at].is_none_or(|best| s > best) {
                out[at] = Some(s);
                from_b[at] = (j + 1) as u32;
            }
        }
    }
    (out, from_b)
}

#[cfg(test)]
mod tests {
    use ndarray::Array2;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    use super::*;
    use crate::brt::{contract_edges, evaluate};
    use crate::models::{BetaBernoulli, ClusterModel, NormalGamma};
    use crate::test_util::random_topology;

    /// The topology left when the internal nodes flagged in `dissolve` give their children
    /// to their parents (the root is never dissolved).
    fn dissolved(topology: &Topology, dissolve: &[bool]) -> Topology {
        let n = topology.n_leaves();
        let internal = topology.internal();
        let mut new_id: Vec<usize> = (0..n).collect();
        let mut lists: Vec<Vec<usize>> = Vec::new();
        // Each node's children once its dissolved children are expanded, in old ids.
        let mut expanded: Vec<Vec<usize>> = Vec::with_capacity(internal.len());
        for (k, children) in internal.iter().enumerate() {
            let mut list = Vec::new();
            for &c in children {
                if c >= n && dissolve[c - n] {
                    list.extend(expanded[c - n].iter().copied());
                } else {
                    list.push(c);
                }
            }
            expanded.push(list.clone());
            if dissolve[k] {
                new_id.push(usize::MAX);
            } else {
                new_id.push(n + lists.len());
                lists.push(list);
            }
        }
        let lists = lists
            .into_iter()
            .map(|l| l.into_iter().map(|c| new_id[c]).collect())
            .collect();
        Topology::new(n, lists).unwrap()
    }

    /// Rows of a few noisy prototypes, so that some coarsenings are much better than others.
    fn binary_rows(n: usize, d: usize, rng: &mut Xoshiro256PlusPlus) -> Array2<f64> {
        let prototypes: Vec<Vec<bool>> = (0..3)
            .map(|_| (0..d).map(|_| rng.random_bool(0.5)).collect())
            .collect();
        Array2::from_shape_fn((n, d), |(i, j)| {
            let bit = prototypes[i % 3][j] ^ rng.random_bool(0.15);
            f64::from(u8::from(bit))
        })
    }

    /// The most probable of all coarsenings, found by evaluating each one from the data.
    fn brute_force<M: ClusterModel>(
        model: &M,
        mixing: &Mixing,
        topology: &Topology,
        leaves: &[M::Stats],
    ) -> f64 {
        let m = topology.internal().len();
        let mut best = f64::NEG_INFINITY;
        // Every subset of the non-root internal nodes.
        for mask in 0_u32..1 << (m - 1) {
            let dissolve: Vec<bool> = (0..m).map(|k| k < m - 1 && mask >> k & 1 == 1).collect();
            let t = dissolved(topology, &dissolve);
            best = best.max(evaluate(model, mixing, &t, leaves).unwrap().log_evidence());
        }
        best
    }

    #[test]
    fn the_coarsening_is_the_most_probable_of_all() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        for trial in 0..60 {
            let n = rng.random_range(2..=9);
            let x = binary_rows(n, 6, &mut rng);
            let topology = if trial % 2 == 0 {
                random_topology(n, 4, &mut rng)
            } else {
                // A binary chain, the deepest shape.
                let internal = (0..n - 1)
                    .map(|k| vec![if k == 0 { 0 } else { n + k - 1 }, k + 1])
                    .collect();
                Topology::new(n, internal).unwrap()
            };
            let model = BetaBernoulli::new(&[0.5], &[0.5], 6).unwrap();
            let leaves = model.leaf_stats_all(x.view()).unwrap();
            for mixing in [Mixing::Brt { gamma: 0.5 }, Mixing::Gamma { gamma: 0.3 }] {
                let tree = evaluate(&model, &mixing, &topology, &leaves).unwrap();
                let best = coarsen(&tree, &mixing).unwrap();
                let expected = brute_force(&model, &mixing, &topology, &leaves);
                assert!(
                    (best.log_evidence() - expected).abs() <= 1e-9 * expected.abs(),
                    "trial {trial}: {} against {expected}",
                    best.log_evidence()
                );
                // Its numbers are those of its own tree, evaluated from the data.
                let again = evaluate(&model, &mixing, &best.topology(), &leaves).unwrap();
                assert!((again.log_evidence() - best.log_evidence()).abs() <= 1e-9);
                // Every cluster of the coarsening is a cluster of the tree.
                let clusters = |t: &RoseTree| -> std::collections::HashSet<Vec<usize>> {
                    (t.n_leaves()..t.nodes().len())
                        .map(|v| {
                            let mut l = t.leaves_of(v);
                            l.sort_unstable();
                            l
                        })
                        .collect()
                };
                assert!(clusters(&best).is_subset(&clusters(&tree)), "trial {trial}");
            }
        }
    }

    #[test]
    fn greedy_contraction_never_ends_higher_and_a_coarsening_stays_as_it_is() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        for _ in 0..40 {
            let n = rng.random_range(10..60);
            let x = Array2::from_shape_fn((n, 3), |(i, _)| (i % 4) as f64 + rng.random::<f64>());
            let model = NormalGamma::new(&[1.5], 1.0, 2.0, &[0.5], 3).unwrap();
            let leaves = model.leaf_stats_all(x.view()).unwrap();
            let topology = random_topology(n, 4, &mut rng);
            for mixing in [Mixing::Brt { gamma: 0.5 }, Mixing::Gamma { gamma: 0.5 }] {
                let tree = evaluate(&model, &mixing, &topology, &leaves).unwrap();
                let best = coarsen(&tree, &mixing).unwrap();
                let greedy = contract_edges(&tree, &mixing);
                assert!(best.log_evidence() >= greedy.log_evidence() - 1e-9);
                assert!(best.log_evidence() >= tree.log_evidence() - 1e-9);
                let twice = coarsen(&best, &mixing).unwrap();
                assert_eq!(twice.topology(), best.topology());
            }
        }
    }

    /// The most probable coarsening by trying every one, from `ln f` alone.
    fn brute_force_from_log_f(tree: &RoseTree, mixing: &Mixing) -> f64 {
        let topology = tree.topology();
        let n = tree.n_leaves();
        let m = topology.internal().len();
        let mut best = f64::NEG_INFINITY;
        for mask in 0_u32..1 << (m - 1) {
            let dissolve: Vec<bool> = (0..m).map(|k| k < m - 1 && mask >> k & 1 == 1).collect();
            let t = dissolved(&topology, &dissolve);
            let kept: Vec<usize> = (0..n)
                .chain((0..m).filter(|&k| !dissolve[k]).map(|k| n + k))
                .collect();
            let log_f: Vec<f64> = kept.iter().map(|&v| tree.values()[v].log_f).collect();
            best = best.max(from_log_f(&t, &log_f, mixing).unwrap().log_evidence());
        }
        best
    }

    #[test]
    fn impossible_clusters_and_single_rows_are_ordinary_input() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let mixing = Mixing::Brt { gamma: 0.5 };
        for trial in 0..40 {
            let n = rng.random_range(3..=8);
            let topology = random_topology(n, 4, &mut rng);
            let total = n + topology.internal().len();
            // Internal clusters impossible (ln f = −∞) at random, all of them in every
            // fourth trial; in every third, a row impossible by itself, so that every
            // tree is impossible.
            let log_f: Vec<f64> = (0..total)
                .map(|v| {
                    if v >= n && (trial % 4 == 0 || rng.random_bool(0.5))
                        || v == 0 && trial % 3 == 0
                    {
                        f64::NEG_INFINITY
                    } else {
                        -rng.random_range(1.0..10.0)
                    }
                })
                .collect();
            let tree = from_log_f(&topology, &log_f, &mixing).unwrap();
            let best = coarsen(&tree, &mixing).unwrap();
            let expected = brute_force_from_log_f(&tree, &mixing);
            if expected == f64::NEG_INFINITY {
                assert_eq!(best.log_evidence(), expected, "trial {trial}");
            } else {
                assert!(
                    (best.log_evidence() - expected).abs() <= 1e-9 * expected.abs(),
                    "trial {trial}: {} against {expected}",
                    best.log_evidence()
                );
            }
        }
        let one = from_log_f(&Topology::new(1, vec![]).unwrap(), &[-2.0], &mixing).unwrap();
        assert_eq!(coarsen(&one, &mixing).unwrap().log_evidence(), -2.0);
    }

    #[test]
    fn dp_mixing_and_trees_too_deep_are_refused() {
        let x = Array2::from_shape_fn((4, 2), |(i, j)| f64::from(u8::from(i == j)));
        let model = BetaBernoulli::new(&[1.0], &[1.0], 2).unwrap();
        let leaves = model.leaf_stats_all(x.view()).unwrap();
        let topology = Topology::new(4, vec![vec![0, 1], vec![2, 3], vec![4, 5]]).unwrap();
        let dp = Mixing::Dp { alpha: 1.0 };
        let tree = evaluate(&model, &dp, &topology, &leaves).unwrap();
        let err = coarsen(&tree, &dp).unwrap_err();
        assert!(
            matches!(err, RoseTreeError::InvalidParameter { ref name, .. } if name == "mixing")
        );

        let refused = |topology: &Topology| {
            let zeros = vec![0.0; 2 * topology.n_leaves() - 1];
            let tree = RoseTree::from_parts(topology, &zeros, &zeros, &zeros, &zeros).unwrap();
            let err = coarsen(&tree, &Mixing::Brt { gamma: 0.5 }).unwrap_err();
            matches!(err, RoseTreeError::InvalidParameter { ref name, .. } if name == "tree")
        };
        // A chain of 2¹⁵ leaves needs about 2²⁹ entries.
        let n = 1 << 15;
        let internal = (0..n - 1)
            .map(|k| vec![if k == 0 { 0 } else { n + k - 1 }, k + 1])
            .collect();
        assert!(refused(&Topology::new(n, internal).unwrap()));
        // A balanced binary tree of 2¹⁶ leaves needs few entries but about 2³¹ sums.
        let n = 1 << 16;
        let mut internal = Vec::with_capacity(n - 1);
        let mut level: Vec<usize> = (0..n).collect();
        while level.len() > 1 {
            level = level
                .chunks(2)
                .map(|pair| {
                    internal.push(pair.to_vec());
                    n + internal.len() - 1
                })
                .collect();
        }
        assert!(refused(&Topology::new(n, internal).unwrap()));
    }
}
