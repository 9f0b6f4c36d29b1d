//! Arena operations against independent references: caches recomputed only at dirty nodes
//! against sums taken by walking up from every node, dirty sets against the nodes whose
//! subtree signature changed, and random sequences of moves; a chain of 100,000 leaves, which
//! any recursive walk would overflow the stack on.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::*;

/// A cache that depends on the leaves and the times below a node.
#[derive(Debug, Clone, Default, PartialEq)]
struct Sums {
    /// Sum (wrapping) of a hash of every leaf below.
    leaf_hash: u64,
    /// Total branch length below: Σ (t_child − t_parent) over the edges of the subtree.
    length: f64,
}

fn leaf_hash(v: NodeId) -> u64 {
    (u64::from(v.0) + 1)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left(17)
}

/// The cache of `v` from its children's caches: what a message-passing caller does.
fn from_children(a: &Arena<Sums>, v: NodeId) -> Sums {
    let node = a.node(v).unwrap();
    if node.is_leaf() {
        return Sums {
            leaf_hash: leaf_hash(v),
            length: 0.0,
        };
    }
    let mut out = Sums::default();
    for &c in node.children() {
        let child = a.cache(c).unwrap();
        out.leaf_hash = out.leaf_hash.wrapping_add(child.leaf_hash);
        out.length += child.length + (a.time(c).unwrap() - node.time());
    }
    out
}

/// The live node ids, by trying every slot.
fn live_ids<C>(a: &Arena<C>) -> Vec<NodeId> {
    (0..a.n_slots() as u32)
        .map(NodeId)
        .filter(|&v| a.node(v).is_ok())
        .collect()
}

/// Every node's [`Sums`] from scratch, without the children's caches: each leaf's hash and
/// each edge's length is added to every node on the walk up from it. Times are multiples of
/// 2⁻⁴⁰ in (−4, 1], so every sum is exact whatever the order of addition.
fn sums_by_walking_up(a: &Arena<Sums>) -> HashMap<NodeId, Sums> {
    let mut out: HashMap<NodeId, Sums> = live_ids(a)
        .into_iter()
        .map(|v| (v, Sums::default()))
        .collect();
    for v in live_ids(a) {
        if a.node(v).unwrap().is_leaf() {
            let mut u = Some(v);
            while let Some(w) = u {
                let s = out.get_mut(&w).unwrap();
                s.leaf_hash = s.leaf_hash.wrapping_add(leaf_hash(v));
                u = a.parent(w).unwrap();
            }
        }
        if let Some(p) = a.parent(v).unwrap() {
            let edge = a.time(v).unwrap() - a.time(p).unwrap();
            let mut u = Some(p);
            while let Some(w) = u {
                out.get_mut(&w).unwrap().length += edge;
                u = a.parent(w).unwrap();
            }
        }
    }
    out
}

/// A hash of the subtree under `v`: its ids, times and children's order (recursive; the
/// random trees are small).
fn signature<C>(a: &Arena<C>, v: NodeId) -> u64 {
    let mut h = DefaultHasher::new();
    (v, a.time(v).unwrap().to_bits()).hash(&mut h);
    for &c in a.children(v).unwrap() {
        signature(a, c).hash(&mut h);
    }
    h.finish()
}

fn signatures<C>(a: &Arena<C>) -> HashMap<NodeId, u64> {
    live_ids(a)
        .into_iter()
        .map(|v| (v, signature(a, v)))
        .collect()
}

/// One node in a [`snapshot`]: id, parent, children, time bits, leaf count.
type Row = (NodeId, Option<NodeId>, Vec<NodeId>, u64, usize);

/// The arena's shape and ids (all but the number of free slots), for exact comparisons.
fn snapshot<C>(a: &Arena<C>) -> Vec<Row> {
    let mut out: Vec<_> = live_ids(a)
        .into_iter()
        .map(|v| {
            let n = a.node(v).unwrap();
            (
                v,
                n.parent(),
                n.children().to_vec(),
                n.time().to_bits(),
                n.n_leaves(),
            )
        })
        .collect();
    out.push((a.root(), None, a.detached_roots().to_vec(), 0, a.n_nodes()));
    out
}

/// The clades of a tree as (sorted leaf set, time bits), to compare trees up to node ids.
fn clades<C>(a: &Arena<C>) -> BTreeSet<(Vec<NodeId>, u64)> {
    a.pre_order(a.root())
        .unwrap()
        .map(|v| (a.leaves_under(v).unwrap(), a.time(v).unwrap().to_bits()))
        .collect()
}

