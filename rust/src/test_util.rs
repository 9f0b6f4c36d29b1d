//! Helpers shared by the unit tests.

use ndarray::Array2;

use crate::models::RowQueries;

/// `ln f` of all rows of `x` as one cluster, through every path a model offers: evaluated
/// from the merged statistics, merged from two parts (all rows but the last, and the last),
/// and through the query of the first part against the last row.
pub(crate) fn log_f_every_path<M: RowQueries>(model: &M, x: &Array2<f64>) -> [f64; 3] {
    let l = model.leaf_stats_all(x.view()).unwrap();
    let n = l.len();
    let head = l[1..n - 1]
        .iter()
        .fold(l[0].clone(), |acc, s| model.merge(&acc, s));
    [
        model.log_marginal(&model.merge(&head, &l[n - 1])).unwrap(),
        model.log_marginal_merged(&head, &l[n - 1]).unwrap(),
        model
            .log_marginal_query(&model.query(&head), &head, &l[n - 1])
            .unwrap(),
    ]
}

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
