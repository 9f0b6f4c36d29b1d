//! Brownian diffusion with missing entries: [`MaskedBrownian`].

use ndarray::ArrayView1;

use super::brownian::half_stationary_variance;
use super::{
    BrownianDiffusion, MessageModel, Root, best_stationary_point, bracketed_root,
    check_duration_args, check_row,
};
use crate::error::{Result, RoseTreeError};

const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// Brownian diffusion with missing entries (Teh, Daumé & Roy 2007, eqs 11–13, feature by
/// feature).
///
/// With a diagonal `Λ = diag(λ_1, …, λ_D)` the features diffuse independently, so a missing
/// entry is simply a feature the leaf says nothing about: its message is uninformative in
/// that feature only. Messages are then no longer multiples of one `Λ`: a node's message is
/// `Π_j N(y_j; μ_j, v_j λ_j)` with a variance factor `v_j` per feature (`v_j = ∞` where no
/// leaf below it observes feature `j`). Everything of [`BrownianDiffusion`] holds feature by
/// feature: a branch adds its length to every finite `v_j`, and the product of messages is
/// the one-dimensional product (eq 13) in each feature, its normaliser the sum of the
/// features' normalisers over the features observed on at least two incoming branches.
/// With no entry missing this is [`BrownianDiffusion`] with the same `Λ` (the tests check
/// the two against each other, and against the covariance form with rows and columns
/// removed).
///
/// A full `Λ` couples the features, and a partly observed row's message would need a
/// covariance of its own per node; it is not supported (use a diagonal `Λ` or impute).
///
/// # Pairs and the optimal duration
/// A pair's normaliser at total branch length `L` is, over the features observed on both
/// sides, `Σ_j ln N(μ_lj − μ_rj; 0, (w_j + L)λ_j)` with `w_j = v_lj + v_rj`. Features with
/// the same `w_j` share one term, so [`MaskedPair`] keeps the distinct `w` with their
/// feature counts `n_g` and summed squared whitened distances `S_g` (one group when both
/// messages have the same pattern of observed features, the usual case). Greedy-Rate1's
/// objective `−rate·δ + Σ_g −(n_g ln u_g + S_g/u_g)/2`, `u_g = w_g + base + 2δ`, is
/// maximised in closed form for one group (as [`BrownianDiffusion`]); with several groups
/// it can have more than one local maximum (a tight group that agrees pulls towards
/// `δ = 0`, a loose one that disagrees pushes out), and the best of its stationary points
/// and `δ = 0` is found as for [`MultinomialMutation`](super::MultinomialMutation): the
/// slope tabulated on 121 geometrically spaced durations, each sign change refined by
/// bracketed Newton steps. Beyond the duration where every `u_g ≥ S_g/n_g` each term
/// decreases, which bounds the search.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::models::messages::{BrownianDiffusion, MaskedBrownian, MessageModel};
///
/// let model = MaskedBrownian::new(BrownianDiffusion::isotropic(1.0, 2)?)?;
/// let (a, _) = model.leaf_message(array![0.5, f64::NAN].view(), 0)?;
/// let (b, _) = model.leaf_message(array![-0.5, 3.0].view(), 1)?;
/// // Only the first feature is seen on both sides: eq 11 in one dimension.
/// let log_z = model.merge_log_z(&a, &b, 1.0, 1.0);
/// let expected = -0.5 * (2.0 * std::f64::consts::PI * 2.0).ln() - 1.0 / 4.0;
/// assert!((log_z - expected).abs() < 1e-14);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct MaskedBrownian {
    /// `√λ_j`.
    scales: Vec<f64>,
    /// `ln λ_j`.
    log_lambda: Vec<f64>,
    root: Root,
    /// `η ≥ 0`: an observed entry is `x_j ~ N(y_j, ηλ_j)` (see [`BrownianDiffusion::with_noise`]).
    noise: f64,
}