/// A multiple of 2⁻⁴⁰ near `x`.
fn grid(x: f64) -> f64 {
    (x * 2f64.powi(40)).round() / 2f64.powi(40)
}

/// A time strictly between `lo` and `hi` on the grid, if there is one nearby.
fn time_between(rng: &mut Xoshiro256PlusPlus, lo: f64, hi: f64) -> Option<f64> {
    let t = grid(lo + (hi - lo) * rng.random_range(0.05..0.95));
    (lo < t && t < hi).then_some(t)
}

/// A random tree on `n` leaves (multi-way nodes of up to 4 children) with grid times, the
/// root in (0, 0.3) and leaves at 1, as arguments of [`Arena::from_children`].
fn random_tree(n: usize, rng: &mut Xoshiro256PlusPlus) -> (Vec<Vec<usize>>, Vec<f64>) {
    let mut items: Vec<usize> = (0..n).collect();
    let mut internal: Vec<Vec<usize>> = Vec::new();
    while items.len() > 1 {
        let k = if rng.random_bool(0.6) {
            2
        } else {
            rng.random_range(2..=items.len().min(4))
        };
        let mut kids = Vec::with_capacity(k);
        for _ in 0..k {
            kids.push(items.swap_remove(rng.random_range(0..items.len())));
        }
        items.push(n + internal.len());
        internal.push(kids);
    }
    let total = n + internal.len();
    let mut times = vec![1.0; total];
    times[total - 1] = grid(rng.random_range(0.0..0.3));
    // Parents have larger ids, so going down the ids visits every parent before its children.
    for id in (n..total).rev() {
        for &c in &internal[id - n] {
            if c >= n {
                times[c] = time_between(rng, times[id], 1.0).unwrap();
            }
        }
    }
    (internal, times)
}

fn random_arena(n: usize, seed: u64) -> (Arena<Sums>, Xoshiro256PlusPlus) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let (internal, times) = random_tree(n, &mut rng);
    let mut a = Arena::from_children(n, internal, &times, |_| Sums::default()).unwrap();
    a.refresh_dirty(from_children);
    (a, rng)
}

/// After one operation: the invariants hold, the leaves are all there once, the dirty nodes
/// are exactly those whose subtree changed (or that are new), and recomputing only them gives
/// the caches computed from scratch. Leaves the arena clean and `before` up to date.
fn check_step(a: &mut Arena<Sums>, before: &mut HashMap<NodeId, u64>, what: &str) {
    a.check_invariants()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut leaves: Vec<NodeId> = Vec::new();
    for &top in std::iter::once(&a.root()).chain(a.detached_roots()) {
        leaves.extend(a.leaves_under(top).unwrap());
    }
    leaves.sort_unstable();
    let all: Vec<NodeId> = (0..a.n_leaves() as u32).map(NodeId).collect();
    assert_eq!(leaves, all, "{what}: leaf set");

    let after = signatures(a);
    let changed: BTreeSet<NodeId> = after
        .iter()
        .filter(|(v, s)| before.get(v) != Some(s))
        .map(|(&v, _)| v)
        .collect();
    let dirty_order = a.dirty_post_order();
    let dirty: BTreeSet<NodeId> = dirty_order.iter().copied().collect();
    assert_eq!(
        dirty.len(),
        dirty_order.len(),
        "{what}: a node listed twice"
    );
    assert_eq!(dirty, changed, "{what}: dirty set");
    // Children before parents.
    let position: HashMap<NodeId, usize> = dirty_order
        .iter()
        .enumerate()
        .map(|(i, &v)| (v, i))
        .collect();
    for &v in &dirty_order {
        if let Some(p) = a.parent(v).unwrap() {
            assert!(
                position[&v] < position[&p],
                "{what}: {v} after its parent {p}"
            );
        }
    }
    for v in live_ids(a) {
        assert_eq!(a.node(v).unwrap().is_dirty(), dirty.contains(&v));
    }

    a.refresh_dirty(from_children);
    assert!(a.dirty_post_order().is_empty());
    let expected = sums_by_walking_up(a);
    for v in live_ids(a) {
        assert_eq!(a.cache(v).unwrap(), &expected[&v], "{what}: cache of {v}");
        assert_eq!(
            a.node(v).unwrap().n_leaves(),
            a.leaves_under(v).unwrap().len()
        );
    }
    *before = after;
}

/// A random node of the tree under the root.
fn random_node<C>(a: &Arena<C>, rng: &mut Xoshiro256PlusPlus) -> NodeId {
    let nodes: Vec<NodeId> = a.pre_order(a.root()).unwrap().collect();
    nodes[rng.random_range(0..nodes.len())]
}

