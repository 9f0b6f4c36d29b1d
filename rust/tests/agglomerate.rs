//! The agglomeration engine through the public API: a client of its own (average linkage on
//! points of a line) against the textbook O(n³) algorithm, with ties, and on any number of
//! threads.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rosetree::agglomerate::{Linkage, agglomerate};
use rosetree::parallel::Threads;

/// Average linkage with integer coordinates: the key `−Σ|x − y| / (|A| |B|)` as an exact
/// rational is compared through `f64` only when it is exact (small integers), so ties are
/// real ties.
struct Average {
    clusters: Vec<Vec<i64>>,
}

fn key(a: &[i64], b: &[i64]) -> f64 {
    let total: i64 = a
        .iter()
        .flat_map(|x| b.iter().map(move |y| (x - y).abs()))
        .sum();
    -(total as f64) / (a.len() * b.len()) as f64
}

impl Linkage for Average {
    type Key = f64;
    type Probe = ();

    fn score(&self, i: u32, j: u32, _: Option<&()>) -> rosetree::Result<f64> {
        Ok(key(&self.clusters[i as usize], &self.clusters[j as usize]))
    }

    fn merge(&mut self, i: u32, j: u32, merged: u32) -> rosetree::Result<()> {
        assert_eq!(merged as usize, self.clusters.len());
        let mut c = self.clusters[i as usize].clone();
        c.extend(&self.clusters[j as usize]);
        self.clusters.push(c);
        Ok(())
    }
}

/// Repeatedly merges the best live pair: the highest key, ties to the lowest `(i, j)`.
fn reference(points: &[i64]) -> Vec<(u32, u32)> {
    let mut clusters: Vec<Vec<i64>> = points.iter().map(|&p| vec![p]).collect();
    let mut live: Vec<u32> = (0..points.len() as u32).collect();
    let mut merges = Vec::new();
    while live.len() > 1 {
        let mut best: Option<(f64, u32, u32)> = None;
        for (a, &i) in live.iter().enumerate() {
            for &j in &live[a + 1..] {
                let k = key(&clusters[i as usize], &clusters[j as usize]);
                if best.is_none_or(|(bk, _, _)| k > bk) {
                    best = Some((k, i, j));
                }
            }
        }
        let (_, i, j) = best.unwrap();
        let mut c = clusters[i as usize].clone();
        c.extend(&clusters[j as usize].clone());
        clusters.push(c);
        live.retain(|&t| t != i && t != j);
        live.push(clusters.len() as u32 - 1);
        merges.push((i, j));
    }
    merges
}

#[test]
fn average_linkage_matches_the_cubic_algorithm_with_ties_on_any_number_of_threads() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    for round in 0..30 {
        // Few distinct coordinates, so that equal keys are common.
        let n = 2 + round * 3;
        let points: Vec<i64> = (0..n).map(|_| rng.random_range(0..12)).collect();
        let expected = reference(&points);
        for threads in [
            Threads::new(Some(1)).unwrap(),
            Threads::new(Some(3)).unwrap(),
        ] {
            let mut client = Average {
                clusters: points.iter().map(|&p| vec![p]).collect(),
            };
            let merges = agglomerate(&mut client, n, &threads, &|| false).unwrap();
            assert_eq!(merges, expected, "points {points:?}");
        }
    }
}

#[test]
fn an_interrupt_stops_the_engine() {
    let mut client = Average {
        clusters: (0..50).map(|p| vec![p]).collect(),
    };
    let err = agglomerate(&mut client, 50, &Threads::default(), &|| true).unwrap_err();
    assert!(matches!(err, rosetree::RoseTreeError::Interrupted));
}