/// A message `Π_j N(y_j; μ_j, v_j λ_j)`, `μ` in whitened coordinates (`x_j/√λ_j`);
/// `v_j = 0` is a point mass, `v_j = ∞` says nothing about feature `j`.
#[derive(Debug, Clone, PartialEq)]
pub struct MaskedMessage {
    mean: Vec<f64>,
    var: Vec<f64>,
}

impl MaskedMessage {
    /// The whitened means `μ_j/√λ_j` (0 where `v_j = ∞`).
    pub fn whitened_mean(&self) -> &[f64] {
        &self.mean
    }

    /// The variance factors `v_j`: feature `j`'s variance is `v_j λ_j`.
    pub fn variances(&self) -> &[f64] {
        &self.var
    }
}

/// The features a pair of messages both observe, grouped by `w = v_l + v_r`.
#[derive(Debug, Clone, PartialEq)]
pub struct MaskedPair {
    /// `(w_g, n_g, S_g)`: the variance factor between the means at zero branch length, the
    /// number of features with it, and their summed squared whitened distance; sorted by
    /// `w_g`.
    groups: Vec<(f64, f64, f64)>,
    /// `Σ ln λ_j` over the features in the groups.
    log_det: f64,
}

impl MaskedPair {
    /// `(w_g, n_g, S_g)` per group (see [`MaskedBrownian`]).
    pub fn groups(&self) -> &[(f64, f64, f64)] {
        &self.groups
    }

    /// The number of features both messages observe.
    pub fn n_shared(&self) -> f64 {
        self.groups.iter().map(|g| g.1).sum()
    }

    /// `Σ ln λ_j` over the features both messages observe.
    pub fn log_det(&self) -> f64 {
        self.log_det
    }
}

impl MaskedBrownian {
    /// The process of `base` (its `Λ` and root prior), accepting missing entries.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `lambda` if `base` has a full `Λ`.
    pub fn new(base: BrownianDiffusion) -> Result<Self> {
        let Some(scales) = base.scales() else {
            return Err(RoseTreeError::param(
                "lambda",
                "missing values (NaN) need a scalar or diagonal Λ: with a full Λ the \
                 features are coupled (impute the data first, or use a diagonal Λ)",
            ));
        };
        Ok(Self {
            scales: scales.to_vec(),
            log_lambda: scales.iter().map(|s| 2.0 * s.ln()).collect(),
            root: base.root(),
            noise: base.noise(),
        })
    }

    /// The root prior.
    pub fn root(&self) -> Root {
        self.root
    }

    /// The means `μ_j` of `msg` in data coordinates (NaN where `v_j = ∞`).
    pub fn mean(&self, msg: &MaskedMessage) -> Vec<f64> {
        msg.mean
            .iter()
            .zip(&msg.var)
            .zip(&self.scales)
            .map(|((m, v), s)| if v.is_finite() { m * s } else { f64::NAN })
            .collect()
    }

    /// The variances `v_j λ_j` of `msg` in data coordinates.
    pub fn variances(&self, msg: &MaskedMessage) -> Vec<f64> {
        msg.var
            .iter()
            .zip(&self.scales)
            .map(|(v, s)| v * s * s)
            .collect()
    }

    /// `−rate·δ + ln Z(base + 2δ)`, Greedy-Rate1's objective.
    fn objective(&self, pair: &MaskedPair, base: f64, rate: f64, delta: f64) -> f64 {
        -rate * delta + self.pair_log_z(pair, base + 2.0 * delta)
    }
}

/// `ln N(diff; 0, v·λ)` in one dimension, `ln λ = log_lambda`, for `v > 0`.
fn log_normal_1d(diff: f64, v: f64, log_lambda: f64) -> f64 {
    -0.5 * (LN_2PI + v.ln() + log_lambda + diff * diff / v)
}

/// Where point masses meet: `+∞` if two coincide anywhere and none disagree, `−∞` if any
/// disagree, otherwise `log_z`.
fn with_point_masses(log_z: f64, agree: bool, disagree: bool) -> f64 {
    if disagree {
        f64::NEG_INFINITY
    } else if agree {
        f64::INFINITY
    } else {
        log_z
    }
}