/// A random position for the subtree `d` allowed by the prior's time order, if one is found.
fn random_position(
    a: &Arena<Sums>,
    d: &Detached,
    rng: &mut Xoshiro256PlusPlus,
) -> Option<Attachment> {
    let ts = a.time(d.root()).unwrap();
    if rng.random_bool(0.5) {
        let below = random_node(a, rng);
        let lo = match a.parent(below).unwrap() {
            Some(p) => a.time(p).unwrap(),
            // A new root, with all times kept in (−4, 1] so that sums stay exact.
            None => (a.time(below).unwrap() - 1.0).max(-4.0),
        };
        let hi = a.time(below).unwrap().min(ts);
        let time = time_between(rng, lo, hi)?;
        Some(Attachment::Branch { below, time })
    } else {
        let nodes: Vec<NodeId> = a
            .pre_order(a.root())
            .unwrap()
            .filter(|&v| !a.node(v).unwrap().is_leaf() && a.time(v).unwrap() < ts)
            .collect();
        (!nodes.is_empty()).then(|| Attachment::Node(nodes[rng.random_range(0..nodes.len())]))
    }
}

/// A random non-root node of the tree, if there is one.
fn random_subtree<C>(a: &Arena<C>, rng: &mut Xoshiro256PlusPlus) -> Option<NodeId> {
    let nodes: Vec<NodeId> = a.pre_order(a.root()).unwrap().skip(1).collect();
    (!nodes.is_empty()).then(|| nodes[rng.random_range(0..nodes.len())])
}

#[test]
fn random_moves_keep_leaves_invariants_and_dirty_sets_right() {
    let mut n_moves = [0_usize; 5];
    for seed in 0..40_u64 {
        let n = [2, 3, 5, 12, 40][seed as usize % 5];
        let (mut a, mut rng) = random_arena(n, seed);
        let mut before = signatures(&a);
        for _ in 0..150 {
            let Some(v) = random_subtree(&a, &mut rng) else {
                break;
            };
            match rng.random_range(0..5) {
                // Subtree prune and regraft.
                0 | 1 => {
                    let d = a.detach(v).unwrap();
                    check_step(&mut a, &mut before, "detach");
                    match random_position(&a, &d, &mut rng) {
                        Some(at) => {
                            let parent = a.attach(&d, at).unwrap();
                            assert_eq!(a.parent(v).unwrap(), Some(parent));
                            n_moves[0] += 1;
                        }
                        None => {
                            a.reattach(&d).unwrap();
                        }
                    }
                    check_step(&mut a, &mut before, "attach");
                }
                // A rejected move restores the tree exactly, ids included.
                2 => {
                    let start = snapshot(&a);
                    let d = a.detach(v).unwrap();
                    check_step(&mut a, &mut before, "detach");
                    if let Some(at) = random_position(&a, &d, &mut rng) {
                        a.attach(&d, at).unwrap();
                        check_step(&mut a, &mut before, "proposal");
                        let _undo = a.detach(v).unwrap();
                        check_step(&mut a, &mut before, "undo");
                        n_moves[1] += 1;
                    }
                    a.reattach(&d).unwrap();
                    assert_eq!(snapshot(&a), start);
                    check_step(&mut a, &mut before, "reject");
                }
                // Two subtrees out at once, back in reverse order.
                3 => {
                    let start = snapshot(&a);
                    let d1 = a.detach(v).unwrap();
                    check_step(&mut a, &mut before, "detach first");
                    if let Some(w) = random_subtree(&a, &mut rng) {
                        let d2 = a.detach(w).unwrap();
                        check_step(&mut a, &mut before, "detach second");
                        assert_eq!(a.detached_roots().len(), 2);
                        assert!(matches!(
                            a.to_topology(),
                            Err(RoseTreeError::InvalidTree(_))
                        ));
                        a.reattach(&d2).unwrap();
                        check_step(&mut a, &mut before, "reattach second");
                        n_moves[2] += 1;
                    }
                    a.reattach(&d1).unwrap();
                    assert_eq!(snapshot(&a), start);
                    check_step(&mut a, &mut before, "reattach both");
                }
                // A time-slice move.
                _ => {
                    let u = random_node(&a, &mut rng);
                    let lo = a
                        .parent(u)
                        .unwrap()
                        .map_or((a.time(u).unwrap() - 1.0).max(-4.0), |p| a.time(p).unwrap());
                    let hi = a
                        .children(u)
                        .unwrap()
                        .iter()
                        .map(|&c| a.time(c).unwrap())
                        .fold(a.time(u).unwrap() + 0.5, f64::min)
                        .min(1.0);
                    if let Some(t) = time_between(&mut rng, lo, hi) {
                        a.set_time(u, t).unwrap();
                        check_step(&mut a, &mut before, "set_time");
                        n_moves[3] += 1;
                    }
                }
            }
            // The export round-trips through the immutable topology.
            if rng.random_bool(0.1) {
                let (topology, times) = a.to_topology().unwrap();
                let b = Arena::from_topology(&topology, &times, |_| ()).unwrap();
                b.check_invariants().unwrap();
                assert_eq!(clades(&b), clades(&a));
                assert_eq!(b.to_topology().unwrap(), (topology, times));
                n_moves[4] += 1;
            }
        }
        assert!(a.n_nodes() < 2 * n);
    }
    // Every kind of move was exercised many times.
    assert!(n_moves.iter().all(|&m| m > 50), "{n_moves:?}");
}

