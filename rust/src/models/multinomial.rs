//! Dirichlet–multinomial clusters for rows of counts (bags of words, histograms).
//!
//! All rows of a cluster share one vector of category probabilities `p ~ Dir(α)`; integrating
//! it out leaves a function of the cluster's column totals only.

use ndarray::ArrayView1;

use super::{ClusterModel, Differentiable, RowQueries, check_hyperparameter_count, per_feature};
use crate::error::{Result, RoseTreeError};
use crate::math::{digamma_diff, ln_gamma, ln_gamma_ratio, ln_rising_shift};

/// The direct `ln Γ` formula is used while the magnitudes of its terms add up to at most this
/// many times `max(1, |ln f|)`; its error is then below ~`10⁻¹⁴ · max(1, |ln f|)`. Beyond
/// that (large concentrations, or large counts) the terms would cancel, and a sum of
/// [`ln_rising_shift`] terms of one sign takes over.
const MAX_CANCELLATION: f64 = 32.0;

/// `(k, c_k)` for the nonzero counts `c_k`.
fn nonzero(counts: &[f64]) -> impl Iterator<Item = (usize, f64)> + Clone + '_ {
    counts
        .iter()
        .copied()
        .enumerate()
        .filter(|&(_, c)| c != 0.0)
}

/// `(hi, lo)` with `hi + lo = a + b` exactly (Knuth's TwoSum).
#[inline]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let hi = a + b;
    let b_virtual = hi - a;
    (hi, (a - (hi - b_virtual)) + (b - b_virtual))
}

/// A Dirichlet prior `Dir(α)` ready for evaluating `ln f`: the concentrations, their `ln Γ`,
/// and their sum as an unevaluated `hi + lo`, so that every `Σ_{j≠k} α_j = (hi − α_k) + lo`
/// keeps its digits even when one `α_k` dominates the sum.
#[derive(Debug, Clone)]
struct DirichletPrior {
    alpha: Vec<f64>,
    ln_gamma_alpha: Vec<f64>,
    sum: (f64, f64),
}

impl DirichletPrior {
    fn new(alpha: Vec<f64>) -> Self {
        let mut sum = (0.0, 0.0);
        for &a in &alpha {
            let (hi, e) = two_sum(sum.0, a);
            sum = (hi, sum.1 + e);
        }
        Self {
            ln_gamma_alpha: alpha.iter().map(|&a| ln_gamma(a)).collect(),
            alpha,
            sum,
        }
    }

    /// The posterior `Dir(α + c)` after observing counts `c`, with total `n`.
    fn posterior(&self, counts: &[f64], n: f64) -> Self {
        let alpha: Vec<f64> = self.alpha.iter().zip(counts).map(|(a, c)| a + c).collect();
        let ln_gamma_alpha = alpha
            .iter()
            .zip(counts)
            .zip(&self.ln_gamma_alpha)
            .map(|((&a, &c), &g)| if c == 0.0 { g } else { ln_gamma(a) })
            .collect();
        let (hi, e) = two_sum(self.sum.0, n);
        Self {
            alpha,
            ln_gamma_alpha,
            sum: (hi, self.sum.1 + e),
        }
    }

    /// `ln Γ(A) − ln Γ(A + N) + Σ_k [ln Γ(α_k + c_k) − ln Γ(α_k)]` for the nonzero counts
    /// `(k, c_k)` in `counts`, with `N = Σ_k c_k`: the Pólya-urn probability of the tokens.
    ///
    /// The direct formula costs one `ln Γ` per nonzero count; where its terms would cancel
    /// (see [`MAX_CANCELLATION`]) it is replaced by the log probability of drawing the
    /// categories one after the other, `−Σ_k ln[(A + C_k)_{c_k} / (α_k)_{c_k}]` with `C_k` the
    /// counts drawn before category `k`: terms of one sign from [`ln_rising_shift`], exact
    /// for every concentration and every count.
    fn log_ratio(&self, counts: impl Iterator<Item = (usize, f64)> + Clone, total: f64) -> f64 {
        if total == 0.0 {
            return 0.0;
        }
        let (hi, lo) = self.sum;
        let head = ln_gamma_ratio(hi, total);
        let (mut body, mut magnitude) = (0.0, head.abs());
        for (k, c) in counts.clone() {
            let g = ln_gamma(self.alpha[k] + c);
            let g0 = self.ln_gamma_alpha[k];
            body += g - g0;
            magnitude += g.abs() + g0.abs();
        }
        let direct = body - head;
        if magnitude <= MAX_CANCELLATION * direct.abs().max(1.0) {
            return direct;
        }
        let (mut drawn, mut sum) = (0.0, 0.0);
        for (k, c) in counts {
            let a = self.alpha[k];
            // Σ_{j≠k} α_j: `hi − a` is exact when `a` dominates the sum (Sterbenz).
            let others = ((hi - a) + lo).max(0.0);
            sum += ln_rising_shift(a, others + drawn, c);
            drawn += c;
        }
        -sum
    }
}