impl MessageModel for MaskedBrownian {
    type Message = MaskedMessage;
    type Pair = MaskedPair;

    fn n_features(&self) -> usize {
        self.scales.len()
    }

    /// `N(y_j; x̃_j, ηλ_j)` at each observed (whitened) value (a point mass without noise),
    /// uninformative at each NaN, with `ln Z = 0`.
    fn leaf_message(&self, row: ArrayView1<'_, f64>, index: usize) -> Result<(MaskedMessage, f64)> {
        check_row(row, self.n_features(), index)?;
        let mut msg = MaskedMessage {
            mean: vec![0.0; row.len()],
            var: vec![f64::INFINITY; row.len()],
        };
        for (j, (&x, s)) in row.iter().zip(&self.scales).enumerate() {
            if x.is_nan() {
                continue;
            }
            if !x.is_finite() {
                return Err(RoseTreeError::data(
                    index,
                    Some(j),
                    format!("value {x} is not finite"),
                ));
            }
            msg.mean[j] = x / s;
            msg.var[j] = self.noise;
        }
        Ok((msg, 0.0))
    }

    /// `v_j ↦ v_j + duration` in every feature.
    fn propagate(&self, msg: &MaskedMessage, duration: f64) -> MaskedMessage {
        MaskedMessage {
            mean: msg.mean.clone(),
            var: msg.var.iter().map(|v| v + duration).collect(),
        }
    }

    /// Eq 13 in each feature over the messages that observe it (see
    /// [`BrownianDiffusion`]'s `combine` for one feature's formula); features observed by
    /// at most one message add nothing to `ln Z`. Point masses: as [`BrownianDiffusion`],
    /// a disagreement in any feature gives `−∞`.
    fn combine(&self, msgs: &[MaskedMessage]) -> (MaskedMessage, f64) {
        let d = self.n_features();
        let mut out = MaskedMessage {
            mean: vec![0.0; d],
            var: vec![f64::INFINITY; d],
        };
        let (mut log_z, mut agree, mut disagree) = (0.0, false, false);
        for j in 0..d {
            let ll = self.log_lambda[j];
            let (mut k, mut point) = (0usize, None::<f64>);
            let (mut precision, mut weighted) = (0.0, 0.0);
            for m in msgs {
                let v = m.var[j];
                if !v.is_finite() {
                    continue;
                }
                k += 1;
                if v == 0.0 {
                    match point {
                        Some(at) if at == m.mean[j] => agree = true,
                        Some(_) => disagree = true,
                        None => point = Some(m.mean[j]),
                    }
                } else {
                    precision += 1.0 / v;
                    weighted += m.mean[j] / v;
                }
            }
            if k == 0 {
                continue;
            }
            if let Some(at) = point {
                out.mean[j] = at;
                out.var[j] = 0.0;
                for m in msgs {
                    let v = m.var[j];
                    if v.is_finite() && v > 0.0 {
                        log_z += log_normal_1d(at - m.mean[j], v, ll);
                    }
                }
                continue;
            }
            if k == 1 {
                // The one message passes through unchanged.
                let m = msgs.iter().find(|m| m.var[j].is_finite()).expect("k = 1");
                out.mean[j] = m.mean[j];
                out.var[j] = m.var[j];
                continue;
            }
            let var = 1.0 / precision;
            let mean = var * weighted;
            out.mean[j] = mean;
            out.var[j] = var;
            let finite = || msgs.iter().filter(|m| m.var[j].is_finite());
            if k == 2 {
                let mut two = finite();
                let (l, r) = (two.next().expect("k = 2"), two.next().expect("k = 2"));
                log_z += log_normal_1d(l.mean[j] - r.mean[j], l.var[j] + r.var[j], ll);
                continue;
            }
            let spread: f64 = finite()
                .map(|m| (m.mean[j] - mean).powi(2) / m.var[j])
                .sum();
            let log_vars: f64 = finite().map(|m| m.var[j].ln()).sum();
            log_z -= 0.5 * ((k - 1) as f64 * (LN_2PI + ll) + log_vars + precision.ln() + spread);
        }
        (out, with_point_masses(log_z, agree, disagree))
    }