/// ((0, 1)@0.5, 2, 3)@0.2
fn small() -> Arena<Sums> {
    let times = [1.0, 1.0, 1.0, 1.0, 0.5, 0.2];
    Arena::from_children(4, vec![vec![0, 1], vec![4, 2, 3]], &times, |_| {
        Sums::default()
    })
    .unwrap()
}

fn ids(v: &[u32]) -> Vec<NodeId> {
    v.iter().copied().map(NodeId).collect()
}

#[test]
fn read_access_on_a_small_tree() {
    let a = small();
    a.check_invariants().unwrap();
    assert_eq!((a.n_leaves(), a.n_nodes(), a.n_slots()), (4, 6, 6));
    assert_eq!(a.root(), NodeId(5));
    assert_eq!(a.parent(NodeId(0)).unwrap(), Some(NodeId(4)));
    assert_eq!(a.parent(NodeId(5)).unwrap(), None);
    assert_eq!(a.children(NodeId(5)).unwrap(), ids(&[4, 2, 3]));
    assert_eq!(a.time(NodeId(4)).unwrap(), 0.5);
    assert_eq!(a.node(NodeId(5)).unwrap().n_leaves(), 4);
    assert_eq!(a.leaves_under(NodeId(4)).unwrap(), ids(&[0, 1]));
    assert_eq!(a.leaves_under(NodeId(2)).unwrap(), ids(&[2]));
    let up: Vec<NodeId> = a.ancestors(NodeId(1)).unwrap().collect();
    assert_eq!(up, ids(&[4, 5]));
    assert_eq!(a.ancestors(NodeId(5)).unwrap().count(), 0);
    assert_eq!(a.lca(NodeId(0), NodeId(1)).unwrap(), NodeId(4));
    assert_eq!(a.lca(NodeId(1), NodeId(3)).unwrap(), NodeId(5));
    assert_eq!(a.lca(NodeId(4), NodeId(0)).unwrap(), NodeId(4));
    assert_eq!(a.lca(NodeId(2), NodeId(2)).unwrap(), NodeId(2));
    let pre: Vec<NodeId> = a.pre_order(a.root()).unwrap().collect();
    assert_eq!(pre, ids(&[5, 4, 0, 1, 2, 3]));
    let post: Vec<NodeId> = a.post_order(a.root()).unwrap().collect();
    assert_eq!(post, ids(&[0, 1, 4, 2, 3, 5]));
    // A new arena is all dirty, children first.
    assert_eq!(a.dirty_post_order(), post);
}

#[test]
fn detach_from_a_multiway_node_keeps_it() {
    let mut a = small();
    a.clear_dirty();
    let d = a.detach(NodeId(2)).unwrap();
    assert_eq!(d.root(), NodeId(2));
    assert_eq!(d.origin(), Attachment::Node(NodeId(5)));
    assert_eq!(a.children(NodeId(5)).unwrap(), ids(&[4, 3]));
    assert_eq!(a.parent(NodeId(2)).unwrap(), None);
    assert_eq!(a.detached_roots(), ids(&[2]));
    assert_eq!(a.node(NodeId(5)).unwrap().n_leaves(), 3);
    assert_eq!(a.dirty_post_order(), ids(&[5]));
    a.check_invariants().unwrap();
    // Back as the last child.
    a.attach_to_node(&d, NodeId(5)).unwrap();
    assert_eq!(a.children(NodeId(5)).unwrap(), ids(&[4, 3, 2]));
    assert!(a.detached_roots().is_empty());
    a.check_invariants().unwrap();
}

