//! The native-tool use case: cluster binary rows with the crate alone (no Python).
//!
//! ```text
//! cargo run --release --example embed
//! ```

use ndarray::Array2;
use rosetree::brt::{self, BrtParams, Mixing};
use rosetree::models::BetaBernoulli;

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
        let out = std::io::Write::write_fmt(
            &mut std::io::stdout(),
            format_args!(
                "{name}: {}\n  ln p(D|T) = {:.3}, 10^{:.2} partitions\n",
                tree.to_newick(None),
                tree.log_evidence(),
                tree.n_partitions_log10()
            ),
        );
        out.expect("stdout is writable");
    }
    Ok(())
}