/// Rows of counts drawn from one multinomial per cluster with a `Dirichlet(α)` prior:
///
/// `ln f = ln Γ(A) − ln Γ(A + N) + Σ_k [ln Γ(α_k + c_k) − ln Γ(α_k)]`,
///
/// `A = Σ_k α_k`, with `c_k` the cluster's total count in category `k` and `N = Σ_k c_k`.
/// This is the probability of the cluster's tokens in one fixed order (the Pólya urn). The
/// probability of the rows as count vectors also has the multinomial coefficients
/// `Σ_rows ln(N_r! / Π_k x_rk!)`; they add the same constant to every tree and never change a
/// merge, so they are included only when asked for (`multinomial_coefficient`), for example
/// to compare evidences with another model.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::models::{ClusterModel, DirichletMultinomial};
///
/// let model = DirichletMultinomial::new(&[1.0], 2, true)?;
/// // Under a uniform prior, every split of 3 draws between 2 categories has probability 1/4.
/// let s = model.leaf_stats(array![2.0, 1.0].view(), 0)?;
/// assert!((model.log_marginal(&s)? - 0.25f64.ln()).abs() < 1e-14);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct DirichletMultinomial {
    prior: DirichletPrior,
    multinomial_coefficient: bool,
}

/// Precomputed terms of one cluster `A` for scoring it against other clusters: `ln f(A)` and
/// the posterior `Dir(α + c_A)`. The predictive `ln f(B | A)` is the Pólya-urn probability of
/// `B`'s tokens under that posterior, a sum over `B`'s nonzero counts only.
#[derive(Debug, Clone)]
pub struct CountQuery {
    log_f: f64,
    posterior: DirichletPrior,
}

/// Sufficient statistics of a Dirichlet–multinomial cluster: the number of rows, the column
/// totals `c_k` (whole numbers stored as `f64`, exact below 2⁵³), the grand total `N`, and the
/// summed log multinomial coefficients `Σ_rows [ln Γ(N_r + 1) − Σ_k ln Γ(x_rk + 1)]`.
#[derive(Debug, Clone, PartialEq)]
pub struct CountStats {
    rows: u32,
    counts: Vec<f64>,
    total: f64,
    log_coefficient: f64,
}

impl CountStats {
    /// Number of rows in the cluster.
    pub fn n_rows(&self) -> u32 {
        self.rows
    }

    /// Total count per category, `c_k`.
    pub fn counts(&self) -> &[f64] {
        &self.counts
    }

    /// Total count over all categories, `N`.
    pub fn total(&self) -> f64 {
        self.total
    }

    /// `Σ_rows ln(N_r! / Π_k x_rk!)`.
    pub fn log_coefficient(&self) -> f64 {
        self.log_coefficient
    }
}