    /// The uninformative message for the flat root, `N(0, s0Λ)` for a Gaussian root.
    fn root_message(&self) -> MaskedMessage {
        let d = self.n_features();
        match self.root {
            Root::Flat => MaskedMessage {
                mean: vec![0.0; d],
                var: vec![f64::INFINITY; d],
            },
            Root::Gaussian { s0 } => MaskedMessage {
                mean: vec![0.0; d],
                var: vec![s0; d],
            },
        }
    }

    /// Flat root: `0`. Gaussian root: `Σ_j ln N(μ_j; 0, (s0 + v_j)λ_j)` over the observed
    /// features.
    fn root_log_z(&self, msg: &MaskedMessage) -> f64 {
        let Root::Gaussian { s0 } = self.root else {
            return 0.0;
        };
        let (mut log_z, mut agree, mut disagree) = (0.0, false, false);
        for ((m, v), ll) in msg.mean.iter().zip(&msg.var).zip(&self.log_lambda) {
            let total = s0 + v;
            if total.is_infinite() {
                continue;
            }
            if total == 0.0 {
                if *m == 0.0 {
                    agree = true;
                } else {
                    disagree = true;
                }
                continue;
            }
            log_z += log_normal_1d(*m, total, *ll);
        }
        with_point_masses(log_z, agree, disagree)
    }

    fn pair(&self, left: &MaskedMessage, right: &MaskedMessage) -> MaskedPair {
        let mut terms: Vec<(f64, f64)> = Vec::with_capacity(self.n_features());
        let mut log_det = 0.0;
        for j in 0..self.n_features() {
            let w = left.var[j] + right.var[j];
            if w.is_finite() {
                terms.push((w, (left.mean[j] - right.mean[j]).powi(2)));
                log_det += self.log_lambda[j];
            }
        }
        terms.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut groups: Vec<(f64, f64, f64)> = Vec::new();
        for (w, s) in terms {
            match groups.last_mut() {
                Some(g) if g.0 == w => {
                    g.1 += 1.0;
                    g.2 += s;
                }
                _ => groups.push((w, 1.0, s)),
            }
        }
        MaskedPair { groups, log_det }
    }

    /// `Σ_g −(n_g ln 2π(w_g + length) + S_g/(w_g + length))/2 − Σ ln λ_j / 2` over the
    /// features both messages observe; `0` if there are none.
    fn pair_log_z(&self, pair: &MaskedPair, length: f64) -> f64 {
        if pair.groups.is_empty() {
            return 0.0;
        }
        let (mut log_z, mut agree, mut disagree) = (-0.5 * pair.log_det, false, false);
        for &(w, n, s) in &pair.groups {
            let u = w + length;
            if u == 0.0 {
                if s == 0.0 {
                    agree = true;
                } else {
                    disagree = true;
                }
                continue;
            }
            log_z -= 0.5 * (n * (LN_2PI + u.ln()) + s / u);
        }
        with_point_masses(log_z, agree, disagree)
    }

    /// The maximiser of `−rate·δ + ln Z(base_length + 2δ)`: in closed form for one group
    /// of features (as [`BrownianDiffusion`]), on a grid with refinement otherwise (see
    /// [`MaskedBrownian`]).
    fn optimal_duration(&self, pair: &MaskedPair, base_length: f64, rate: f64) -> Result<f64> {
        check_duration_args(base_length, rate)?;
        match pair.groups.as_slice() {
            [] => Ok(0.0),
            &[(w, n, s)] => {
                Ok((half_stationary_variance(s, n, rate) - 0.5 * (w + base_length)).max(0.0))
            }
            groups => {
                let slope = |delta: f64| duration_slope(groups, base_length, rate, delta);
                let hi = groups
                    .iter()
                    .map(|&(w, n, s)| 0.5 * (s / n - w - base_length))
                    .fold(0.0, f64::max);
                if hi <= 0.0 {
                    return Ok(0.0);
                }
                Ok(best_stationary_point(
                    slope,
                    |x| self.objective(pair, base_length, rate, x),
                    hi,
                ))
            }
        }
    }

