//! An approximate greedy search for data sets too large for the exact, quadratic one.
//!
//! In the manner of Heller & Ghahramani's randomised BHC: the top of the tree is found on a
//! random sample, every row is sent to the top-level cluster under which it is most likely,
//! and each part is treated the same way until it is small enough for the exact greedy
//! search ([`super::greedy`]). The assembled tree is then evaluated exactly, so its reported
//! `ln p(D | T)` is the true evidence of the tree returned. With `n ≤ exact_below` this *is*
//! the exact search.
//!
//! Cost: a level sends each row to one of a handful of clusters (one
//! [`ClusterModel::log_marginal_query`] each), and the parts at the bottom cost
//! `O(exact_below)` pair scores per row, so the total is about `n · exact_below` instead of
//! `n²` pair scores.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

use super::evaluate::evaluate;
use super::greedy::greedy;
use super::mixing::Mixing;
use crate::error::{Result, RoseTreeError};
use crate::models::ClusterModel;
use crate::parallel::{PAR_THRESHOLD, Threads};
use crate::tree::{RoseTree, Topology};

/// Levels of sample-and-split before the remaining parts are cut into exact blocks.
const MAX_DEPTH: usize = 32;

/// Options of the approximate search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApproxParams {
    /// Parts with at most this many rows are built by the exact greedy search.
    pub exact_below: usize,
    /// Rows sampled to find the top-level clusters of a larger part.
    pub sample: usize,
    /// Seed of the sampling.
    pub seed: u64,
}

impl Default for ApproxParams {
    fn default() -> Self {
        Self {
            exact_below: 4000,
            sample: 1000,
            seed: 0,
        }
    }
}

impl ApproxParams {
    /// Checks the options.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `exact_below` below 2 or `sample` below 2.
    pub fn check(&self) -> Result<()> {
        if self.exact_below < 2 {
            return Err(RoseTreeError::param("exact_below", "must be at least 2"));
        }
        if self.sample < 2 || self.sample > self.exact_below {
            return Err(RoseTreeError::param(
                "approx_sample",
                format!("must lie between 2 and exact_below = {}", self.exact_below),
            ));
        }
        Ok(())
    }
}

/// A tree over global row ids, built bottom-up before it is numbered.
enum Shape {
    Leaf(usize),
    Node(Vec<Shape>),
}

struct Approx<'a, M: ClusterModel> {
    model: &'a M,
    mixing: &'a Mixing,
    binary: bool,
    leaves: &'a [M::Stats],
    threads: &'a Threads,
    interrupt: &'a dyn Fn() -> bool,
    params: ApproxParams,
    rng: Xoshiro256PlusPlus,
}