#[test]
fn detach_from_a_binary_node_splices_it_out_and_reuses_its_slot() {
    let mut a = small();
    a.clear_dirty();
    let d = a.detach(NodeId(0)).unwrap();
    assert_eq!(
        d.origin(),
        Attachment::Branch {
            below: NodeId(1),
            time: 0.5
        }
    );
    // Leaf 1 takes node 4's place; node 4 is freed.
    assert_eq!(a.children(NodeId(5)).unwrap(), ids(&[1, 2, 3]));
    assert_eq!(a.parent(NodeId(1)).unwrap(), Some(NodeId(5)));
    assert_eq!((a.n_nodes(), a.n_slots()), (5, 6));
    let err = a.node(NodeId(4)).unwrap_err().to_string();
    assert!(err.contains("freed"), "{err}");
    assert_eq!(a.dirty_post_order(), ids(&[5]));
    a.check_invariants().unwrap();

    a.clear_dirty();
    let q = a.attach_on_branch(&d, NodeId(3), 0.25).unwrap();
    assert_eq!(q, NodeId(4));
    assert_eq!(a.children(q).unwrap(), ids(&[3, 0]));
    assert_eq!(a.children(NodeId(5)).unwrap(), ids(&[1, 2, 4]));
    assert_eq!(a.time(q).unwrap(), 0.25);
    assert_eq!(a.node(q).unwrap().cache(), &Sums::default());
    assert_eq!(a.dirty_post_order(), ids(&[4, 5]));
    a.check_invariants().unwrap();
}

#[test]
fn detach_below_a_binary_root_makes_the_sibling_the_root() {
    let mut a: Arena<()> =
        Arena::from_children(2, vec![vec![0, 1]], &[1.0, 1.0, 0.3], |_| ()).unwrap();
    a.clear_dirty();
    let start = snapshot(&a);
    let d = a.detach(NodeId(0)).unwrap();
    assert_eq!(
        d.origin(),
        Attachment::Branch {
            below: NodeId(1),
            time: 0.3
        }
    );
    assert_eq!(a.root(), NodeId(1));
    assert_eq!(a.n_nodes(), 2);
    // Leaf 1's subtree did not change, so nothing is stale.
    assert!(a.dirty_post_order().is_empty());
    a.check_invariants().unwrap();
    let mut b = a.clone();
    assert_eq!(b.reattach(&d).unwrap(), NodeId(2));
    assert_eq!(snapshot(&b), start);
    // A new root above the old one, at any earlier time.
    let r = a.attach_on_branch(&d, NodeId(1), -7.5).unwrap();
    assert_eq!(a.root(), r);
    assert_eq!(a.children(r).unwrap(), ids(&[1, 0]));
    assert_eq!(a.dirty_post_order(), vec![r]);
    a.check_invariants().unwrap();
    let (topology, times) = a.to_topology().unwrap();
    assert_eq!(topology.internal(), &[vec![1, 0]]);
    assert_eq!(times, [1.0, 1.0, -7.5]);
}

#[test]
fn a_single_leaf_is_a_tree_whose_root_cannot_be_detached() {
    let mut a: Arena<()> = Arena::from_children(1, vec![], &[1.0], |_| ()).unwrap();
    a.check_invariants().unwrap();
    assert_eq!(a.root(), NodeId(0));
    assert!(a.detach(NodeId(0)).is_err());
    let (topology, times) = a.to_topology().unwrap();
    assert_eq!((topology.n_leaves(), times), (1, vec![1.0]));
}

/// Asserts an [`RoseTreeError::InvalidParameter`] on `name` whose reason contains `text`.
#[track_caller]
fn assert_param<T: std::fmt::Debug>(r: Result<T>, name: &str, text: &str) {
    match r {
        Err(RoseTreeError::InvalidParameter {
            name: ref n,
            ref reason,
        }) if n == name && reason.contains(text) => {}
        other => panic!("expected an error on `{name}` about {text:?}, got {other:?}"),
    }
}

