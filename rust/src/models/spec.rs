//! Cluster models described by their hyperparameters, with the data-driven defaults left
//! open until the data are known: what the Python classes in `rosetree.config` and the C
//! interface's model handles hold, resolved by [`ModelSpec::build`] for given data.

use ndarray::ArrayView2;

use super::{
    BetaBernoulli, ColumnMoments, DEFAULT_KAPPA0, DirichletMultinomial, NormalGamma,
    NormalInverseWishart,
};
use crate::error::{Result, RoseTreeError};

/// The built-in conjugate families, listed once: the variant of [`Conjugate`], the Rust model
/// type and the family's name. Calls `$callback!` with the bracketed `$args` followed by the
/// list, so that code generic over [`super::ClusterModel`] is written once and
/// monomorphised per family; adding a family is one line here and its arms in
/// [`ModelSpec`] and [`ModelSpec::build`].
#[macro_export]
macro_rules! conjugate_families {
    ($callback:ident, $($args:tt)*) => {
        $callback! { [$($args)*]
            Bernoulli: $crate::models::BetaBernoulli = "bernoulli";
            Gaussian: $crate::models::NormalInverseWishart = "normal_inverse_wishart";
            Counts: $crate::models::DirichletMultinomial = "dirichlet_multinomial";
            NormalGamma: $crate::models::NormalGamma = "normal_gamma";
        }
    };
}

macro_rules! conjugate_enum {
    ([] $($variant:ident: $model:ty = $name:literal;)*) => {
        /// A built conjugate cluster model of one of the families of
        /// [`conjugate_families!`](crate::conjugate_families).
        #[derive(Debug, Clone)]
        pub enum Conjugate {
            $(
                #[doc = concat!("The `", $name, "` family.")]
                $variant($model),
            )*
        }

        impl Conjugate {
            /// The family's name.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => $name,)*
                }
            }
        }
    };
}
conjugate_families!(conjugate_enum,);

/// Evaluates `$body` with `$m` bound (mutably) to the concrete model inside a
/// [`Conjugate`], so generic code is monomorphised once per family.
#[macro_export]
macro_rules! with_conjugate {
    ($model:expr, $m:ident => $body:expr) => {
        match $model {
            $crate::models::Conjugate::Bernoulli(mut $m) => $body,
            $crate::models::Conjugate::Gaussian(mut $m) => $body,
            $crate::models::Conjugate::Counts(mut $m) => $body,
            $crate::models::Conjugate::NormalGamma(mut $m) => $body,
        }
    };
}

/// A conjugate cluster model's hyperparameters, `None` where the model's data-driven
/// default applies; [`ModelSpec::build`] resolves the defaults from the data and checks the
/// lengths against its columns.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelSpec {
    /// Independent beta–Bernoulli features; `alpha` and `beta` have one value (shared) or
    /// one per feature, and default to the empirical-Bayes choice of
    /// [`BetaBernoulli::from_frequencies`].
    BetaBernoulli {
        /// Prior pseudo-counts of ones.
        alpha: Option<Vec<f64>>,
        /// Prior pseudo-counts of zeros.
        beta: Option<Vec<f64>>,
    },
    /// Gaussian clusters under a Normal–inverse-Wishart prior
    /// ([`NormalInverseWishart::from_data`] gives the defaults).
    NormalInverseWishart {
        /// Prior mean, one value per feature.
        mu0: Option<Vec<f64>>,
        /// Prior pseudo-count of the mean.
        kappa0: Option<f64>,
        /// Degrees of freedom (default `d + 2`).
        nu0: Option<f64>,
        /// Scale matrix.
        psi0: Option<Psi0>,
    },
    /// Independent Normal–Gamma features ([`NormalGamma::with_defaults`]).
    NormalGamma {
        /// Prior means.
        m0: Option<Vec<f64>>,
        /// Prior pseudo-count of the means.
        kappa0: Option<f64>,
        /// Gamma shape of the precisions.
        a0: Option<f64>,
        /// Gamma rates of the precisions (one value when `shared`).
        b0: Option<Vec<f64>>,
        /// One precision for all features of a cluster
        /// ([`NormalGamma::with_shared_precision`]).
        shared: bool,
    },
    /// Dirichlet–multinomial rows of counts.
    DirichletMultinomial {
        /// Dirichlet concentration, one value (shared) or one per feature.
        alpha: Vec<f64>,
        /// Whether the multinomial coefficient of each row is part of `f(D)`.
        coefficient: bool,
    },
}

/// The scale matrix of a Normal–inverse-Wishart prior: a full matrix (row-major) or its
/// diagonal.
#[derive(Debug, Clone, PartialEq)]
pub enum Psi0 {
    /// `d × d`, row-major.
    Full(Vec<f64>),
    /// The `d` diagonal entries.
    Diagonal(Vec<f64>),
}

