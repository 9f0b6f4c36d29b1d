//! Independent-sites multinomial mutation (Teh, Daumé & Roy 2007, §4.3, eqs 14–15).
//!
//! Feature `d` takes one of `K_d` states (integer codes `0..K_d`, stored as floats; NaN is
//! missing) and mutates independently of the others with rate `λ_d` towards the equilibrium
//! `q_d`: `Q_d = λ_d(1 q_dᵀ − I)`, so `e^{Q_d t} = e^{−λ_d t} I + (1 − e^{−λ_d t}) 1 q_dᵀ`.
//! Binary data are `K = 2`. The root draws from `q_d`, which is stationary, so
//! `ln Z_−∞ = 0`.
//!
//! A message for feature `d` is a vector `M_d` over the states, normalised so that
//! `q_d · M_d = 1` (then `M_dk ≤ 1/q_dk`, and some entry is `≥ 1`). Since
//! `q_d · M_d = 1`, propagation is `(e^{Q_d δ} M_d)_k = 1 − e^{−λ_d δ}(1 − M_dk)`, evaluated
//! as `(1 − e^{−λ_d δ}) + e^{−λ_d δ} M_dk`: a sum of non-negative terms, free of
//! cancellation. A missing entry is the all-ones message. The normalisers are carried as
//! logarithms, so deep trees never underflow.

use ndarray::{ArrayView1, ArrayView2};

use super::{MessageModel, best_stationary_point, bracketed_root, check_duration_args, check_row};
use crate::error::{Result, RoseTreeError};
use crate::models::per_feature;

/// Tolerance on `|Σ_k q_dk − 1|` for a given equilibrium.
const SUM_TOLERANCE: f64 = 1e-9;

/// Independent-sites mutation of categorical features (Teh et al. §4.3).
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::models::messages::{MessageModel, MultinomialMutation};
///
/// // Two binary features; the equilibrium is estimated from the data (+1 per state).
/// let x = array![[0., 1.], [0., f64::NAN], [1., 1.]];
/// let model = MultinomialMutation::from_data(x.view(), &[2], &[1.0])?;
/// assert_eq!(model.equilibrium(0), &[0.6, 0.4]);
/// let (a, log_qa) = model.leaf_message(x.row(0), 0)?;
/// let (b, _) = model.leaf_message(x.row(1), 1)?;
/// // The first feature agrees, the second is missing in `b`: merging after a total
/// // length L gives Z = 1 − e^{−L}(1 − 1/q₀) for the first feature (eq 14).
/// let z = 1.0 - (-1.0f64).exp() * (1.0 - 1.0 / 0.6);
/// assert!((model.merge_log_z(&a, &b, 0.5, 0.5) - z.ln()).abs() < 1e-15);
/// assert!((log_qa - (0.6f64.ln() + 0.75f64.ln())).abs() < 1e-15);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct MultinomialMutation {
    /// `offsets[d]..offsets[d + 1]` is feature `d`'s block in a message.
    offsets: Vec<usize>,
    rates: Vec<f64>,
    /// `q_dk`, feature blocks laid out as in messages.
    equilibrium: Vec<f64>,
}

/// A normalised mutation message: the blocks of all features, one entry per state.
#[derive(Debug, Clone, PartialEq)]
pub struct MutationMessage {
    values: Vec<f64>,
}

impl MutationMessage {
    /// The entries of every feature, concatenated; [`MultinomialMutation::feature`] slices
    /// one feature's block.
    pub fn values(&self) -> &[f64] {
        &self.values
    }
}

/// The branch-length-free part of a pair's merge normaliser: `s_d = Σ_k q_dk M_l,dk M_r,dk`
/// per feature.
#[derive(Debug, Clone, PartialEq)]
pub struct MutationPair {
    /// `s_d` for each feature.
    pub overlap: Vec<f64>,
}

