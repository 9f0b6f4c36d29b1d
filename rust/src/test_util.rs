//! Helpers shared by the unit tests.

/// Every vector of `k` whole counts summing to `n` (the compositions of `n` into `k` parts).
pub(crate) fn compositions(n: usize, k: usize) -> Vec<Vec<f64>> {
    if k == 1 {
        return vec![vec![n as f64]];
    }
    (0..=n)
        .flat_map(|first| {
            compositions(n - first, k - 1)
                .into_iter()
                .map(move |mut rest| {
                    rest.insert(0, first as f64);
                    rest
                })
        })
        .collect()
}
