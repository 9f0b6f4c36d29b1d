//! The agglomeration engine through the public API: a client of its own (average linkage on
//! points of a line) against the textbook O(n³) algorithm, with ties, and on any number of
//! threads.

use std::sync::atomic::{AtomicUsize, Ordering};

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
    type Cutoff = ();

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

/// [`Average`] with the engine's cutoff: the floor's key itself, and a pair is left unscored
/// where `−|ΣA·|B| − ΣB·|A|| / (|A| |B|)`, the key's bound by the triangle inequality
/// (`|Σ(x − y)| ≤ Σ|x − y|`, integers, divided as the key is), lies below it.
struct Bounded {
    inner: Average,
    skipped: AtomicUsize,
}

impl Linkage for Bounded {
    type Key = f64;
    type Probe = ();
    type Cutoff = f64;

    fn score(&self, i: u32, j: u32, _: Option<&()>) -> rosetree::Result<f64> {
        self.inner.score(i, j, None)
    }

    fn cutoff(&self, key: &f64) -> Option<f64> {
        Some(*key)
    }

    fn score_above(
        &self,
        i: u32,
        j: u32,
        _: Option<&()>,
        cutoff: &f64,
    ) -> rosetree::Result<Option<f64>> {
        let (a, b) = (
            &self.inner.clusters[i as usize],
            &self.inner.clusters[j as usize],
        );
        let (sa, sb) = (a.iter().sum::<i64>(), b.iter().sum::<i64>());
        let (na, nb) = (a.len() as i64, b.len() as i64);
        let bound = -((sa * nb - sb * na).abs() as f64) / (na * nb) as f64;
        if bound < *cutoff {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        }
        self.score(i, j, None).map(Some)
    }

    fn merge(&mut self, i: u32, j: u32, merged: u32) -> rosetree::Result<()> {
        self.inner.merge(i, j, merged)
    }
}

/// With a client's cutoff the engine leaves pairs below a floor unscored and merges as it
/// does without one (itself checked against the cubic algorithm above), on one thread and
/// on several, with ties and with searches large enough to scan in parallel.
#[test]
fn a_cutoff_changes_no_merge() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    for (n, range) in [
        (40, 12),
        (300, 12),
        (300, 100_000),
        (1_500, 40),
        (2_200, 100_000),
    ] {
        let points: Vec<i64> = (0..n).map(|_| rng.random_range(0..range)).collect();
        let singletons = || points.iter().map(|&p| vec![p]).collect::<Vec<_>>();
        let mut plain = Average {
            clusters: singletons(),
        };
        let threads = Threads::new(Some(1)).unwrap();
        let expected = agglomerate(&mut plain, n, &threads, &|| false).unwrap();
        for threads in [1, 3] {
            let mut client = Bounded {
                inner: Average {
                    clusters: singletons(),
                },
                skipped: AtomicUsize::new(0),
            };
            let threads = Threads::new(Some(threads)).unwrap();
            let merges = agglomerate(&mut client, n, &threads, &|| false).unwrap();
            assert_eq!(merges, expected, "n = {n}");
            // Most pairs of a large search lie below their floor.
            let skipped = client.skipped.load(Ordering::Relaxed);
            assert!(
                n < 1_000 || skipped > n * n / 4,
                "n = {n}: {skipped} skipped"
            );
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