/// The approximate greedy rose tree (see the module documentation) of `leaves`.
///
/// # Errors
/// As [`greedy`], and [`RoseTreeError::InvalidParameter`] for invalid `params`.
pub fn approximate<M: ClusterModel>(
    model: &M,
    mixing: &Mixing,
    binary: bool,
    leaves: Vec<M::Stats>,
    params: ApproxParams,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> Result<RoseTree> {
    params.check()?;
    let n = leaves.len();
    if n <= params.exact_below {
        return greedy(model, mixing, binary, leaves, threads, interrupt);
    }
    let mut search = Approx {
        model,
        mixing,
        binary,
        leaves: &leaves,
        threads,
        interrupt,
        params,
        rng: Xoshiro256PlusPlus::seed_from_u64(params.seed),
    };
    let shape = search.build((0..n).collect(), 0)?;
    let mut internal = Vec::new();
    number(&shape, n, &mut internal);
    let topology = Topology::new(n, internal)?;
    evaluate(model, mixing, &topology, &leaves)
}

/// Post-order numbering: internal node `k` gets id `n + k`.
fn number(shape: &Shape, n: usize, internal: &mut Vec<Vec<usize>>) -> usize {
    match shape {
        Shape::Leaf(i) => *i,
        Shape::Node(children) => {
            let ids = children.iter().map(|c| number(c, n, internal)).collect();
            internal.push(ids);
            n + internal.len() - 1
        }
    }
}

impl<M: ClusterModel> Approx<'_, M> {
    /// The exact greedy tree of the rows `rows`, as a shape over global ids.
    fn exact(&self, rows: &[usize]) -> Result<Shape> {
        if rows.len() == 1 {
            return Ok(Shape::Leaf(rows[0]));
        }
        let stats = rows.iter().map(|&r| self.leaves[r].clone()).collect();
        let tree = greedy(
            self.model,
            self.mixing,
            self.binary,
            stats,
            self.threads,
            self.interrupt,
        )?;
        fn shape(tree: &RoseTree, id: usize, rows: &[usize]) -> Shape {
            let node = tree.node(id);
            if node.is_leaf() {
                Shape::Leaf(rows[id])
            } else {
                Shape::Node(
                    node.children
                        .iter()
                        .map(|&c| shape(tree, c, rows))
                        .collect(),
                )
            }
        }
        Ok(shape(&tree, tree.root(), rows))
    }

    fn build(&mut self, rows: Vec<usize>, depth: usize) -> Result<Shape> {
        if (self.interrupt)() {
            return Err(RoseTreeError::Interrupted);
        }
        if rows.len() <= self.params.exact_below {
            return self.exact(&rows);
        }
        if depth >= MAX_DEPTH {
            // Splits that keep peeling off a few rows: finish with exact blocks.
            return self.blocks(&rows, depth);
        }
        // The top-level clusters of a random sample.
        let picked = rand::seq::index::sample(&mut self.rng, rows.len(), self.params.sample);
        let mut sample: Vec<usize> = picked.into_iter().map(|k| rows[k]).collect();
        sample.sort_unstable();
        let stats: Vec<M::Stats> = sample.iter().map(|&r| self.leaves[r].clone()).collect();
        let top = greedy(
            self.model,
            self.mixing,
            self.binary,
            stats.clone(),
            self.threads,
            self.interrupt,
        )?;
        let groups: Vec<M::Stats> = top
            .node(top.root())
            .children
            .iter()
            .map(|&c| {
                let members = top.leaves_of(c);
                members[1..]
                    .iter()
                    .fold(stats[members[0]].clone(), |acc, &m| {
                        self.model.merge(&acc, &stats[m])
                    })
            })
            .collect();
        let queries: Vec<M::Query> = groups.iter().map(|g| self.model.query(g)).collect();
        let base: Vec<f64> = groups
            .iter()
            .map(|g| self.model.log_marginal(g))
            .collect::<Result<_>>()?;

        // Every row goes where its predictive probability is highest (ties: the first group).
        let assign = |&r: &usize| -> Result<usize> {
            let mut best = (f64::NEG_INFINITY, 0);
            for (g, (q, stats)) in queries.iter().zip(&groups).enumerate() {
                let gain = self.model.log_marginal_query(q, stats, &self.leaves[r])? - base[g];
                if gain > best.0 {
                    best = (gain, g);
                }
            }
            Ok(best.1)
        };
        let labels: Vec<usize> = if rows.len() >= PAR_THRESHOLD {
            self.threads
                .install(|| rows.par_iter().map(assign).collect::<Result<_>>())?
        } else {
            rows.iter().map(assign).collect::<Result<_>>()?
        };
        let mut parts = vec![Vec::new(); groups.len()];
        for (&r, &g) in rows.iter().zip(&labels) {
            parts[g].push(r);
        }
        parts.retain(|p| !p.is_empty());
        if parts.len() < 2 {
            // The sample's split does not separate the rows: they look alike.
            return self.blocks(&rows, depth);
        }
        let children = parts
            .into_iter()
            .map(|p| self.build(p, depth + 1))
            .collect::<Result<_>>()?;
        Ok(Shape::Node(children))
    }

    /// Rows that do not split: children of one node, each block of them built exactly.
    fn blocks(&mut self, rows: &[usize], depth: usize) -> Result<Shape> {
        let children = rows
            .chunks(self.params.exact_below)
            .map(|p| self.build(p.to_vec(), depth + 1))
            .collect::<Result<_>>()?;
        Ok(Shape::Node(children))
    }
}