impl DirichletMultinomial {
    /// A model for `d` categories with concentration `alpha` (a scalar shared by every
    /// category, or one value per category); `multinomial_coefficient` adds the rows'
    /// multinomial coefficients to `ln f`.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `alpha` for a wrong length or a value that is not
    /// finite and positive, and on `n_features` for `d = 0`.
    ///
    /// # Examples
    /// ```
    /// use rosetree::models::DirichletMultinomial;
    ///
    /// let model = DirichletMultinomial::new(&[0.5], 3, false)?;
    /// assert_eq!(model.alpha(), &[0.5, 0.5, 0.5]);
    /// assert!(DirichletMultinomial::new(&[1.0, 2.0], 3, false).is_err());
    /// # Ok::<(), rosetree::RoseTreeError>(())
    /// ```
    pub fn new(alpha: &[f64], d: usize, multinomial_coefficient: bool) -> Result<Self> {
        if d == 0 {
            return Err(RoseTreeError::param(
                "n_features",
                "the data need at least one column",
            ));
        }
        let alpha = per_feature("alpha", alpha, d)?;
        let prior = DirichletPrior::new(alpha);
        if !prior.sum.0.is_finite() {
            return Err(RoseTreeError::param(
                "alpha",
                "the concentrations must have a finite sum (it overflows); at this scale only \
                 their ratios matter, so divide them all by the same factor",
            ));
        }
        Ok(Self {
            prior,
            multinomial_coefficient,
        })
    }

    /// Concentration per category.
    pub fn alpha(&self) -> &[f64] {
        &self.prior.alpha
    }

    /// Whether `ln f` includes the multinomial coefficients.
    pub fn multinomial_coefficient(&self) -> bool {
        self.multinomial_coefficient
    }

    /// The summed log multinomial coefficients, if `ln f` includes them.
    #[inline]
    fn coefficient(&self, log_coefficient: f64) -> f64 {
        if self.multinomial_coefficient {
            log_coefficient
        } else {
            0.0
        }
    }
}

/// `[rows, total, ln multinomial coefficient, counts…]`.
impl super::StatsCodec for DirichletMultinomial {
    fn encode_stats(&self, s: &CountStats) -> Vec<f64> {
        let mut v = vec![f64::from(s.rows), s.total, s.log_coefficient];
        v.extend_from_slice(&s.counts);
        v
    }

    fn decode_stats(&self, v: &[f64]) -> Result<CountStats> {
        super::check_stats_len(v, 3 + self.n_features())?;
        Ok(CountStats {
            rows: super::decode_count(v[0])?,
            counts: v[3..].to_vec(),
            total: v[1],
            log_coefficient: v[2],
        })
    }
}

impl ClusterModel for DirichletMultinomial {
    type Stats = CountStats;

    fn n_features(&self) -> usize {
        self.prior.alpha.len()
    }

