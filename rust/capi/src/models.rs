//! Cluster models of the rose-tree family: hyperparameters now, data-driven defaults
//! resolved when a fit sees the data (as the Python classes of `rosetree.config` do).
//!
//! A hyperparameter array is left to its default by a null pointer with length 0, a scalar
//! by NaN. Arrays hold one value (shared by every feature) or one per feature.

use rosetree::models::{ModelSpec, Psi0};

use crate::buffer;
use crate::error::{Result, RtStatus, guard};
use crate::handle::{self, Handle};

/// A conjugate cluster model for `rt_brt_fit`.
pub struct RtModel {
    pub(crate) spec: ModelSpec,
}

impl Handle for RtModel {
    const NAME: &'static str = "rt_model";
}

fn scalar(value: f64) -> Option<f64> {
    (!value.is_nan()).then_some(value)
}

fn owned(values: Option<&[f64]>) -> Option<Vec<f64>> {
    values.map(<[f64]>::to_vec)
}

/// Independent beta–Bernoulli features for 0/1 data (BRT §3): pseudo-counts `alpha` of
/// ones and `beta` of zeros, each defaulting to the empirical-Bayes choice from the data's
/// column frequencies.
#[unsafe(no_mangle)]
pub extern "C" fn rt_model_beta_bernoulli(
    alpha: *const f64,
    n_alpha: usize,
    beta: *const f64,
    n_beta: usize,
    out: *mut *mut RtModel,
) -> RtStatus {
    guard(|| {
        let spec = ModelSpec::BetaBernoulli {
            alpha: owned(buffer::optional(alpha, n_alpha, "alpha")?),
            beta: owned(buffer::optional(beta, n_beta, "beta")?),
        };
        handle::emit(out, "out", RtModel { spec })
    })
}

/// Dirichlet–multinomial rows of counts with concentration `alpha` (required);
/// `multinomial_coefficient` nonzero includes each row's multinomial coefficient in `f(D)`.
#[unsafe(no_mangle)]
pub extern "C" fn rt_model_dirichlet_multinomial(
    alpha: *const f64,
    n_alpha: usize,
    multinomial_coefficient: bool,
    out: *mut *mut RtModel,
) -> RtStatus {
    guard(|| {
        let spec = ModelSpec::DirichletMultinomial {
            alpha: buffer::input(alpha, n_alpha, "alpha")?.to_vec(),
            coefficient: multinomial_coefficient,
        };
        handle::emit(out, "out", RtModel { spec })
    })
}

/// Independent Normal–Gamma features for real values: means `m0`, their pseudo-count
/// `kappa0`, Gamma shape `a0` and rates `b0` of the precisions; `m0` and `b0` default to
/// the data's column means and a fraction of their variances.
#[unsafe(no_mangle)]
pub extern "C" fn rt_model_normal_gamma(
    m0: *const f64,
    n_m0: usize,
    kappa0: f64,
    a0: f64,
    b0: *const f64,
    n_b0: usize,
    out: *mut *mut RtModel,
) -> RtStatus {
    let b0 = || Ok(owned(buffer::optional(b0, n_b0, "b0")?));
    normal_gamma(m0, n_m0, kappa0, a0, b0, false, out)
}

/// Emits the Normal–Gamma model of these hyperparameters, `b0` read by `b0` inside the
/// guard (one precision per feature, or one for all where `shared`).
fn normal_gamma(
    m0: *const f64,
    n_m0: usize,
    kappa0: f64,
    a0: f64,
    b0: impl FnOnce() -> Result<Option<Vec<f64>>>,
    shared: bool,
    out: *mut *mut RtModel,
) -> RtStatus {
    guard(|| {
        let spec = ModelSpec::NormalGamma {
            m0: owned(buffer::optional(m0, n_m0, "m0")?),
            kappa0: scalar(kappa0),
            a0: scalar(a0),
            b0: b0()?,
            shared,
        };
        handle::emit(out, "out", RtModel { spec })
    })
}

/// Real values in spherical Normal–Gamma clusters: one precision shared by all features
/// of a cluster (so that a cluster is a ball, as in Ward's criterion), with means `m0`,
/// their pseudo-count `kappa0`, Gamma shape `a0` and rate `b0` (one number) of the
/// precision. NaN leaves a number to its default; `m0` defaults to the data's column means
/// and `b0` to a fraction of their mean variance. For many columns in one unit (pixels,
/// principal components, embeddings).
#[unsafe(no_mangle)]
pub extern "C" fn rt_model_normal_gamma_shared(
    m0: *const f64,
    n_m0: usize,
    kappa0: f64,
    a0: f64,
    b0: f64,
    out: *mut *mut RtModel,
) -> RtStatus {
    normal_gamma(
        m0,
        n_m0,
        kappa0,
        a0,
        || Ok(scalar(b0).map(|b| vec![b])),
        true,
        out,
    )
}

/// Gaussian clusters with full covariance under a Normal–inverse-Wishart prior: mean `mu0`
/// (one value per feature), its pseudo-count `kappa0`, degrees of freedom `nu0` and scale
/// `psi0`, given by its `d` diagonal entries or, when `psi0_full` is nonzero, as a
/// row-major `d × d` matrix. Left out, `mu0` and `psi0` come from the data.
#[unsafe(no_mangle)]
pub extern "C" fn rt_model_normal_inverse_wishart(
    mu0: *const f64,
    n_mu0: usize,
    kappa0: f64,
    nu0: f64,
    psi0: *const f64,
    n_psi0: usize,
    psi0_full: bool,
    out: *mut *mut RtModel,
) -> RtStatus {
    guard(|| {
        let psi0 = owned(buffer::optional(psi0, n_psi0, "psi0")?).map(|values| {
            if psi0_full {
                Psi0::Full(values)
            } else {
                Psi0::Diagonal(values)
            }
        });
        let spec = ModelSpec::NormalInverseWishart {
            mu0: owned(buffer::optional(mu0, n_mu0, "mu0")?),
            kappa0: scalar(kappa0),
            nu0: scalar(nu0),
            psi0,
        };
        handle::emit(out, "out", RtModel { spec })
    })
}

/// Releases `model`.
#[unsafe(no_mangle)]
pub extern "C" fn rt_model_free(model: *mut RtModel) -> RtStatus {
    guard(|| handle::release(model, "model"))
}
