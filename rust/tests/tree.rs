//! The shared tree and the arena through the public API: a random sequence of subtree moves
//! keeps a valid tree, and its export is a valid shared tree with the same leaves.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rosetree::tree::arena::NodeId;
use rosetree::tree::{Arena, Topology, Tree};

#[test]
fn random_prune_and_regraft_moves_keep_a_valid_exportable_tree() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let n = 12;
    // A caterpillar with divergence times in (0, 1), leaves at 1.
    let internal: Vec<Vec<usize>> = (0..n - 1)
        .map(|k| vec![if k == 0 { 0 } else { n + k - 1 }, k + 1])
        .collect();
    let times: Vec<f64> = (0..2 * n - 1)
        .map(|v| {
            if v < n {
                1.0
            } else {
                0.9 - 0.07 * (v - n) as f64
            }
        })
        .collect();
    let mut arena: Arena<()> =
        Arena::from_topology(&Topology::new(n, internal).unwrap(), &times, |_| ()).unwrap();
    let mut moved = 0;
    for _ in 0..300 {
        let v = NodeId(rng.random_range(0..n as u32));
        let Ok(detached) = arena.detach(v) else {
            continue;
        };
        // Re-attach above a random leaf, between its parent's time and its own.
        let below = NodeId(rng.random_range(0..n as u32));
        let (lo, hi) = match arena.parent(below) {
            Ok(Some(p)) => (arena.time(p).unwrap(), arena.time(below).unwrap()),
            _ => (0.0, arena.time(below).unwrap()),
        };
        let t = lo + (hi - lo) * rng.random_range(0.05..0.95);
        if arena.attach_on_branch(&detached, below, t).is_err() {
            arena.reattach(&detached).unwrap();
        } else {
            moved += 1;
        }
        arena.check_invariants().unwrap();
    }
    assert!(moved > 100, "only {moved} moves were made");
    let tree: Tree = arena.to_tree().unwrap();
    assert_eq!(tree.n_leaves(), n);
    assert_eq!(tree.leaves_of(tree.root()), (0..n).collect::<Vec<_>>());
    // Divergence times fall from 1 at the leaves; the linkage uses distances from them.
    let z = tree.to_linkage().unwrap();
    assert!(z.iter().all(|row| row[2] > 0.0 && row[2] < 1.0));
}
