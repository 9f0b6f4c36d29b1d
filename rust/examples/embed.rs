//! The native-tool use case: the crate alone (no Python). Binary rows clustered by a rose
//! tree and by BHC; real-valued rows by Kingman's coalescent and by a Pitman–Yor diffusion
//! tree, each then asked for the predictive density of new rows; the rose tree's
//! hyperparameters and the coalescent's rate `Λ` are then learnt with their trees.
//!
//! ```text
//! cargo run --release --example embed
//! ```

use ndarray::{Array2, array};
use rosetree::brt::{self, BrtParams, LearnParams, Mixing};
use rosetree::coalescent::learn::{Lambda, LearnableRate};
use rosetree::coalescent::{CoalescentParams, Fitted};
use rosetree::models::BetaBernoulli;
use rosetree::models::messages::BrownianDiffusion;
use rosetree::parallel::Threads;
use rosetree::pydt::mcmc::{self, McmcConfig, Start};
use rosetree::pydt::{self, PydtParams};

fn say(line: std::fmt::Arguments<'_>) {
    std::io::Write::write_fmt(&mut std::io::stdout(), line).expect("stdout is writable");
}

fn main() -> Result<(), rosetree::RoseTreeError> {
    // Three groups of rows, each with ones in its own block of four features.
    let x = Array2::from_shape_fn((12, 12), |(i, j)| {
        let group = i / 4;
        let in_block = j / 4 == group;
        let noise = (i * 7 + j * 3) % 13 == 0;
        f64::from(u8::from(in_block ^ noise))
    });
    let model = BetaBernoulli::new(&[1.0], &[1.0], x.ncols())?;

    for (name, params) in [
        ("BRT", BrtParams::new(Mixing::Brt { gamma: 0.5 })),
        (
            "BHC",
            BrtParams::new(Mixing::Gamma { gamma: 0.5 }).binary(true),
        ),
    ] {
        let tree = brt::fit(&model, &params.check()?, x.view())?;
        say(format_args!(
            "{name}: {}\n  ln p(D|T) = {:.3}, 10^{:.2} partitions\n",
            tree.to_newick(None),
            tree.log_evidence(),
            tree.n_partitions_log10()
        ));
    }

    // The rose tree's hyperparameters (α and β per feature, γ) learnt with its tree (BRT
    // §1.4.2): coordinate ascent between the greedy tree and L-BFGS-B on the evidence.
    let search = BrtParams::new(Mixing::Brt { gamma: 0.5 });
    let learned = brt::learn(
        &model,
        &LearnParams::new(search).check()?,
        x.view(),
        &|| false,
    )?;
    let Mixing::Brt { gamma } = learned.mixing else {
        unreachable!("the rule is kept")
    };
    say(format_args!(
        "BRT, learnt: ln p(D|T) from {:.3} to {:.3}, gamma = {gamma:.3}, alpha[0] = {:.3}\n",
        learned.trace[0],
        learned.log_evidence(),
        learned.model.alpha()[0]
    ));

    // Two groups of real-valued rows, and two new rows: one in a group, one far away.
    let y = Array2::from_shape_fn((10, 2), |(i, j)| {
        let centre = if i < 5 { 0.0 } else { 4.0 };
        centre + 0.1 * ((i * 3 + j * 5) % 7) as f64
    });
    let new = array![[0.2, 0.3], [10.0, -10.0]];
    let threads = Threads::new(Some(1))?;

    let model = BrownianDiffusion::isotropic(1.0, 2)?.with_noise(0.1)?;
    let params = CoalescentParams::new().check()?;
    let coalescent = Fitted::fit(model, &params, y.view(), &|| false)?;
    let density = coalescent.log_density(new.view(), &threads)?;
    say(format_args!(
        "coalescent: {}\n  ln p(x, pi) = {:.3}, ln p(new rows) = {:.3}, {:.3}\n",
        coalescent.tree().to_newick(None),
        coalescent.log_joint(),
        density[0],
        density[1]
    ));
    // Λ = λI learnt with the tree, under the weak prior whose mode is the starting λ = 1.
    let start = Lambda::Shared(1.0);
    let prior = BrownianDiffusion::default_prior(&start, 2);
    let learned = coalescent.learn(start, &prior, &params, 10, &|| false)?;
    say(format_args!(
        "  learnt Lambda = {:?}, ln p(x, pi) + ln p(Lambda) from {:.3} to {:.3}\n",
        learned.lambda.values(),
        learned.trace[0],
        learned.trace[learned.trace.len() - 1]
    ));

    let start = Start {
        tree: None,
        params: PydtParams::new(1.0, 0.2, 1.0)?,
        sigma2: 1.0,
    };
    let chain = mcmc::run(
        y.view(),
        start,
        &McmcConfig::default(),
        7,
        &|| false,
        &mut |_, _| {},
    )?;
    let diffusion = pydt::Fitted::new(y.view(), chain, 3)?;
    let density = diffusion.log_density(new.view(), &threads)?;
    say(format_args!(
        "diffusion tree: {}\n  ln p(X, T, t) = {:.3}, ln p(new rows) = {:.3}, {:.3} \
         (the mean over {} states)\n",
        diffusion.best().tree.to_newick(None),
        diffusion.best().log_joint,
        density[0],
        density[1],
        diffusion.samples().len()
    ));
    Ok(())
}