impl MultinomialMutation {
    /// A model with equilibrium `equilibrium[d]` (a distribution over `K_d ≥ 1` states with
    /// every `q_dk > 0`) and rate `rates[d]` per feature; one rate broadcasts.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `equilibrium` if there are no features or a
    /// feature's entries are empty, not finite and `> 0`, or do not sum to 1 within `1e-9`
    /// (they are then renormalised exactly); on `rates` for a wrong length or a rate that is
    /// not finite and `> 0`.
    pub fn new(equilibrium: &[Vec<f64>], rates: &[f64]) -> Result<Self> {
        let d = equilibrium.len();
        if d == 0 {
            return Err(RoseTreeError::param(
                "equilibrium",
                "needs at least one feature",
            ));
        }
        let rates = per_feature("rates", rates, d)?;
        let mut offsets = vec![0];
        let mut flat = Vec::new();
        for (f, q) in equilibrium.iter().enumerate() {
            let bad = |reason: String| {
                Err(RoseTreeError::param(
                    "equilibrium",
                    format!("feature {f}: {reason}"),
                ))
            };
            if q.is_empty() {
                return bad("needs at least one state".into());
            }
            if let Some(k) = q.iter().position(|v| !(v.is_finite() && *v > 0.0)) {
                return bad(format!(
                    "state {k} has q = {}, must be finite and > 0",
                    q[k]
                ));
            }
            let sum: f64 = q.iter().sum();
            if (sum - 1.0).abs() > SUM_TOLERANCE {
                return bad(format!("sums to {sum}, not 1"));
            }
            flat.extend(q.iter().map(|v| v / sum));
            offsets.push(flat.len());
        }
        Ok(Self {
            offsets,
            rates,
            equilibrium: flat,
        })
    }

    /// A model whose equilibrium is the observed frequency of each state in `x`, smoothed
    /// by one pseudo-count per state: `q_dk = (c_dk + 1) / (N_d + K_d)`, with `c_dk` the
    /// number of rows with code `k` in column `d` and `N_d` the number of observed (not
    /// NaN) entries. `n_states` gives `K_d` (one value broadcasts), `rates` gives `λ_d`.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `n_features` for data without columns, on
    /// `n_states` for a wrong length or a zero, on `rates` as [`new`](Self::new);
    /// [`RoseTreeError::InvalidData`] naming the row and column of an entry that is neither
    /// NaN nor an integer code in `0..K_d`.
    pub fn from_data(x: ArrayView2<'_, f64>, n_states: &[usize], rates: &[f64]) -> Result<Self> {
        let d = x.ncols();
        if d == 0 {
            return Err(RoseTreeError::param(
                "n_features",
                "the data have no columns",
            ));
        }
        // State counts are small whole numbers: as floats they are exact, and `per_feature`
        // broadcasts them and rejects a zero.
        let as_float: Vec<f64> = n_states.iter().map(|&k| k as f64).collect();
        let n_states: Vec<usize> = per_feature("n_states", &as_float, d)?
            .into_iter()
            .map(|k| k as usize)
            .collect();
        let mut counts: Vec<Vec<f64>> = n_states.iter().map(|&k| vec![1.0; k]).collect();
        for (i, row) in x.rows().into_iter().enumerate() {
            for (f, &v) in row.iter().enumerate() {
                if let Some(k) = code(v, n_states[f], i, f)? {
                    counts[f][k] += 1.0;
                }
            }
        }
        Self::from_counts(&counts, rates)
    }

    /// A model whose equilibrium is proportional to `counts[d]` per feature, `q_dk = c_dk /
    /// Σ_k c_dk`: with the smoothed state counts of some data (one pseudo-count added), the
    /// model [`from_data`](Self::from_data) builds from those data, which need not be on
    /// this machine.
    ///
    /// # Errors
    /// As [`new`](Self::new), on `equilibrium`, for counts that are not finite and `> 0`.
    pub fn from_counts(counts: &[Vec<f64>], rates: &[f64]) -> Result<Self> {
        let equilibrium: Vec<Vec<f64>> = counts
            .iter()
            .map(|c| {
                let total: f64 = c.iter().sum();
                c.iter().map(|v| v / total).collect()
            })
            .collect();
        Self::new(&equilibrium, rates)
    }

    /// The same model with the rates `rates` (one value broadcasts to every feature).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `rates` as [`new`](Self::new).
    pub fn with_rates(&self, rates: &[f64]) -> Result<Self> {
        Ok(Self {
            rates: per_feature("rates", rates, self.rates.len())?,
            ..self.clone()
        })
    }

    /// `K_d`, the number of states of feature `d`.
    pub fn n_states(&self, d: usize) -> usize {
        self.offsets[d + 1] - self.offsets[d]
    }

    /// `λ_d` for every feature.
    pub fn rates(&self) -> &[f64] {
        &self.rates
    }

    /// `q_d`, the equilibrium of feature `d`.
    pub fn equilibrium(&self, d: usize) -> &[f64] {
        &self.equilibrium[self.offsets[d]..self.offsets[d + 1]]
    }

