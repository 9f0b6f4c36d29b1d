//! The options of each family's fit. A `*_new` function gives the documented defaults; the
//! setters change one option each; values are checked by the fit, whose error names the
//! option.

use rosetree::brt::{BrtParams, Mixing};
use rosetree::coalescent::{CoalescentParams, Inference};
use rosetree::pydt::PydtParams;

use crate::error::{Error, Result, RtStatus, guard};
use crate::handle::{self, Handle};
use crate::interrupt::Interrupt;

/// How a rose tree's mixing proportion `π_T` is set (BRT eq 1.7 and §2.2).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtMixing {
    /// `π_T = 1 − (1 − γ)^(n_c − 1)` for a node with `n_c` children; the value is `γ`.
    Brt = 0,
    /// A constant `π_T = γ` (BHC-γ on binary trees); the value is `γ`.
    Gamma = 1,
    /// Heller & Ghahramani's Dirichlet-process rule; the value is the concentration `α`.
    Dp = 2,
}

/// Options of `rt_brt_fit`.
pub struct RtBrtParams {
    pub(crate) params: BrtParams,
    pub(crate) interrupt: Option<Interrupt>,
    /// Learn the hyperparameters with the tree: `(tie, n_restarts, seed)`.
    pub(crate) learn: Option<(bool, usize, u64)>,
}

impl Handle for RtBrtParams {
    const NAME: &'static str = "rt_brt_params";
}

/// Options of a Bayesian rose tree fit: BRT mixing with `γ = 0.5`, rose trees (not binary),
/// the exact greedy search, every core.
#[unsafe(no_mangle)]
pub extern "C" fn rt_brt_params_new(out: *mut *mut RtBrtParams) -> RtStatus {
    guard(|| {
        let params = BrtParams::new(Mixing::Brt { gamma: 0.5 });
        let interrupt = None;
        let learn = None;
        handle::emit(
            out,
            "out",
            RtBrtParams {
                params,
                interrupt,
                learn,
            },
        )
    })
}

/// Sets the mixing rule (an `rt_mixing` value) and its value (`γ` or the DP concentration).
#[unsafe(no_mangle)]
pub extern "C" fn rt_brt_params_set_mixing(
    params: *mut RtBrtParams,
    mixing: i32,
    value: f64,
) -> RtStatus {
    guard(|| {
        let params = &mut handle::get_mut(params, "params")?.params;
        params.mixing = match mixing {
            m if m == RtMixing::Brt as i32 => Mixing::Brt { gamma: value },
            m if m == RtMixing::Gamma as i32 => Mixing::Gamma { gamma: value },
            m if m == RtMixing::Dp as i32 => Mixing::Dp { alpha: value },
            m => {
                return Err(Error::param(
                    "mixing",
                    format!("{m} is not an rt_mixing value"),
                ));
            }
        };
        Ok(())
    })
}

/// Nonzero `binary` builds binary trees only: Bayesian hierarchical clustering.
#[unsafe(no_mangle)]
pub extern "C" fn rt_brt_params_set_binary(params: *mut RtBrtParams, binary: bool) -> RtStatus {
    guard(|| {
        handle::get_mut(params, "params")?.params.binary = binary;
        Ok(())
    })
}

/// Worker threads; 0 (the default) uses every core. The result does not depend on it.
#[unsafe(no_mangle)]
pub extern "C" fn rt_brt_params_set_n_threads(
    params: *mut RtBrtParams,
    n_threads: usize,
) -> RtStatus {
    guard(|| {
        handle::get_mut(params, "params")?.params.n_threads = (n_threads > 0).then_some(n_threads);
        Ok(())
    })
}