    /// Where [`optimal_duration`](MessageModel::optimal_duration) is positive, that
    /// duration. Otherwise the maximiser over `δ ≤ 0` while every group's variance
    /// `u = w + base_length + 2δ` stays positive: in closed form for one group; for several,
    /// the lower bound itself where a group of the smallest `u` agrees exactly (`S = 0`: the
    /// objective grows without bound there), else the local maximum nearest 0 (the slope
    /// is negative at 0, and positive near the bound unless a group almost agrees).
    fn unbounded_duration(&self, pair: &MaskedPair, base_length: f64, rate: f64) -> Result<f64> {
        if let &[(w, n, s)] = pair.groups.as_slice() {
            check_duration_args(base_length, rate)?;
            return Ok(half_stationary_variance(s, n, rate) - 0.5 * (w + base_length));
        }
        let best = self.optimal_duration(pair, base_length, rate)?;
        let groups = pair.groups.as_slice();
        let smallest = groups.iter().map(|g| g.0).fold(f64::INFINITY, f64::min) + base_length;
        if best > 0.0 || groups.is_empty() || !(smallest.is_finite() && smallest > 0.0) {
            return Ok(best);
        }
        let bound = -0.5 * smallest;
        if groups
            .iter()
            .any(|&(w, _, s)| w + base_length == smallest && s == 0.0)
        {
            return Ok(bound);
        }
        let slope = |delta: f64| duration_slope(groups, base_length, rate, delta);
        if slope(0.0).0 >= 0.0 {
            return Ok(best);
        }
        // Towards the bound in decades of the remaining distance, for the first positive
        // slope: a maximum lies between it and the point before.
        let mut before = 0.0;
        for k in 1..=40 {
            let x = bound * (1.0 - 10f64.powi(-k));
            let g = slope(x).0;
            if g > 0.0 {
                return Ok(bracketed_root(slope, x, before));
            }
            if g == 0.0 {
                return Ok(x);
            }
            before = x;
        }
        Ok(bound)
    }
}

/// The slope of `−rate·δ − Σ (n ln u + S/u)/2` over the groups `(w, n, S)`, with
/// `u = w + base_length + 2δ`, and its derivative: with `du/dδ = 2`, d/dδ of
/// `−(n ln u + S/u)/2` is `(S − n u)/u²`, and its derivative `2(n u − 2S)/u³`.
fn duration_slope(
    groups: &[(f64, f64, f64)],
    base_length: f64,
    rate: f64,
    delta: f64,
) -> (f64, f64) {
    let (mut d1, mut d2) = (-rate, 0.0);
    for &(w, n, s) in groups {
        let u = w + base_length + 2.0 * delta;
        d1 += (s - n * u) / (u * u);
        d2 += 2.0 * (n * u - 2.0 * s) / (u * u * u);
    }
    (d1, d2)
}

#[cfg(test)]
mod tests;

impl super::MessageCodec for MaskedBrownian {
    fn encode_message(&self, msg: &MaskedMessage) -> Vec<f64> {
        let mut out = msg.mean.clone();
        out.extend_from_slice(&msg.var);
        out
    }

    fn decode_message(&self, values: &[f64]) -> Result<MaskedMessage> {
        let d = self.n_features();
        super::check_message_len(values, 2 * d)?;
        let (mean, var) = values.split_at(d);
        if mean.iter().any(|v| !v.is_finite()) || var.iter().any(|v| v.is_nan() || *v < 0.0) {
            return Err(RoseTreeError::param(
                "message",
                "needs finite means and variance factors >= 0",
            ));
        }
        Ok(MaskedMessage {
            mean: mean.to_vec(),
            var: var.to_vec(),
        })
    }
}
