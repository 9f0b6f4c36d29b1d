//! Dirichlet–multinomial clusters for rows of counts.

use ndarray::ArrayView1;

use super::{ClusterModel, per_feature};
use crate::error::{Result, RoseTreeError};
use crate::math::ln_gamma;

/// `ln f = ln Γ(A) − ln Γ(A + N) + Σ_k [ln Γ(α_k + c_k) − ln Γ(α_k)]`, `A = Σ α_k`, with `c_k`
/// the column totals and `N` the grand total: the probability of the tokens in one fixed
/// order. The multinomial coefficients `Σ_rows ln(N_r! / Π_k x_rk!)` add the same constant to
/// every tree and are included only on request.
#[derive(Debug, Clone)]
pub struct DirichletMultinomial {
    alpha: Vec<f64>,
    alpha_sum: f64,
    /// `ln Γ(A) − Σ_k ln Γ(α_k)`.
    prior_const: f64,
    multinomial_coefficient: bool,
}

/// Column totals, grand total and summed log multinomial coefficients of a cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct CountStats {
    rows: u32,
    counts: Vec<f64>,
    total: f64,
    log_coefficient: f64,
}

impl DirichletMultinomial {
    /// A model for `d` categories with concentration `alpha` (scalar or per category).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `alpha` for a wrong length or a value that is not
    /// finite and positive.
    pub fn new(alpha: &[f64], d: usize, multinomial_coefficient: bool) -> Result<Self> {
        if d == 0 {
            return Err(RoseTreeError::param(
                "n_features",
                "the data need at least one column",
            ));
        }
        let alpha = per_feature("alpha", alpha, d)?;
        let alpha_sum: f64 = alpha.iter().sum();
        let prior_const = ln_gamma(alpha_sum) - alpha.iter().map(|&a| ln_gamma(a)).sum::<f64>();
        Ok(Self {
            alpha,
            alpha_sum,
            prior_const,
            multinomial_coefficient,
        })
    }

    /// Concentration per category.
    pub fn alpha(&self) -> &[f64] {
        &self.alpha
    }

    /// Whether `ln f` includes the multinomial coefficients.
    pub fn multinomial_coefficient(&self) -> bool {
        self.multinomial_coefficient
    }
}

impl ClusterModel for DirichletMultinomial {
    type Stats = CountStats;
    type Query = ();

    fn query(&self, _: &CountStats) {}

    fn n_features(&self) -> usize {
        self.alpha.len()
    }

    fn leaf_stats(&self, row: ArrayView1<'_, f64>, index: usize) -> Result<CountStats> {
        for (j, &v) in row.iter().enumerate() {
            let reason = if v.is_nan() {
                "missing values are not supported by the Dirichlet-multinomial model"
            } else if v < 0.0 {
                "negative count"
            } else if !v.is_finite() || v != v.round() {
                "non-integer count"
            } else {
                continue;
            };
            return Err(RoseTreeError::data(
                index,
                Some(j),
                format!("{reason} ({v})"),
            ));
        }
        let total = row.sum();
        let log_coefficient =
            ln_gamma(total + 1.0) - row.iter().map(|&v| ln_gamma(v + 1.0)).sum::<f64>();
        Ok(CountStats {
            rows: 1,
            counts: row.to_vec(),
            total,
            log_coefficient,
        })
    }

    fn merge(&self, a: &CountStats, b: &CountStats) -> CountStats {
        CountStats {
            rows: a.rows + b.rows,
            counts: a.counts.iter().zip(&b.counts).map(|(x, y)| x + y).collect(),
            total: a.total + b.total,
            log_coefficient: a.log_coefficient + b.log_coefficient,
        }
    }

    fn log_marginal(&self, s: &CountStats) -> Result<f64> {
        let body: f64 = self
            .alpha
            .iter()
            .zip(&s.counts)
            .map(|(&a, &c)| ln_gamma(a + c))
            .sum();
        let coefficient = if self.multinomial_coefficient {
            s.log_coefficient
        } else {
            0.0
        };
        Ok(self.prior_const - ln_gamma(self.alpha_sum + s.total) + body + coefficient)
    }

    fn log_marginal_merged(&self, a: &CountStats, b: &CountStats) -> Result<f64> {
        let body: f64 = (0..self.alpha.len())
            .map(|k| ln_gamma(self.alpha[k] + a.counts[k] + b.counts[k]))
            .sum();
        let coefficient = if self.multinomial_coefficient {
            a.log_coefficient + b.log_coefficient
        } else {
            0.0
        };
        Ok(self.prior_const - ln_gamma(self.alpha_sum + a.total + b.total) + body + coefficient)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn matches_the_polya_urn_token_by_token() {
        let x = array![[2., 0., 1.], [0., 3., 1.], [1., 1., 0.]];
        let alpha = [0.5, 1.5, 2.0];
        let model = DirichletMultinomial::new(&alpha, 3, false).unwrap();
        let l = model.leaf_stats_all(x.view()).unwrap();
        let all = model.merge(&model.merge(&l[0], &l[1]), &l[2]);
        let (mut counts, mut total, mut expected) = ([0.0; 3], 0.0, 0.0);
        for row in x.rows() {
            for (k, &c) in row.iter().enumerate() {
                for _ in 0..c as usize {
                    expected += ((alpha[k] + counts[k]) / (alpha.iter().sum::<f64>() + total)).ln();
                    counts[k] += 1.0;
                    total += 1.0;
                }
            }
        }
        assert!((model.log_marginal(&all).unwrap() - expected).abs() < 1e-12);
        let merged = model
            .log_marginal_merged(&model.merge(&l[0], &l[1]), &l[2])
            .unwrap();
        assert!((merged - expected).abs() < 1e-12);
    }

    #[test]
    fn two_categories_with_coefficient_is_beta_binomial() {
        // Beta-binomial pmf: C(n, k) B(k + a, n − k + b) / B(a, b).
        let (a, b) = (1.3, 0.6);
        let model = DirichletMultinomial::new(&[a, b], 2, true).unwrap();
        let s = model.leaf_stats(array![3.0, 2.0].view(), 0).unwrap();
        let ln_choose = ln_gamma(6.0) - ln_gamma(4.0) - ln_gamma(3.0);
        let expected =
            ln_choose + crate::math::ln_beta(3.0 + a, 2.0 + b) - crate::math::ln_beta(a, b);
        assert!((model.log_marginal(&s).unwrap() - expected).abs() < 1e-12);
    }

    #[test]
    fn rejects_bad_counts() {
        let model = DirichletMultinomial::new(&[1.0], 3, false).unwrap();
        for bad in [-1.0, 0.5, f64::NAN, f64::INFINITY] {
            let err = model
                .leaf_stats(array![1.0, bad, 2.0].view(), 3)
                .unwrap_err();
            assert!(matches!(
                err,
                RoseTreeError::InvalidData {
                    row: 3,
                    column: Some(1),
                    ..
                }
            ));
        }
        assert!(DirichletMultinomial::new(&[0.0], 3, false).is_err());
    }
}