/// Nonzero `learn` learns the model's hyperparameters and the mixing rule's value with the
/// tree (BRT §1.4.2; `learn_hyperparameters=True` of the Python estimator): coordinate
/// ascent between the tree search and L-BFGS-B on the evidence, from the model's
/// hyperparameters and the value set by `rt_brt_params_set_mixing` (which must then lie
/// strictly inside its domain). Nonzero `tie` learns one value per hyperparameter shared by
/// all features; `n_restarts` more starts are drawn around the first from `seed`. The fit's
/// tree, score and predictions are then those of the learnt hyperparameters. Off by default.
#[unsafe(no_mangle)]
pub extern "C" fn rt_brt_params_set_learning(
    params: *mut RtBrtParams,
    learn: bool,
    tie: bool,
    n_restarts: usize,
    seed: u64,
) -> RtStatus {
    guard(|| {
        handle::get_mut(params, "params")?.learn = learn.then_some((tie, n_restarts, seed));
        Ok(())
    })
}

/// Releases `params`.
#[unsafe(no_mangle)]
pub extern "C" fn rt_brt_params_free(params: *mut RtBrtParams) -> RtStatus {
    guard(|| handle::release(params, "params"))
}

/// The coalescent's greedy searches (Teh, Daumé & Roy 2007, §4.2).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtCoalescentInference {
    /// Greedy-Rate1, `O(n²)`.
    GreedyRate1 = 0,
    /// Greedy-MaxProb, `O(n³)`.
    GreedyMaxProb = 1,
    /// Greedy-MinDuration, `O(n³)`.
    GreedyMinDuration = 2,
}

/// Options of `rt_coalescent_fit`: Brownian diffusion with rate `Λ = lambda` per
/// unit time in every feature, observation noise `η` (each row is observed with variance
/// `ηΛ` around the diffusion's value at its leaf), and the search.
pub struct RtCoalescentParams {
    pub(crate) lambda: f64,
    pub(crate) noise: f64,
    /// The most rounds of learning `Λ` with the tree; 0: `Λ` fixed.
    pub(crate) learn_rounds: usize,
    pub(crate) params: CoalescentParams,
    pub(crate) interrupt: Option<Interrupt>,
}

impl Handle for RtCoalescentParams {
    const NAME: &'static str = "rt_coalescent_params";
}

/// Options of a coalescent fit: diffusion rate `lambda` (> 0), no observation noise (the
/// paper's model), Greedy-Rate1, every core.
#[unsafe(no_mangle)]
pub extern "C" fn rt_coalescent_params_new(
    lambda: f64,
    out: *mut *mut RtCoalescentParams,
) -> RtStatus {
    guard(|| {
        let params = RtCoalescentParams {
            lambda,
            noise: 0.0,
            learn_rounds: 0,
            params: CoalescentParams::new(),
            interrupt: None,
        };
        handle::emit(out, "out", params)
    })
}

/// Sets the observation noise `η ≥ 0`, in units of `Λ`. Without noise (0), equal rows have
/// infinite density and are refused.
#[unsafe(no_mangle)]
pub extern "C" fn rt_coalescent_params_set_noise(
    params: *mut RtCoalescentParams,
    noise: f64,
) -> RtStatus {
    guard(|| {
        handle::get_mut(params, "params")?.noise = noise;
        Ok(())
    })
}

/// Nonzero `rounds` learns the rate `Λ = λI` with the tree (Teh et al. §4.4;
/// `learn_hyperparameters=True` of the Python estimator, `hyper_iter=rounds`): coordinate
/// ascent between `λ`'s posterior mode given the tree, under the weak inverse-gamma prior
/// whose mode is the `lambda` given to `rt_coalescent_params_new`, and the search under
/// `λ`, at most `rounds` rounds. The fit's tree, score and predictions are then those of
/// the learnt `λ`. Not for data with missing entries. 0 (the default): `λ` fixed.
#[unsafe(no_mangle)]
pub extern "C" fn rt_coalescent_params_set_learning(
    params: *mut RtCoalescentParams,
    rounds: usize,
) -> RtStatus {
    guard(|| {
        handle::get_mut(params, "params")?.learn_rounds = rounds;
        Ok(())
    })
}