    /// Feature `d`'s block of `msg`.
    pub fn feature<'a>(&self, msg: &'a MutationMessage, d: usize) -> &'a [f64] {
        &msg.values[self.offsets[d]..self.offsets[d + 1]]
    }

    /// The blocks of every feature: `(λ_d, range)`.
    fn blocks(&self) -> impl Iterator<Item = (f64, std::ops::Range<usize>)> + '_ {
        self.rates
            .iter()
            .zip(self.offsets.windows(2))
            .map(|(&r, w)| (r, w[0]..w[1]))
    }

    /// The rate of every feature, where they share one.
    fn shared_rate(&self) -> Option<f64> {
        let first = *self.rates.first()?;
        self.rates.iter().all(|&r| r == first).then_some(first)
    }

    /// `−rate·δ + ln Z(base + 2δ)`, Greedy-Rate1's objective.
    fn objective(&self, pair: &MutationPair, base: f64, rate: f64, delta: f64) -> f64 {
        -rate * delta + self.pair_log_z(pair, base + 2.0 * delta)
    }
}

/// The state coded by `v` in a feature with `k` states: `None` for NaN (missing).
fn code(v: f64, k: usize, row: usize, column: usize) -> Result<Option<usize>> {
    if v.is_nan() {
        return Ok(None);
    }
    if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < k as f64 {
        return Ok(Some(v as usize));
    }
    Err(RoseTreeError::data(
        row,
        Some(column),
        format!("value {v} is not a state code: expected an integer in 0..{k} or NaN"),
    ))
}

impl MessageModel for MultinomialMutation {
    type Message = MutationMessage;
    type Pair = MutationPair;

    fn n_features(&self) -> usize {
        self.rates.len()
    }

    /// An observed code `k` gives `M_d = e_k / q_dk` with log normaliser `ln q_dk` (the
    /// leaf's indicator is `q_dk · M_d`); a missing entry gives the all-ones message and
    /// contributes nothing.
    fn leaf_message(
        &self,
        row: ArrayView1<'_, f64>,
        index: usize,
    ) -> Result<(MutationMessage, f64)> {
        let d = self.n_features();
        check_row(row, d, index)?;
        let mut values = vec![1.0; self.equilibrium.len()];
        let mut log_z = 0.0;
        for (f, (_, block)) in self.blocks().enumerate() {
            if let Some(k) = code(row[f], block.len(), index, f)? {
                let q = self.equilibrium[block.start + k];
                values[block.clone()].fill(0.0);
                values[block.start + k] = 1.0 / q;
                log_z += q.ln();
            }
        }
        Ok((MutationMessage { values }, log_z))
    }

    /// Eq 15's factors: `M_dk ↦ (1 − e^{−λ_d δ}) + e^{−λ_d δ} M_dk`.
    fn propagate(&self, msg: &MutationMessage, duration: f64) -> MutationMessage {
        let mut values = msg.values.clone();
        for (lambda, block) in self.blocks() {
            let e = (-lambda * duration).exp();
            let stay = -(-lambda * duration).exp_m1();
            values[block].iter_mut().for_each(|m| *m = stay + e * *m);
        }
        MutationMessage { values }
    }

    /// The product of the messages, renormalised after each factor so that no entry
    /// overflows or underflows however many children a node has: `ln Z = Σ_d ln Z_d` with
    /// `Z_d = q_d · Π_b M_b,d` (for two propagated messages this is eq 14, and the
    /// normalised product is eq 15). A feature whose product vanishes (contradictory
    /// observations with no mutation time between them) gives `ln Z = −∞` and an all-ones
    /// placeholder block.
    fn combine(&self, msgs: &[MutationMessage]) -> (MutationMessage, f64) {
        let Some((first, rest)) = msgs.split_first() else {
            return (
                MutationMessage {
                    values: vec![1.0; self.equilibrium.len()],
                },
                0.0,
            );
        };
        let mut values = first.values.clone();
        let mut log_z = 0.0;
        for m in rest {
            for (_, block) in self.blocks() {
                let q = &self.equilibrium[block.clone()];
                let out = &mut values[block.clone()];
                let mut z = 0.0;
                for ((o, x), qk) in out.iter_mut().zip(&m.values[block]).zip(q) {
                    *o *= x;
                    z += qk * *o;
                }
                if z > 0.0 {
                    out.iter_mut().for_each(|o| *o /= z);
                    log_z += z.ln();
                } else {
                    out.fill(1.0);
                    log_z = f64::NEG_INFINITY;
                }
            }
        }
        (MutationMessage { values }, log_z)
    }

