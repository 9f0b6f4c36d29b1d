//! Two-way message passing on a timed tree, for any [`MessageModel`]: the upward messages
//! from the data below each node, the outside messages from everything else, and the
//! posterior at any point of the tree (Teh, Daumé & Roy 2007, §4.4; Knowles & Ghahramani
//! §5.3).
//!
//! - *Up.* `U_v` is node `v`'s message at its own time from the data below it: a leaf's own
//!   message, and at a node the [`combine`](MessageModel::combine) of its children's
//!   messages propagated along their branches.
//! - *Outside.* `O_c` is the message that reaches the location of `c`'s parent `p` from
//!   everything outside `c`'s subtree: the product of `D_p` (the message from above at `p`)
//!   and the messages of `c`'s siblings propagated to `p`; `D_c` is `O_c` propagated down
//!   `c`'s branch. At the root, `O` is the root's prior and `D` is given (the prior itself,
//!   or the prior propagated along a branch above the root node).
//! - *Posterior.* At a point `s` below `p` and `r` above `c` on the branch into `c`, the
//!   product of `U_c` propagated up by `r` and `O_c` propagated down by `s`; at a node, of
//!   `U_v` and `D_v`.
//!
//! Messages are relative to the model's reference measure, which is stationary for the
//! models here (flat for Brownian motion, the equilibrium for mutation) and makes the
//! kernel reversible, so one `propagate` serves both directions. At a node with `K`
//! children the outside messages are products of prefixes and suffixes of the list
//! `[D_p, U_1, …, U_K]` (each propagated to `p`), built pairwise: `O(K)` products per node
//! instead of `O(K²)`; for a binary node, `O_c = combine([D_p, U_sibling])`.
//!
//! The isotropic Brownian case in units of `σ²`, where the diffusion tree's MCMC and EM need
//! the normalisers split from the rate and the outside messages in precision form, is
//! [`UnitMessage`](super::UnitMessage) and [`Outside`](super::Outside).

use super::MessageModel;
use crate::tree::Tree;

/// Up, outside and down messages of every node of a tree (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct TwoWay<M: MessageModel> {
    /// `U_v`: at `v`'s time, from the data below `v`.
    pub up: Vec<M::Message>,
    /// `O_v`: at the time of `v`'s parent, from everything outside `v`'s subtree (the root:
    /// its prior).
    pub out: Vec<M::Message>,
    /// `D_v`: at `v`'s time, from everything outside `v`'s subtree.
    pub down: Vec<M::Message>,
}

impl<M: MessageModel> TwoWay<M> {
    /// The messages of `tree` given its leaves' messages `leaves` (leaf `i` first),
    /// `root_down` (`D` at the root node) and `length(child, parent)`, the length of the
    /// branch from `parent` down to `child` (`≥ 0`). Nodes are visited in the id order of
    /// [`Tree`] (children before parents) up, and in reverse down.
    pub fn new(
        model: &M,
        tree: &Tree,
        leaves: Vec<M::Message>,
        root_down: M::Message,
        length: impl Fn(usize, usize) -> f64,
    ) -> Self {
        let nodes = tree.nodes();
        let n = tree.n_leaves();
        let mut up = leaves;
        for (v, node) in nodes.iter().enumerate().skip(n) {
            let incoming: Vec<M::Message> = node
                .children
                .iter()
                .map(|&c| model.propagate(&up[c], length(c, v)))
                .collect();
            up.push(model.combine(&incoming).0);
        }
        let root = tree.root();
        let mut out = vec![model.root_message(); nodes.len()];
        let mut down = out.clone();
        down[root] = root_down;
        for b in (n..nodes.len()).rev() {
            let kids = &nodes[b].children;
            let msgs: Vec<M::Message> = kids
                .iter()
                .map(|&k| model.propagate(&up[k], length(k, b)))
                .collect();
            for (&k, rest) in kids.iter().zip(outside_messages(model, &down[b], &msgs)) {
                down[k] = model.propagate(&rest, length(k, b));
                out[k] = rest;
            }
        }
        Self { up, out, down }
    }

    /// The posterior message at node `v`, at its own time: `combine([U_v, D_v])`.
    pub fn posterior_at_node(&self, model: &M, v: usize) -> M::Message {
        model.combine(&[self.up[v].clone(), self.down[v].clone()]).0
    }

    /// The posterior message on the branch into `v`, `below` above `v` and `above` below
    /// its parent: `combine([propagate(U_v, below), propagate(O_v, above)])`.
    pub fn posterior_on_branch(&self, model: &M, v: usize, below: f64, above: f64) -> M::Message {
        posterior_between(model, &self.up[v], &self.out[v], below, above)
    }
}

/// The outside messages of a node's children: given `down`, the message at the node from
/// above, and `msgs`, the children's messages propagated to the node, child `i`'s is the
/// product of `down` and every other child's message. Built from the products of the
/// prefixes `[down, msgs[0], …]` and suffixes `[…, msgs[K−1]]`, pairwise, each once: `O(K)`
/// products; for two children, `[combine([down, msgs[1]]), combine([down, msgs[0]])]`.
pub fn outside_messages<M: MessageModel + ?Sized>(
    model: &M,
    down: &M::Message,
    msgs: &[M::Message],
) -> Vec<M::Message> {
    let k = msgs.len();
    if k == 0 {
        return Vec::new();
    }
    let mut before = Vec::with_capacity(k);
    before.push(down.clone());
    for msg in &msgs[..k - 1] {
        let next = model
            .combine(&[before[before.len() - 1].clone(), msg.clone()])
            .0;
        before.push(next);
    }
    let mut rest = vec![None; k];
    let mut after: Option<M::Message> = None;
    for i in (0..k).rev() {
        rest[i] = Some(match &after {
            None => before[i].clone(),
            Some(a) => model.combine(&[before[i].clone(), a.clone()]).0,
        });
        after = Some(match after {
            None => msgs[i].clone(),
            Some(a) => model.combine(&[a, msgs[i].clone()]).0,
        });
    }
    rest.into_iter()
        .map(|m| m.expect("every child is set"))
        .collect()
}

/// The posterior between a message from below `up` and one from above `out`, at a point
/// `below` above the first and `above` below the second:
/// `combine([propagate(up, below), propagate(out, above)])`.
pub fn posterior_between<M: MessageModel + ?Sized>(
    model: &M,
    up: &M::Message,
    out: &M::Message,
    below: f64,
    above: f64,
) -> M::Message {
    let from_below = model.propagate(up, below);
    let from_above = model.propagate(out, above);
    model.combine(&[from_below, from_above]).0
}

#[cfg(test)]
mod tests;
