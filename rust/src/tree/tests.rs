//! The shared tree: heights in every family's direction, and what it refuses.

use super::*;

/// ((0, 1), (2, 3)) joined at the root: nodes 4 = (0, 1), 5 = (2, 3), 6 = root.
fn balanced() -> Topology {
    Topology::new(4, vec![vec![0, 1], vec![2, 3], vec![4, 5]]).unwrap()
}

#[test]
fn heights_in_either_direction_give_the_same_distances() {
    // Rose-tree style (growing from 0), coalescent style (falling from 0) and diffusion-tree
    // style (falling from 1) describe the same ultrametric tree.
    let up = vec![0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.5];
    let down: Vec<f64> = up.iter().map(|h| -h).collect();
    let pydt: Vec<f64> = up.iter().map(|h| 1.0 - h / 4.0).collect();
    let expected = [0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.5];
    for (heights, scale) in [(up, 1.0), (down, 1.0), (pydt, 0.25)] {
        let tree = Tree::new(&balanced(), Some(heights)).unwrap();
        let d = tree.distances().unwrap();
        for (got, want) in d.iter().zip(expected) {
            assert!(
                (got - want * scale).abs() < 1e-15,
                "{got} vs {}",
                want * scale
            );
        }
        assert!(d[..4].iter().all(|x| x.is_sign_positive()));
        let z = tree.to_linkage().unwrap();
        assert_eq!(z.len(), 3);
        assert_eq!(z[0], [0.0, 1.0, scale, 2.0]);
        assert_eq!(z[1], [2.0, 3.0, 2.0 * scale, 2.0]);
        assert_eq!(z[2], [4.0, 5.0, 3.5 * scale, 4.0]);
        assert_eq!(tree.clusters_at_height(1.5 * scale).unwrap(), vec![2, 3, 4]);
        assert_eq!(tree.max_clusters(2).unwrap(), vec![4, 5]);
    }
}

#[test]
fn newick_lengths_are_distances_between_parent_and_child() {
    let tree = Tree::new(
        &balanced(),
        Some(vec![0.0, 0.0, 0.0, 0.0, -1.0, -2.0, -3.5]),
    )
    .unwrap();
    assert_eq!(tree.to_newick(None), "((0,1),(2,3));");
    assert_eq!(
        tree.to_newick_with_lengths(None).unwrap(),
        "((0:1,1:1):2.5,(2:2,3:2):1.5);"
    );
    assert_eq!(newick_number(1e-300), "1e-300");
    assert_eq!(newick_number(0.25), "0.25");
    let names: Vec<String> = ["a b", "it's", "c", "d"].map(String::from).to_vec();
    assert_eq!(tree.to_newick(Some(&names)), "(('a b','it''s'),(c,d));");
}

#[test]
fn bad_heights_are_refused_with_a_reason() {
    let cases: [(Vec<f64>, &str); 5] = [
        (vec![0.0; 6], "expected 7 heights"),
        (vec![0.0, 0.0, 0.0, 0.0, 1.0, f64::NAN, 2.0], "NaN"),
        (vec![0.0, 0.0, 0.5, 0.0, 1.0, 1.0, 2.0], "share one height"),
        // Node 4 is above its parent's height in a tree that grows upwards.
        (vec![0.0, 0.0, 0.0, 0.0, 3.0, 1.0, 2.0], "nearer the leaves"),
        // A child below the leaves' height in a tree that grows upwards.
        (
            vec![0.0, 0.0, 0.0, 0.0, -1.0, 1.0, 2.0],
            "nearer the leaves",
        ),
    ];
    for (heights, reason) in cases {
        let err = Tree::new(&balanced(), Some(heights))
            .unwrap_err()
            .to_string();
        assert!(err.contains(reason), "{err}");
    }
}

#[test]
fn operations_that_need_heights_say_so() {
    let tree = Tree::new(&balanced(), None).unwrap();
    assert!(tree.heights().is_none());
    for err in [
        tree.to_linkage().map(|_| ()).unwrap_err(),
        tree.to_newick_with_lengths(None).map(|_| ()).unwrap_err(),
        tree.clusters_at_height(1.0).map(|_| ()).unwrap_err(),
        tree.max_clusters(2).map(|_| ()).unwrap_err(),
    ] {
        assert!(err.to_string().contains("no heights"), "{err}");
    }
    // Structure alone still works.
    assert_eq!(tree.leaves_of(5), vec![2, 3]);
    assert_eq!(tree.n_partitions(), Some(5));
    assert_eq!(tree.labels(&[4, 2, 3]).unwrap(), vec![0, 0, 1, 2]);
}

#[test]
fn a_chain_of_100000_leaves_needs_no_recursion() {
    let n = 100_000;
    let internal: Vec<Vec<usize>> = (0..n - 1)
        .map(|k| vec![if k == 0 { 0 } else { n + k - 1 }, k + 1])
        .collect();
    let heights: Vec<f64> = (0..2 * n - 1)
        .map(|v| if v < n { 0.0 } else { -((v - n + 1) as f64) })
        .collect();
    let tree = Tree::new(&Topology::new(n, internal).unwrap(), Some(heights)).unwrap();
    assert_eq!(tree.leaves_of(tree.root()).len(), n);
    assert_eq!(tree.to_linkage().unwrap().len(), n - 1);
    assert!(tree.to_newick_with_lengths(None).unwrap().ends_with(";"));
    assert_eq!(tree.max_clusters(3).unwrap().len(), 3);
}