#[test]
fn invalid_operations_are_errors_that_change_nothing() {
    let mut a = small();
    let d = a.detach(NodeId(0)).unwrap(); // frees node 4
    let start = snapshot(&a);

    assert_param(a.detach(NodeId(5)), "node", "is the root");
    assert_param(a.detach(NodeId(99)), "node", "out of range");
    assert_param(a.detach(NodeId(4)), "node", "freed");
    assert_param(a.detach(NodeId(0)), "node", "detached subtree");
    assert_param(a.node(NodeId(6)), "node", "out of range");
    assert_param(a.time(NodeId(4)), "node", "freed");
    assert_param(a.lca(NodeId(0), NodeId(1)), "b", "different trees");

    assert_param(a.attach_to_node(&d, NodeId(2)), "node", "is a leaf");
    for (below, t, what) in [
        (NodeId(1), 0.2, "strictly between"), // equal to the parent's time
        (NodeId(1), 1.0, "strictly between"), // equal to the child's time
        (NodeId(1), 0.1, "strictly between"), // above the parent
        (NodeId(5), 0.2, "strictly between"), // equal to the root's time
        (NodeId(1), f64::NAN, "strictly between"),
        (NodeId(1), f64::INFINITY, "strictly between"),
    ] {
        assert_param(a.attach_on_branch(&d, below, t), "time", what);
    }
    assert_param(
        a.attach_on_branch(&d, NodeId(0), 0.5),
        "below",
        "detached subtree",
    );
    assert_param(a.attach_on_branch(&d, NodeId(4), 0.5), "below", "freed");
    assert_param(a.attach_to_node(&d, NodeId(0)), "node", "detached subtree");
    assert_eq!(snapshot(&a), start);
    a.check_invariants().unwrap();

    // A handle cannot be used twice.
    a.attach_on_branch(&d, NodeId(1), 0.6).unwrap();
    assert_param(a.attach_to_node(&d, NodeId(5)), "detached", "not detached");
    assert_param(a.reattach(&d), "detached", "not detached");
    a.check_invariants().unwrap();

    // A subtree cannot join its own detached subtree, nor a node inside another one.
    let inner = a.detach(NodeId(4)).unwrap(); // holds leaves 1 and 0
    let leaf = a.detach(NodeId(2)).unwrap();
    assert_param(
        a.attach_to_node(&leaf, NodeId(4)),
        "node",
        "detached subtree",
    );
    assert_param(
        a.attach_on_branch(&leaf, NodeId(1), 0.9),
        "below",
        "detached subtree",
    );
    // The detached root has no parent, but still its children below.
    assert_param(a.set_time(NodeId(4), 2.0), "time", "strictly between");
    a.reattach(&leaf).unwrap();
    a.reattach(&inner).unwrap();
    a.check_invariants().unwrap();

    // set_time keeps the order.
    assert_param(a.set_time(NodeId(5), 0.65), "time", "strictly between");
    assert_param(a.set_time(NodeId(0), 0.4), "time", "strictly between");
    a.set_time(NodeId(0), 3.0).unwrap();
    a.check_invariants().unwrap();

    // A subtree cannot go below a node later than its root, on a branch or at a node.
    let times = [1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.7, 0.2];
    let mut a: Arena<()> = Arena::from_children(
        5,
        vec![vec![0, 1], vec![2, 3], vec![5, 6, 4]],
        &times,
        |_| (),
    )
    .unwrap();
    let start = clades(&a);
    let d = a.detach(NodeId(5)).unwrap();
    assert_param(
        a.attach_to_node(&d, NodeId(6)),
        "node",
        "not before the subtree root",
    );
    assert_param(
        a.attach_on_branch(&d, NodeId(2), 0.8),
        "time",
        "strictly between",
    );
    a.attach_to_node(&d, NodeId(7)).unwrap();
    // Appended last: the same tree up to the children's order.
    assert_eq!(a.children(NodeId(7)).unwrap(), ids(&[6, 4, 5]));
    assert_eq!(clades(&a), start);
    a.check_invariants().unwrap();
}

#[test]
fn bad_input_to_the_constructors_is_an_error() {
    let shape = || vec![vec![0, 1], vec![4, 2, 3]];
    assert_param(
        Arena::from_children(4, shape(), &[1.0; 5], |_| ()),
        "times",
        "one time per node",
    );
    assert_param(
        Arena::from_children(4, shape(), &[1.0, 1.0, 1.0, 1.0, 0.1, 0.2], |_| ()),
        "times",
        "not after its parent",
    );
    assert_param(
        Arena::from_children(4, shape(), &[1.0, 1.0, 1.0, 1.0, 0.5, 0.5], |_| ()),
        "times",
        "not after its parent",
    );
    assert_param(
        Arena::from_children(4, shape(), &[1.0, f64::NAN, 1.0, 1.0, 0.5, 0.2], |_| ()),
        "times",
        "NaN",
    );
    assert!(matches!(
        Arena::from_children(4, vec![vec![0, 1], vec![4, 2]], &[1.0; 6], |_| ()),
        Err(RoseTreeError::InvalidTree(_))
    ));
}