impl ModelSpec {
    /// The model this specification describes for data `x`, whose column count fixes the
    /// dimension and whose values give the data-driven defaults.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] naming the hyperparameter that is out of its
    /// domain or of the wrong length.
    pub fn build(&self, x: ArrayView2<'_, f64>) -> Result<Conjugate> {
        let d = x.ncols();
        Ok(match self {
            Self::BetaBernoulli { alpha, beta } => {
                bernoulli(alpha, beta, d, || ColumnMoments::dense(x))?
            }
            Self::DirichletMultinomial { alpha, coefficient } => {
                Conjugate::Counts(DirichletMultinomial::new(alpha, d, *coefficient)?)
            }
            Self::NormalInverseWishart {
                mu0,
                kappa0,
                nu0,
                psi0,
            } => Conjugate::Gaussian(normal_inverse_wishart(
                mu0.as_deref(),
                *kappa0,
                *nu0,
                psi0.as_ref(),
                x,
            )?),
            Self::NormalGamma { .. } => self.normal_gamma(d, || ColumnMoments::dense(x))?,
        })
    }

    /// As [`ModelSpec::build`] for data given as small whole numbers (`bool` or `uint8`
    /// arrays): the moments behind data-driven defaults are read in place, without a
    /// floating-point copy (except for the Normal–inverse-Wishart defaults, which need one).
    ///
    /// # Errors
    /// As [`ModelSpec::build`].
    pub fn build_bytes(&self, x: ArrayView2<'_, u8>) -> Result<Conjugate> {
        let d = x.ncols();
        let moments = || Ok(ColumnMoments::bytes(x));
        match self {
            Self::BetaBernoulli { alpha, beta } => bernoulli(alpha, beta, d, moments),
            Self::NormalGamma { .. } => self.normal_gamma(d, moments),
            Self::NormalInverseWishart { .. } => self.build(x.mapv(f64::from).view()),
            spec => spec.build(ndarray::Array2::<f64>::zeros((0, d)).view()),
        }
    }

    /// As [`ModelSpec::build`] for data given as a CSR matrix with `n_cols` columns: the
    /// moments behind data-driven defaults are read from the sparse entries, without a dense
    /// copy.
    ///
    /// # Errors
    /// As [`ModelSpec::build`].
    pub fn build_csr(
        &self,
        indptr: &[i64],
        indices: &[i64],
        data: &[f64],
        n_cols: usize,
    ) -> Result<Conjugate> {
        let moments = || ColumnMoments::csr(indptr, indices, data, n_cols);
        match self {
            Self::BetaBernoulli { alpha, beta } => bernoulli(alpha, beta, n_cols, moments),
            Self::NormalGamma { .. } => self.normal_gamma(n_cols, moments),
            // The other models' defaults do not look at the data, only at its shape.
            spec => spec.build(ndarray::Array2::<f64>::zeros((0, n_cols)).view()),
        }
    }
}

/// The Normal–inverse-Wishart model for `x`: the given hyperparameters, the others from
/// [`NormalInverseWishart::from_data`] (computed only when needed).
fn normal_inverse_wishart(
    mu0: Option<&[f64]>,
    kappa0: Option<f64>,
    nu0: Option<f64>,
    psi0: Option<&Psi0>,
    x: ArrayView2<'_, f64>,
) -> Result<NormalInverseWishart> {
    let d = x.ncols();
    let kappa0 = kappa0.unwrap_or(DEFAULT_KAPPA0);
    let nu0 = nu0.unwrap_or(d as f64 + 2.0);
    if let Some(mu0) = mu0.filter(|m| m.len() != d) {
        return Err(RoseTreeError::param(
            "mu0",
            format!("expected {d} values (one per feature), got {}", mu0.len()),
        ));
    }
    // Only the data-driven parts of the default prior need the data.
    let defaults = || NormalInverseWishart::from_data(x, Some(kappa0), Some(nu0));
    match psi0 {
        None => match mu0 {
            Some(mu0) => defaults()?.with_mu0(mu0.to_vec()),
            None => defaults(),
        },
        Some(psi0) => {
            let mu0 = match mu0 {
                Some(mu0) => mu0.to_vec(),
                None => defaults()?.mu0().to_vec(),
            };
            match psi0 {
                Psi0::Diagonal(diag) => {
                    NormalInverseWishart::new_diagonal(mu0, kappa0, nu0, diag.clone())
                }
                Psi0::Full(full) => NormalInverseWishart::new(mu0, kappa0, nu0, full.clone()),
            }
        }
    }
}