    /// `q_d · e^{Q_d t} M_d = q_d · M_d = 1`: the root's equilibrium is stationary.
    fn root_log_z(&self, _msg: &MutationMessage) -> f64 {
        0.0
    }

    fn pair(&self, left: &MutationMessage, right: &MutationMessage) -> MutationPair {
        let overlap = self
            .blocks()
            .map(|(_, b)| {
                self.equilibrium[b.clone()]
                    .iter()
                    .zip(&left.values[b.clone()])
                    .zip(&right.values[b])
                    .map(|((q, l), r)| q * l * r)
                    .sum()
            })
            .collect();
        MutationPair { overlap }
    }

    /// Eq 14: `Σ_d ln(1 − e^{−λ_d L}(1 − s_d))`, evaluated as `ln((1 − E) + E·s_d)`, or as
    /// `ln_1p(−E(1 − s_d))` when that is small (long branches), to keep its digits.
    fn pair_log_z(&self, pair: &MutationPair, length: f64) -> f64 {
        self.rates
            .iter()
            .zip(&pair.overlap)
            .map(|(&lambda, &s)| {
                let e = (-lambda * length).exp();
                let t = e * (1.0 - s);
                if t.abs() < 0.5 {
                    (-t).ln_1p()
                } else {
                    (-(-lambda * length).exp_m1() + e * s).ln()
                }
            })
            .sum()
    }

    /// The maximiser of `g(δ) = −rate·δ + Σ_d ln Z_d(L)`, `L = base_length + 2δ`, by Newton
    /// steps on `g′(δ) = −rate + 2 Σ_d λ_d u_d E_d / Z_d` (`u_d = 1 − s_d`, `E_d = e^{−λ_d L}`,
    /// `Z_d = 1 − u_d E_d`; `g″(δ) = −4 Σ_d λ_d² u_d E_d / Z_d²`) kept inside a bracket; eq 14
    /// has no closed-form maximiser.
    ///
    /// - Features with `u_d ≤ 0` (the pair agrees at least as much as chance) only pull
    ///   towards `δ = 0`; if no feature has `u_d > 0`, `δ = 0`.
    /// - Past the length where `−rate + 2 Σ_{u_d > 0} λ_d u_d E_d / Z_d < 0` (found by
    ///   doubling), `g` only decreases, which closes the bracket on the right.
    /// - With one rate `λ` for all features that matter (`u_d ≠ 0`), `g` is concave in
    ///   `z = e^{−λL}` (`ln z` and every `ln(1 − u_d z)` are), hence unimodal in `δ`: the
    ///   one sign change of `g′` in the bracket is the global maximum, or `δ = 0` if
    ///   `g′(0) ≤ 0`.
    /// - With different rates `g` can have several local maxima (a fast feature that agrees
    ///   and a slow one that disagrees), so `g′` is first tabulated on 0 and 121
    ///   geometrically spaced durations from the right end of the bracket down to `10⁻¹²`
    ///   of it; every sign change from `+` to `−` is refined, and the best of these and
    ///   `δ = 0` is returned (ties to the shorter duration). A maximum narrower than the
    ///   grid spacing (a factor 1.26) can be missed.
    fn optimal_duration(&self, pair: &MutationPair, base_length: f64, rate: f64) -> Result<f64> {
        check_duration_args(base_length, rate)?;
        if let Some(lambda) = self.shared_rate() {
            // One rate: `g` is unimodal, and the features need no grouping.
            let slope =
                |delta: f64| shared_rate_slope(&pair.overlap, lambda, base_length, rate, delta);
            if !pair.overlap.iter().any(|&s| s < 1.0) || slope(0.0).0 <= 0.0 {
                return Ok(0.0);
            }
            let mut hi = 1.0 / lambda;
            while slope(hi).0 >= 0.0 && hi < f64::MAX / 4.0 {
                hi *= 2.0;
            }
            return Ok(bracketed_root(slope, 0.0, hi));
        }
        // The features that matter (s_d ≠ 1), grouped by rate so that each evaluation
        // costs one `exp` per distinct rate and a division per feature.
        let mut groups: Vec<(f64, Vec<f64>)> = Vec::new();
        for (&lambda, &s) in self.rates.iter().zip(&pair.overlap) {
            if s == 1.0 {
                continue;
            }
            match groups.iter_mut().find(|g| g.0 == lambda) {
                Some(g) => g.1.push(s),
                None => groups.push((lambda, vec![s])),
            }
        }
        if !groups.iter().any(|g| g.1.iter().any(|&s| s < 1.0)) {
            return Ok(0.0);
        }
        // g′(δ) and g″(δ), optionally counting only the features that push δ up.
        let slope = |delta: f64, only_disagreeing: bool| -> (f64, f64) {
            let length = base_length + 2.0 * delta;
            let (mut d1, mut d2) = (-rate, 0.0);
            for (lambda, overlaps) in &groups {
                let e = (-lambda * length).exp();
                let moved = -(-lambda * length).exp_m1();
                for &s in overlaps {
                    if only_disagreeing && s >= 1.0 {
                        continue;
                    }
                    let z = moved + e * s;
                    let a = lambda * (1.0 - s) * e / z;
                    d1 += 2.0 * a;
                    d2 -= 4.0 * lambda * a / z;
                }
            }
            (d1, d2)
        };
        let fastest = groups.iter().map(|g| g.0).fold(0.0, f64::max);
        let mut hi = 1.0 / fastest;
        while slope(hi, true).0 >= 0.0 && hi < f64::MAX / 4.0 {
            hi *= 2.0;
        }
        if groups.len() == 1 {
            if slope(0.0, false).0 <= 0.0 {
                return Ok(0.0);
            }
            return Ok(bracketed_root(|x| slope(x, false), 0.0, hi));
        }
        Ok(best_stationary_point(
            |x| slope(x, false),
            |x| self.objective(pair, base_length, rate, x),
            hi,
        ))
    }