#[test]
fn the_invariant_checker_finds_each_kind_of_damage() {
    type Damage = fn(&mut Arena<Sums>);
    let cases: [(&str, Damage); 10] = [
        ("not after its parent", |a| a.nodes[0].time = 0.4),
        ("records 3 leaves", |a| a.nodes[4].n_leaves = 3),
        ("dirty but its parent", |a| {
            a.clear_dirty();
            a.nodes[4].dirty = true;
        }),
        ("whose parent is", |a| a.nodes[5].children.push(NodeId(0))),
        ("lists it 0 time", |a| a.nodes[0].parent = Some(NodeId(5))),
        ("lists it 2 time", |a| a.nodes[4].children.push(NodeId(1))),
        ("has 1 children", |a| {
            a.nodes[4].children.pop();
            a.nodes[1].parent = None;
            a.detached.push(NodeId(1));
        }),
        ("not on the free list", |a| {
            let _ = a.detach(NodeId(0)).unwrap();
            a.free.clear();
        }),
        ("no parent and is not a root", |a| {
            let _ = a.detach(NodeId(2)).unwrap();
            a.detached.clear();
        }),
        // A cycle always breaks the time order somewhere.
        ("6 at time 0.6", |a| {
            // Node 4 and a new node 6 are each other's parents, out of the root's reach.
            a.nodes[1].parent = Some(NodeId(6));
            a.nodes[5].children = vec![NodeId(2), NodeId(3)];
            a.nodes[5].n_leaves = 2;
            a.nodes[4].children = vec![NodeId(0), NodeId(6)];
            a.nodes[4].parent = Some(NodeId(6));
            a.nodes.push(ArenaNode {
                parent: Some(NodeId(4)),
                children: vec![NodeId(1), NodeId(4)],
                time: 0.6,
                n_leaves: 2,
                cache: Sums::default(),
                dirty: true,
                free: false,
            });
        }),
    ];
    for (text, damage) in cases {
        let mut a = small();
        a.check_invariants().unwrap();
        damage(&mut a);
        match a.check_invariants() {
            Err(RoseTreeError::InvalidTree(msg)) if msg.contains(text) => {}
            other => panic!("expected {text:?}, got {other:?}"),
        }
    }
}

#[test]
fn conversions_round_trip() {
    for seed in 0..20 {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let n = rng.random_range(1..30);
        let (internal, times) = random_tree(n, &mut rng);
        let topology = Topology::new(n, internal).unwrap();
        let a = Arena::from_topology(&topology, &times, |v| v.0).unwrap();
        a.check_invariants().unwrap();
        // The ids and times are the topology's, and `init` saw every id.
        for (v, &t) in times.iter().enumerate() {
            let v32 = NodeId(v as u32);
            assert_eq!(a.time(v32).unwrap(), t);
            assert_eq!(a.cache(v32).unwrap(), &(v as u32));
            if v >= n {
                let kids: Vec<usize> = a.children(v32).unwrap().iter().map(|c| c.index()).collect();
                assert_eq!(kids, topology.internal()[v - n]);
            }
        }
        // The export renumbers internal nodes in post-order; the clades and times survive,
        // and a second export is identical.
        let (t2, times2) = a.to_topology().unwrap();
        let b = Arena::from_topology(&t2, &times2, |_| 0).unwrap();
        assert_eq!(clades(&b), clades(&a));
        assert_eq!(b.to_topology().unwrap(), (t2.clone(), times2.clone()));
        let compact = a.compact_ids().unwrap();
        for (k, v) in compact.iter().enumerate() {
            assert_eq!(times2[k], a.time(*v).unwrap());
        }
        assert_eq!(*compact.last().unwrap(), a.root());
    }
}

#[test]
fn the_output_tree_has_the_times_as_heights() {
    let mut a = small();
    let d = a.detach(NodeId(2)).unwrap();
    a.attach_on_branch(&d, NodeId(1), 0.75).unwrap();
    // Compact ids: leaves, then 6 = (1, 2) → 4, 4 = (0, 6) → 5, the root → 6.
    assert_eq!(a.compact_ids().unwrap(), ids(&[0, 1, 2, 3, 6, 4, 5]));
    let tree = a.to_tree().unwrap();
    assert_eq!(
        tree.topology().internal(),
        &[vec![1, 2], vec![0, 4], vec![5, 3]]
    );
    assert_eq!(
        tree.heights().unwrap(),
        &[1.0, 1.0, 1.0, 1.0, 0.75, 0.5, 0.2]
    );
    assert_eq!(tree.leaves_of(5), vec![0, 1, 2]);
    // The output tree needs the leaves at one time; the arena does not.
    a.set_time(NodeId(3), 0.9).unwrap();
    a.check_invariants().unwrap();
    assert!(matches!(a.to_tree(), Err(RoseTreeError::InvalidTree(_))));
}