/// The beta–Bernoulli model for `d` features; `moments` (of the data) is computed only when
/// `alpha` or `beta` is left to its data-driven default.
fn bernoulli(
    alpha: &Option<Vec<f64>>,
    beta: &Option<Vec<f64>>,
    d: usize,
    moments: impl FnOnce() -> Result<ColumnMoments>,
) -> Result<Conjugate> {
    let model = match (alpha, beta) {
        (Some(alpha), Some(beta)) => BetaBernoulli::new(alpha, beta, d)?,
        (alpha, beta) => {
            let moments = moments()?;
            if moments.count.len() != d {
                return Err(RoseTreeError::param("X", format!("expected {d} columns")));
            }
            BetaBernoulli::from_frequencies(&moments, alpha.as_deref(), beta.as_deref())?
        }
    };
    Ok(Conjugate::Bernoulli(model))
}

impl ModelSpec {
    /// The Normal–Gamma model of this specification for `d` features (with one precision
    /// shared by them where `shared`); `moments` (of the data) is computed only when `m0`
    /// or `b0` is left to its data-driven default.
    fn normal_gamma(
        &self,
        d: usize,
        moments: impl FnOnce() -> Result<ColumnMoments>,
    ) -> Result<Conjugate> {
        let Self::NormalGamma {
            m0,
            kappa0,
            a0,
            b0,
            shared,
        } = self
        else {
            return Err(RoseTreeError::param(
                "model",
                "not a Normal-Gamma specification",
            ));
        };
        let (kappa0, a0, shared) = (*kappa0, *a0, *shared);
        if let Some(b0) = b0.as_ref().filter(|b| shared && b.len() != 1) {
            return Err(RoseTreeError::param(
                "b0",
                format!(
                    "with a shared precision b0 is one number, got {} values",
                    b0.len()
                ),
            ));
        }
        let model = match (m0, b0) {
            (Some(m0), Some(b0)) => {
                let kappa0 = kappa0.unwrap_or(NormalGamma::DEFAULT_KAPPA0);
                NormalGamma::new(m0, kappa0, a0.unwrap_or(NormalGamma::DEFAULT_A0), b0, d)?
                    .with_shared_precision(shared)?
            }
            (m0, b0) => {
                let moments = moments()?;
                if !moments.count.is_empty() && moments.count.iter().all(|&c| c == 0) {
                    return Err(RoseTreeError::param(
                        "X",
                        "needs observed values to derive the default Normal-Gamma prior (give m0 and b0)",
                    ));
                }
                if shared {
                    let b0 = b0.as_ref().map(|b| b[0]);
                    NormalGamma::shared_with_defaults(&moments, m0.clone(), kappa0, a0, b0)?
                } else {
                    NormalGamma::with_defaults(&moments, m0.clone(), kappa0, a0, b0.clone())?
                }
            }
        };
        Ok(Conjugate::NormalGamma(model))
    }
}

#[cfg(test)]
mod tests {
    use ndarray::array;

    use super::*;
    use crate::models::ClusterModel;

    /// Given hyperparameters reach the model unchanged: `f(D)` of a built model equals that
    /// of the model constructed directly.
    #[test]
    fn explicit_hyperparameters_build_the_model_they_name() {
        let x = array![[1.0, 0.0, 1.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
        let spec = ModelSpec::BetaBernoulli {
            alpha: Some(vec![0.7]),
            beta: Some(vec![1.3]),
        };
        let Conjugate::Bernoulli(built) = spec.build(x.view()).unwrap() else {
            panic!("expected the Bernoulli family");
        };
        let direct = BetaBernoulli::new(&[0.7], &[1.3], 3).unwrap();
        let (a, b) = (
            built.leaf_stats_all(x.view()).unwrap(),
            direct.leaf_stats_all(x.view()).unwrap(),
        );
        let merged = |m: &BetaBernoulli, s: &[crate::models::BernoulliStats]| {
            let all = s
                .iter()
                .skip(1)
                .fold(s[0].clone(), |acc, t| m.merge(&acc, t));
            m.log_marginal(&all).unwrap()
        };
        assert_eq!(merged(&built, &a), merged(&direct, &b));
        // By hand, per column: B(α + ones, β + zeros) / B(α, β).
        let ln_beta = |a: f64, b: f64| libm::lgamma(a) + libm::lgamma(b) - libm::lgamma(a + b);
        let by_hand = [(2.0, 1.0), (1.0, 2.0), (2.0, 1.0)]
            .iter()
            .map(|&(ones, zeros)| ln_beta(0.7 + ones, 1.3 + zeros) - ln_beta(0.7, 1.3))
            .sum::<f64>();
        assert!((merged(&built, &a) - by_hand).abs() < 1e-12);
    }

    #[test]
    fn wrong_lengths_name_the_hyperparameter() {
        let x = array![[0.5, 1.0], [1.5, -1.0]];
        let spec = ModelSpec::NormalInverseWishart {
            mu0: Some(vec![0.0; 3]),
            kappa0: None,
            nu0: None,
            psi0: None,
        };
        let err = spec.build(x.view()).unwrap_err();
        assert!(
            matches!(&err, RoseTreeError::InvalidParameter { name, .. } if name == "mu0"),
            "{err}"
        );
    }
}