    /// The row's counts, and its log multinomial coefficient.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidData`] at the first entry that is negative, not a whole number,
    /// infinite or NaN (missing values are not supported by this model).
    fn leaf_stats(&self, row: ArrayView1<'_, f64>, index: usize) -> Result<CountStats> {
        for (j, &v) in row.iter().enumerate() {
            let reason = if v.is_nan() {
                "missing values are not supported by the Dirichlet-multinomial model"
            } else if v < 0.0 {
                "negative count"
            } else if v.is_infinite() {
                "infinite count"
            } else if v != v.round() {
                "non-integer count"
            } else {
                continue;
            };
            return Err(RoseTreeError::data(
                index,
                Some(j),
                format!("{reason} ({v}); the Dirichlet-multinomial model takes whole counts ≥ 0"),
            ));
        }
        // `+ 0.0` turns a `-0.0` count into `0.0`.
        let counts: Vec<f64> = row.iter().map(|&v| v + 0.0).collect();
        let total = counts.iter().sum();
        let log_coefficient =
            ln_gamma(total + 1.0) - counts.iter().map(|&v| ln_gamma(v + 1.0)).sum::<f64>();
        Ok(CountStats {
            rows: 1,
            counts,
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
        Ok(self.prior.log_ratio(nonzero(&s.counts), s.total) + self.coefficient(s.log_coefficient))
    }

    /// `ln f(A ∪ B)` straight from both clusters' totals, without allocating.
    fn log_marginal_merged(&self, a: &CountStats, b: &CountStats) -> Result<f64> {
        let counts = a
            .counts
            .iter()
            .zip(&b.counts)
            .map(|(x, y)| x + y)
            .enumerate()
            .filter(|&(_, c)| c != 0.0);
        let coefficient = self.coefficient(a.log_coefficient + b.log_coefficient);
        Ok(self.prior.log_ratio(counts, a.total + b.total) + coefficient)
    }
}

impl RowQueries for DirichletMultinomial {
    type Query = CountQuery;

    /// `ln f(A)` and the posterior `Dir(α + c_A)`.
    fn query(&self, a: &CountStats) -> CountQuery {
        CountQuery {
            log_f: self
                .log_marginal(a)
                .expect("the Dirichlet-multinomial model never fails"),
            posterior: self.prior.posterior(&a.counts, a.total),
        }
    }

    /// `ln f(A) + ln f(B | A)`: the predictive costs one `ln Γ` per nonzero count of `B`.
    fn log_marginal_query(&self, q: &CountQuery, a: &CountStats, b: &CountStats) -> Result<f64> {
        Ok(q.log_f + self.log_predictive_query(q, a, q.log_f, b)?)
    }

    /// The Pólya-urn probability of `B`'s tokens under the posterior `Dir(α + c_A)` (with
    /// `B`'s multinomial coefficients, if `ln f` includes them).
    fn log_predictive_query(
        &self,
        q: &CountQuery,
        _a: &CountStats,
        _log_f_a: f64,
        b: &CountStats,
    ) -> Result<f64> {
        Ok(
            q.posterior.log_ratio(nonzero(&b.counts), b.total)
                + self.coefficient(b.log_coefficient),
        )
    }
}

/// Hyperparameters `η = (α_1, …, α_d)`:
/// `∂ ln f / ∂α_k = ψ(A) − ψ(A + N) + ψ(α_k + c_k) − ψ(α_k)`, each difference of `ψ` taken by
/// [`digamma_diff`], exact also for huge concentrations and counts.
impl Differentiable for DirichletMultinomial {
    fn n_hyperparameters(&self) -> usize {
        self.prior.alpha.len()
    }

    fn hyperparameters(&self) -> Vec<f64> {
        self.prior.alpha.clone()
    }

    fn with_hyperparameters(&self, eta: &[f64]) -> Result<Self> {
        check_hyperparameter_count(eta, self.n_hyperparameters())?;
        Self::new(eta, eta.len(), self.multinomial_coefficient)
    }

    fn add_gradient(&self, s: &CountStats, weight: f64, grad: &mut [f64]) -> Result<()> {
        let common = -digamma_diff(self.prior.sum.0, s.total);
        for ((g, &a), &c) in grad.iter_mut().zip(&self.prior.alpha).zip(&s.counts) {
            *g += weight * (common + digamma_diff(a, c));
        }
        Ok(())
    }
}

#[cfg(test)]
// Reference values are pasted with all the digits mpmath printed.
#[allow(clippy::excessive_precision)]
mod tests {
    use super::*;
    use crate::math::ln_beta;
    use crate::test_util::{compositions, log_f_every_path};
    use ndarray::{Array2, array};

    fn stats_of(model: &DirichletMultinomial, x: &Array2<f64>) -> CountStats {
        let leaves = model.leaf_stats_all(x.view()).unwrap();
        leaves[1..]
            .iter()
            .fold(leaves[0].clone(), |acc, s| model.merge(&acc, s))
    }

    /// `ln` of the Pólya urn probability of drawing the tokens of `x`, row by row and within a
    /// row category by category: each token of category `k` has probability
    /// `(α_k + c_k)/(A + N)` given the counts `c`, `N` drawn so far.
    fn polya_urn(alpha: &[f64], x: &Array2<f64>) -> f64 {
        let a: f64 = alpha.iter().sum();
        let (mut counts, mut total, mut lp) = (vec![0.0; alpha.len()], 0.0, 0.0);
        for row in x.rows() {
            for (k, &c) in row.iter().enumerate() {
                for _ in 0..c as usize {
                    lp += ((alpha[k] + counts[k]) / (a + total)).ln();
                    counts[k] += 1.0;
                    total += 1.0;
                }
            }
        }
        lp
    }

    #[test]
    fn matches_the_polya_urn_token_by_token() {
        let x = array![
            [2., 0., 1.],
            [0., 3., 1.],
            [1., 1., 0.],
            [0., 0., 0.],
            [4., 0., 2.]
        ];
        for alpha in [vec![0.5, 1.5, 2.0], vec![0.3; 3]] {
            let model = DirichletMultinomial::new(&alpha, 3, false).unwrap();
            let expected = polya_urn(&alpha, &x);
            let got = model.log_marginal(&stats_of(&model, &x)).unwrap();
            assert!((got - expected).abs() < 1e-12, "{got} vs {expected}");
            let l = model.leaf_stats_all(x.view()).unwrap();
            let a = model.merge(&model.merge(&l[0], &l[1]), &l[2]);
            let merged = model
                .log_marginal_merged(&a, &model.merge(&l[3], &l[4]))
                .unwrap();
            assert!((merged - expected).abs() < 1e-12);
        }
    }

    #[test]
    fn with_coefficient_a_row_has_the_dirichlet_multinomial_pmf() {
        // The pmf of a count vector is the sum of the Pólya urn probabilities of all its
        // distinct token orders; by exchangeability each has the same probability, and there
        // are N!/Π x_k! of them. Check it, and that the pmf sums to one over all rows of a
        // given size.
        let alpha = [0.7, 1.2, 2.5];
        let model = DirichletMultinomial::new(&alpha, 3, true).unwrap();
        let ln_fact = |v: f64| ln_gamma(v + 1.0);
        let mut mass = 0.0;
        for row in compositions(5, 3) {
            let x = Array2::from_shape_vec((1, 3), row.clone()).unwrap();
            let orders = ln_fact(5.0) - row.iter().map(|&v| ln_fact(v)).sum::<f64>();
            let expected = orders + polya_urn(&alpha, &x);
            let got = model.log_marginal(&stats_of(&model, &x)).unwrap();
            assert!(
                (got - expected).abs() < 1e-12,
                "{row:?}: {got} vs {expected}"
            );
            mass += got.exp();
        }
        assert!((mass - 1.0).abs() < 1e-12);
    }

    #[test]
    fn two_categories_with_coefficient_is_beta_binomial() {
        // Beta-binomial pmf: C(n, k) B(k + a, n − k + b) / B(a, b).
        let (a, b) = (1.3, 0.6);
        let model = DirichletMultinomial::new(&[a, b], 2, true).unwrap();
        for (k, n) in [(3.0, 5.0), (0.0, 4.0), (7.0, 7.0), (0.0, 0.0)] {
            let s = model.leaf_stats(array![k, n - k].view(), 0).unwrap();
            let ln_choose = ln_gamma(n + 1.0) - ln_gamma(k + 1.0) - ln_gamma(n - k + 1.0);
            let expected = ln_choose + ln_beta(k + a, n - k + b) - ln_beta(a, b);
            assert!((model.log_marginal(&s).unwrap() - expected).abs() < 1e-12);
        }
    }

    #[test]
    fn coefficient_is_summed_over_rows() {
        let x = array![[2., 1.], [0., 3.], [1., 1.]];
        let with = DirichletMultinomial::new(&[0.9], 2, true).unwrap();
        let without = DirichletMultinomial::new(&[0.9], 2, false).unwrap();
        // ln(3!/(2!1!)) + ln(3!/3!) + ln(2!/(1!1!)) = ln 3 + ln 2.
        let coefficient = 6f64.ln();
        let (sw, so) = (stats_of(&with, &x), stats_of(&without, &x));
        assert!((sw.log_coefficient() - coefficient).abs() < 1e-14);
        let diff = with.log_marginal(&sw).unwrap() - without.log_marginal(&so).unwrap();
        assert!((diff - coefficient).abs() < 1e-12);
        let l = with.leaf_stats_all(x.view()).unwrap();
        let merged = with
            .log_marginal_merged(&with.merge(&l[0], &l[1]), &l[2])
            .unwrap();
        assert!((merged - with.log_marginal(&sw).unwrap()).abs() < 1e-12);
        assert!(with.multinomial_coefficient() && !without.multinomial_coefficient());
    }

    #[test]
    fn merge_order_does_not_matter() {
        let x = array![[2., 0., 1.], [0., 3., 1.], [1., 1., 0.], [5., 0., 2.]];
        let model = DirichletMultinomial::new(&[0.4, 1.0, 2.0], 3, true).unwrap();
        let l = model.leaf_stats_all(x.view()).unwrap();
        let left = l[1..]
            .iter()
            .fold(l[0].clone(), |acc, s| model.merge(&acc, s));
        let right = model.merge(&model.merge(&l[3], &l[1]), &model.merge(&l[2], &l[0]));
        assert_eq!(
            (left.n_rows(), left.counts(), left.total()),
            (4, &[8., 4., 4.][..], 16.)
        );
        assert_eq!(
            (right.n_rows(), right.counts(), right.total()),
            (4, left.counts(), 16.)
        );
        assert!((left.log_coefficient() - right.log_coefficient()).abs() < 1e-13);
        let (fl, fr) = (
            model.log_marginal(&left).unwrap(),
            model.log_marginal(&right).unwrap(),
        );
        assert!((fl - fr).abs() < 1e-12 * fl.abs());
    }

    #[test]
    fn huge_concentrations_and_counts_match_mpmath() {
        // References: mpmath with mp.mp.dps = 800 and
        // dm(alpha, c) = mp.loggamma(A) - mp.loggamma(A + N)
        //     + sum(mp.loggamma(mpf(a) + k) - mp.loggamma(mpf(a)) for a, k in zip(alpha, c)),
        // A = sum of alpha, N = sum of c (the column totals of the rows).
        let cases: [(Vec<f64>, Array2<f64>, f64); 4] = [
            (
                vec![1e15; 3],
                array![[3., 0., 2.], [1., 1., 0.]],
                // dm([1e15] * 3, [4, 1, 2])
                -7.690_286_020_676_767_839_8,
            ),
            (
                vec![0.5; 3],
                array![[5e14, 1e15, 3.], [5e14, 1e15 + 1.0, 4.]],
                // dm([0.5] * 3, [1e15, 2e15 + 1, 7])
                -1_909_542_504_884_717.344_5,
            ),
            (
                vec![1e300, 1e-300, 2.5],
                array![[5., 1., 4e14], [0., 2., 6e14]],
                // dm([1e300, 1e-300, 2.5], [5, 3, 1e15])
                -657_236_751_503_305_712.69,
            ),
            (
                vec![0.7, 1.2, 2.5],
                array![[2., 0., 1.], [1., 3., 0.]],
                // dm([0.7, 1.2, 2.5], [3, 3, 1])
                0.0,
            ),
        ];
        for (alpha, x, want) in &cases[..3] {
            let model = DirichletMultinomial::new(alpha, 3, false).unwrap();
            for got in log_f_every_path(&model, x) {
                assert!(
                    (got - want).abs() <= 1e-14 * want.abs(),
                    "{alpha:?}: {got} vs {want}"
                );
            }
        }
        // Moderate values take the direct formula; the Pólya urn is the reference there.
        let (alpha, x, _) = &cases[3];
        let model = DirichletMultinomial::new(alpha, 3, false).unwrap();
        let want = polya_urn(alpha, x);
        for got in log_f_every_path(&model, x) {
            assert!((got - want).abs() <= 1e-13 * want.abs(), "{got} vs {want}");
        }
        // The plain ln Γ differences have no digit left at α = 10¹⁵.
        let naive = ln_gamma(3e15) - ln_gamma(3e15 + 7.0)
            + ln_gamma(1e15 + 4.0)
            + ln_gamma(1e15 + 1.0)
            + ln_gamma(1e15 + 2.0)
            - 3.0 * ln_gamma(1e15);
        assert!((naive - cases[0].2).abs() > 0.1);
    }

    #[test]
    fn gradient_at_a_huge_concentration_matches_mpmath() {
        let model = DirichletMultinomial::new(&[1e15], 3, false).unwrap();
        let s = stats_of(&model, &array![[3., 0., 2.], [1., 1., 0.]]);
        let mut grad = vec![0.0; 3];
        model.add_gradient(&s, 1.0, &mut grad).unwrap();
        // A = mpf(3e15); mp.digamma(A) - mp.digamma(A + 7) + mp.digamma(mpf(1e15) + c) - mp.digamma(mpf(1e15))
        // for c = 4, 1, 2
        let want = [
            1.666_666_666_666_663e-15,
            -1.333_333_333_333_331e-15,
            -3.333_333_333_333_32e-16,
        ];
        for (g, w) in grad.iter().zip(want) {
            assert!((g - w).abs() <= 1e-13 * w.abs(), "{g:e} vs {w:e}");
        }
    }

    #[test]
    fn overflowing_concentrations_are_rejected() {
        match DirichletMultinomial::new(&[1e308], 3, false) {
            Err(RoseTreeError::InvalidParameter { name, reason }) => {
                assert_eq!(name, "alpha");
                assert!(reason.contains("overflows"), "{reason}");
            }
            other => panic!("expected InvalidParameter, got {other:?}"),
        }
        // One huge category is fine: its share of the prior is all but one.
        let model = DirichletMultinomial::new(&[1.7e308, 1.0], 2, false).unwrap();
        let s = model.leaf_stats(array![2.0, 0.0].view(), 0).unwrap();
        // ln[(α₁ (α₁ + 1)) / ((α₁ + 1)(α₁ + 2))] = ln(α₁ / (α₁ + 2)) ≈ −2/α₁ ≈ 0
        assert!(model.log_marginal(&s).unwrap().abs() < 1e-300);
        let s = model.leaf_stats(array![0.0, 1.0].view(), 0).unwrap();
        let want = -(1.7e308_f64 + 1.0).ln();
        assert!((model.log_marginal(&s).unwrap() - want).abs() < 1e-14 * want.abs());
    }

    #[test]
    fn rejects_bad_counts() {
        let model = DirichletMultinomial::new(&[1.0], 3, false).unwrap();
        for (bad, message) in [
            (-1.0, "negative count"),
            (f64::NEG_INFINITY, "negative count"),
            (0.5, "non-integer count"),
            (f64::INFINITY, "infinite count"),
            (f64::NAN, "missing values are not supported"),
        ] {
            let err = model
                .leaf_stats(array![1.0, bad, 2.0].view(), 3)
                .unwrap_err();
            assert!(
                matches!(
                    err,
                    RoseTreeError::InvalidData {
                        row: 3,
                        column: Some(1),
                        ..
                    }
                ),
                "{bad}: {err}"
            );
            assert!(err.to_string().contains(message), "{err}");
        }
        let err = model
            .leaf_stats_all(array![[1., 2., 3.], [0., 0., 1.5]].view())
            .unwrap_err();
        assert!(matches!(
            err,
            RoseTreeError::InvalidData {
                row: 1,
                column: Some(2),
                ..
            }
        ));
        // Zero rows and `-0.0` are fine.
        let s = model.leaf_stats(array![0.0, -0.0, 0.0].view(), 0).unwrap();
        assert_eq!((s.total(), s.log_coefficient()), (0.0, 0.0));
        assert_eq!(model.log_marginal(&s).unwrap(), 0.0);
    }

    #[test]
    fn rejects_bad_priors_by_name() {
        let name = |r: Result<DirichletMultinomial>| match r {
            Err(RoseTreeError::InvalidParameter { name, .. }) => name,
            other => panic!("expected InvalidParameter, got {other:?}"),
        };
        for alpha in [
            &[0.0][..],
            &[-1.0],
            &[f64::NAN],
            &[f64::INFINITY],
            &[1.0, 2.0],
            &[],
        ] {
            assert_eq!(name(DirichletMultinomial::new(alpha, 3, false)), "alpha");
        }
        assert_eq!(
            name(DirichletMultinomial::new(&[1.0], 0, false)),
            "n_features"
        );
        let model = DirichletMultinomial::new(&[1.0, 2.0, 3.0], 3, false).unwrap();
        assert_eq!(
            (model.alpha(), model.n_features()),
            (&[1.0, 2.0, 3.0][..], 3)
        );
    }
}