#[test]
fn a_chain_of_100000_leaves_needs_no_recursion() {
    let n = 100_000_usize;
    // Internal node n + k joins node n + k − 1 (leaf 0 for k = 0) and leaf k + 1, at time −k.
    let internal: Vec<Vec<usize>> = (0..n - 1)
        .map(|k| vec![if k == 0 { 0 } else { n + k - 1 }, k + 1])
        .collect();
    let mut times = vec![1.0; n];
    times.extend((0..n - 1).map(|k| -(k as f64)));
    let mut a = Arena::from_children(n, internal.clone(), &times, |_| 0_usize).unwrap();
    a.check_invariants().unwrap();
    let root = a.root();
    assert_eq!(root, NodeId((2 * n - 2) as u32));
    assert_eq!(a.post_order(root).unwrap().count(), 2 * n - 1);
    assert_eq!(a.post_order(root).unwrap().last(), Some(root));
    assert_eq!(a.pre_order(root).unwrap().next(), Some(root));
    assert_eq!(a.leaves_under(root).unwrap().len(), n);
    assert_eq!(a.ancestors(NodeId(0)).unwrap().count(), n - 1);
    assert_eq!(a.lca(NodeId(0), NodeId(1)).unwrap(), NodeId(n as u32));
    assert_eq!(a.lca(NodeId(0), NodeId(n as u32 - 1)).unwrap(), root);
    let count = |a: &Arena<usize>, v: NodeId| match a.children(v).unwrap() {
        [] => 1,
        kids => kids.iter().map(|&c| *a.cache(c).unwrap()).sum(),
    };
    a.refresh_dirty(count);
    assert_eq!(*a.cache(root).unwrap(), n);

    // Round trip through the topology: the chain is already in post-order.
    let (topology, times2) = a.to_topology().unwrap();
    assert_eq!(topology.internal(), &internal[..]);
    assert_eq!(times2, times);

    // The deepest leaf out and back in: its parent is spliced out, every internal node
    // above is stale, and the reattach restores the chain.
    let d = a.detach(NodeId(0)).unwrap();
    assert_eq!(a.dirty_post_order().len(), n - 2);
    a.refresh_dirty(count);
    assert_eq!(*a.cache(root).unwrap(), n - 1);
    a.reattach(&d).unwrap();
    a.refresh_dirty(count);
    assert_eq!(*a.cache(root).unwrap(), n);
    assert_eq!(a.to_topology().unwrap().0.internal(), &internal[..]);

    // The whole chain below the root out: the root is spliced out, the last leaf is the
    // root, and the chain goes back on as a new root above it.
    let big = a.children(root).unwrap()[0];
    let d = a.detach(big).unwrap();
    assert_eq!(a.root(), NodeId(n as u32 - 1));
    let r = a.attach_on_branch(&d, NodeId(n as u32 - 1), -1e6).unwrap();
    assert_eq!(r, root);
    a.check_invariants().unwrap();
    a.refresh_dirty(count);
    assert_eq!(*a.cache(r).unwrap(), n);
}

#[test]
fn add_leaf_shifts_internal_ids_and_attaches_anywhere() {
    for seed in 0..40u64 {
        let (mut a, mut rng) = random_arena(2 + (seed as usize % 9), seed);
        // Free a slot first, so that the free list is renumbered too.
        if let Some(v) = random_subtree(&a, &mut rng) {
            let d = a.detach(v).unwrap();
            if let Some(at) = random_position(&a, &d, &mut rng) {
                a.attach(&d, at).unwrap();
            } else {
                a.reattach(&d).unwrap();
            }
        }
        a.refresh_dirty(from_children);
        let n = a.n_leaves();
        let clades_before = clades(&a);
        let new = a.add_leaf(1.0, Sums::default()).unwrap();
        assert_eq!(new.root(), NodeId(n as u32));
        assert_eq!(a.n_leaves(), n + 1);
        assert_eq!(a.detached_roots(), &[NodeId(n as u32)]);
        a.check_invariants().unwrap();
        // The tree without the new leaf is the same, ids shifted past the leaves.
        assert_eq!(clades(&a), clades_before, "seed {seed}");
        assert!(a.reattach(&new).is_err());
        a.refresh_dirty(from_children);
        let mut before = signatures(&a);
        let at = loop {
            if let Some(at) = random_position(&a, &new, &mut rng) {
                break at;
            }
        };
        a.attach(&new, at).unwrap();
        check_step(&mut a, &mut before, "add_leaf");
        assert_eq!(a.leaves_under(a.root()).unwrap().len(), n + 1);
    }
    // Another detached subtree blocks the renumbering.
    let mut a = small();
    let _d = a.detach(NodeId(2)).unwrap();
    assert!(a.add_leaf(1.0, Sums::default()).is_err());
    assert!(small().add_leaf(f64::NAN, Sums::default()).is_err());
}