/// Sets the search (an `rt_coalescent_inference` value).
#[unsafe(no_mangle)]
pub extern "C" fn rt_coalescent_params_set_inference(
    params: *mut RtCoalescentParams,
    inference: i32,
) -> RtStatus {
    guard(|| {
        let params = &mut handle::get_mut(params, "params")?.params;
        *params = params.inference(match inference {
            i if i == RtCoalescentInference::GreedyRate1 as i32 => Inference::GreedyRate1,
            i if i == RtCoalescentInference::GreedyMaxProb as i32 => Inference::GreedyMaxProb,
            i if i == RtCoalescentInference::GreedyMinDuration as i32 => {
                Inference::GreedyMinDuration
            }
            i => {
                return Err(Error::param(
                    "inference",
                    format!("{i} is not an rt_coalescent_inference value"),
                ));
            }
        });
        Ok(())
    })
}

/// Worker threads; 0 (the default) uses every core. The result does not depend on it.
#[unsafe(no_mangle)]
pub extern "C" fn rt_coalescent_params_set_n_threads(
    params: *mut RtCoalescentParams,
    n_threads: usize,
) -> RtStatus {
    guard(|| {
        let params = &mut handle::get_mut(params, "params")?.params;
        *params = params.n_threads((n_threads > 0).then_some(n_threads));
        Ok(())
    })
}

/// Releases `params`.
#[unsafe(no_mangle)]
pub extern "C" fn rt_coalescent_params_free(params: *mut RtCoalescentParams) -> RtStatus {
    guard(|| handle::release(params, "params"))
}

/// Options of `rt_pydt_fit`: the Pitman–Yor diffusion tree's `α`, `β`, `c`, the
/// Brownian variance `σ²` per unit time (all fixed), and the length of the chain.
pub struct RtPydtParams {
    pub(crate) alpha: f64,
    pub(crate) beta: f64,
    pub(crate) c: f64,
    pub(crate) sigma2: f64,
    pub(crate) n_iter: usize,
    pub(crate) burn_in: usize,
    pub(crate) interrupt: Option<Interrupt>,
}

impl RtPydtParams {
    pub(crate) fn pydt(&self) -> Result<PydtParams> {
        Ok(PydtParams::new(self.alpha, self.beta, self.c)?)
    }
}

impl Handle for RtPydtParams {
    const NAME: &'static str = "rt_pydt_params";
}

/// Options of a diffusion-tree fit by MCMC (Knowles & Ghahramani 2011, §5) from a draw of
/// the prior: divergence parameters `alpha`, `beta` (`0 ≤ β < 1`, `α ≥ −2β`) and `c > 0`,
/// Brownian variance `sigma2 > 0`; 100 sweeps, the first 50 discarded.
#[unsafe(no_mangle)]
pub extern "C" fn rt_pydt_params_new(
    alpha: f64,
    beta: f64,
    c: f64,
    sigma2: f64,
    out: *mut *mut RtPydtParams,
) -> RtStatus {
    guard(|| {
        let params = RtPydtParams {
            alpha,
            beta,
            c,
            sigma2,
            n_iter: 100,
            burn_in: 50,
            interrupt: None,
        };
        handle::emit(out, "out", params)
    })
}

/// Sets the number of sweeps and how many of the first are discarded (`burn_in < n_iter`).
#[unsafe(no_mangle)]
pub extern "C" fn rt_pydt_params_set_iterations(
    params: *mut RtPydtParams,
    n_iter: usize,
    burn_in: usize,
) -> RtStatus {
    guard(|| {
        let params = handle::get_mut(params, "params")?;
        if burn_in >= n_iter {
            return Err(Error::param(
                "burn_in",
                format!("must be less than n_iter = {n_iter}, got {burn_in}"),
            ));
        }
        (params.n_iter, params.burn_in) = (n_iter, burn_in);
        Ok(())
    })
}

/// Releases `params`.
#[unsafe(no_mangle)]
pub extern "C" fn rt_pydt_params_free(params: *mut RtPydtParams) -> RtStatus {
    guard(|| handle::release(params, "params"))
}
