//! The bookkeeping that every greedy coalescent search shares: the live clusters' messages
//! at their own times, the merges so far, and the two parts of `ln p(x, π)` (Teh, Daumé &
//! Roy 2007, eq 7) accumulated merge by merge.

use super::kingman::pair_rate;
use crate::error::{Result, RoseTreeError};
use crate::models::messages::MessageModel;
use crate::tree::{Topology, Tree};

/// A tree found by a coalescent search, with its `ln p(x, π)` (Teh et al. eq 7).
#[derive(Debug, Clone)]
pub struct CoalescentFit {
    /// The timed binary tree: leaves at time 0, coalescence times `≤ 0` as heights.
    pub tree: Tree,
    /// `ln p(x, π)` of the tree with the true rates `C(n − i + 1, 2)` in the prior.
    pub log_joint: f64,
}

/// A partial coalescent tree built from the leaves upwards, indexed by cluster id (leaves
/// `0..n`, the `k`-th merge `n + k`).
pub(crate) struct Merges<'a, M: MessageModel> {
    pub(crate) model: &'a M,
    /// Messages of live clusters at their own times; `None` once merged away.
    messages: Vec<Option<M::Message>>,
    /// Each cluster's time `t_c ≤ 0` (0 for a leaf).
    times: Vec<f64>,
    children: Vec<[usize; 2]>,
    /// The time of the last merge (0 before the first): no live cluster is older.
    now: f64,
    /// `Σ ln Z` so far: leaves and merges (eqs 4 and 6).
    log_likelihood: f64,
    /// `ln p(π)` of the merges so far (eq 2, true rates).
    log_prior: f64,
}

impl<'a, M: MessageModel> Merges<'a, M> {
    /// The leaves (messages and log normalisers, as [`MessageModel::leaf_messages`] returns
    /// them) at time 0, none merged yet.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `X` for no leaves.
    pub(crate) fn new(model: &'a M, leaves: Vec<(M::Message, f64)>) -> Result<Self> {
        let n = leaves.len();
        if n == 0 {
            return Err(RoseTreeError::param("X", "needs at least 1 row"));
        }
        let mut messages = Vec::with_capacity(2 * n - 1);
        let log_likelihood = leaves.iter().map(|(_, z)| z).sum();
        messages.extend(leaves.into_iter().map(|(m, _)| Some(m)));
        Ok(Self {
            model,
            messages,
            times: vec![0.0; n],
            children: Vec::with_capacity(n - 1),
            now: 0.0,
            log_likelihood,
            log_prior: 0.0,
        })
    }

    /// Clusters formed at their own times (each message at its time `t_c ≤ 0`), none merged
    /// yet: the start of a search over subtrees built elsewhere. Their `ln Z`s are not known
    /// here, so [`finish`](Self::finish)'s value covers the merges only; see
    /// [`into_merges`](Self::into_merges).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `X` for no clusters.
    pub(crate) fn from_clusters(model: &'a M, clusters: Vec<(M::Message, f64)>) -> Result<Self> {
        let n = clusters.len();
        if n == 0 {
            return Err(RoseTreeError::param("X", "needs at least 1 row"));
        }
        let mut messages = Vec::with_capacity(2 * n - 1);
        let mut times = Vec::with_capacity(2 * n - 1);
        for (m, t) in clusters {
            messages.push(Some(m));
            times.push(t);
        }
        Ok(Self {
            model,
            messages,
            times,
            children: Vec::with_capacity(n - 1),
            now: 0.0,
            log_likelihood: 0.0,
            log_prior: 0.0,
        })
    }

    /// The merges made, in order: the `j`-th merged `children[j]` into cluster `n + j`.
    pub(crate) fn into_merges(self) -> Vec<[usize; 2]> {
        self.children
    }

    /// The number of leaves `n`.
    pub(crate) fn n_leaves(&self) -> usize {
        self.times.len() - self.children.len()
    }

    /// The number of live clusters (lineages) `m = n − merges so far`.
    pub(crate) fn n_live(&self) -> usize {
        self.n_leaves() - self.children.len()
    }

    /// The time of the last merge, 0 before the first.
    pub(crate) fn now(&self) -> f64 {
        self.now
    }

    /// The time `t_c` at which cluster `id` formed.
    pub(crate) fn time(&self, id: u32) -> f64 {
        self.times[id as usize]
    }

    /// The message of live cluster `id` at its own time.
    pub(crate) fn message(&self, id: u32) -> &M::Message {
        self.messages[id as usize]
            .as_ref()
            .expect("live cluster has a message")
    }

    /// Merges live clusters `i` and `j` at time `t ≤ now` into the next id: the prior gains
    /// `−C(m, 2)(now − t)` for the `m` lineages alive meanwhile (eq 2), the likelihood the
    /// merge's `ln Z` (eq 4) of the two messages propagated from their times to `t`.
    /// Returns the merged cluster's id.
    pub(crate) fn merge(&mut self, i: u32, j: u32, t: f64) -> u32 {
        debug_assert!(
            t <= self.now,
            "merge at {t} after the last one at {}",
            self.now
        );
        // Lineages alive during [t, now): every live cluster, `i` and `j` included.
        self.log_prior -= pair_rate(self.n_live()) * (self.now - t);
        self.now = t;
        let incoming: Vec<M::Message> = [i, j]
            .iter()
            .map(|&c| {
                let msg = self.messages[c as usize].take().expect("live cluster");
                self.model.propagate(&msg, self.times[c as usize] - t)
            })
            .collect();
        let (msg, log_z) = self.model.combine(&incoming);
        self.log_likelihood += log_z;
        self.messages.push(Some(msg));
        self.times.push(t);
        self.children.push([i as usize, j as usize]);
        (self.times.len() - 1) as u32
    }

    /// The finished tree (after `n − 1` merges) with its `ln p(x, π)` (eq 7): the prior with
    /// the true rates, every `ln Z`, and the root's `ln Z_−∞` (eq 5).
    ///
    /// # Errors
    /// Whatever [`Tree::new`] reports (none for a search that merged live clusters only).
    pub(crate) fn finish(mut self) -> Result<CoalescentFit> {
        let n = self.n_leaves();
        debug_assert_eq!(self.n_live(), 1, "the search stopped early");
        let root = self.messages[2 * n - 2].take().expect("the root is live");
        let log_joint = self.log_prior + self.log_likelihood + self.model.root_log_z(&root);
        let internal = self.children.iter().map(|c| c.to_vec()).collect();
        let tree = Tree::new(&Topology::new(n, internal)?, Some(self.times))?;
        Ok(CoalescentFit { tree, log_joint })
    }
}