    /// With one rate for all features `g` is unimodal, so `δ* > h` exactly when
    /// `g′(h) > 0`; this tests `g′(h)` against `10⁻⁹` of the sum of its terms' sizes, far
    /// beyond its rounding, from the two messages directly (no pair built). With several
    /// rates it says nothing.
    fn duration_exceeds(
        &self,
        left: &MutationMessage,
        right: &MutationMessage,
        base_length: f64,
        rate: f64,
        h: f64,
    ) -> bool {
        let Some(lambda) = self.shared_rate() else {
            return false;
        };
        if !(h >= 0.0 && rate.is_finite() && rate > 0.0 && base_length.is_finite()) {
            return false;
        }
        let e = (-lambda * (base_length + 2.0 * h)).exp();
        let moved = -(-lambda * (base_length + 2.0 * h)).exp_m1();
        let (mut slope, mut size) = (-rate, rate);
        for (_, b) in self.blocks() {
            let s: f64 = self.equilibrium[b.clone()]
                .iter()
                .zip(&left.values[b.clone()])
                .zip(&right.values[b])
                .map(|((q, l), r)| q * l * r)
                .sum();
            let term = 2.0 * lambda * (1.0 - s) * e / (moved + e * s);
            slope += term;
            size += term.abs();
        }
        slope > 1e-9 * size
    }
}

/// `g′(δ)` and `g″(δ)` of [`MultinomialMutation::optimal_duration`] with one rate `lambda`
/// for every feature, over the features' overlaps `s_d`.
fn shared_rate_slope(
    overlap: &[f64],
    lambda: f64,
    base_length: f64,
    rate: f64,
    delta: f64,
) -> (f64, f64) {
    let length = base_length + 2.0 * delta;
    let e = (-lambda * length).exp();
    let moved = -(-lambda * length).exp_m1();
    let (mut d1, mut d2) = (-rate, 0.0);
    for &s in overlap {
        let z = moved + e * s;
        let a = lambda * (1.0 - s) * e / z;
        d1 += 2.0 * a;
        d2 -= 4.0 * lambda * a / z;
    }
    (d1, d2)
}

#[cfg(test)]
mod tests;

impl super::MessageCodec for MultinomialMutation {
    fn encode_message(&self, msg: &MutationMessage) -> Vec<f64> {
        msg.values.clone()
    }

    fn decode_message(&self, values: &[f64]) -> Result<MutationMessage> {
        super::check_message_len(values, self.equilibrium.len())?;
        if values.iter().any(|v| !(v.is_finite() && *v >= 0.0)) {
            return Err(RoseTreeError::param("message", "needs finite entries >= 0"));
        }
        Ok(MutationMessage {
            values: values.to_vec(),
        })
    }
}
