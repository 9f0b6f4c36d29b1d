//! Times the greedy search on synthetic binary data (a profiling target).
//!
//! ```text
//! cargo run --release --example profile_greedy -- 4000 64 [binary]
//! ```

use ndarray::Array2;
use rosetree::brt::{self, BrtParams, Mixing};
use rosetree::models::{BetaBernoulli, ClusterModel};

fn main() -> Result<(), rosetree::RoseTreeError> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(2000);
    let d: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(64);
    let binary = args.get(3).is_some_and(|s| s == "binary");
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let protos: Vec<u64> = (0..16).map(|_| next()).collect();
    let x = Array2::from_shape_fn((n, d), |(i, j)| {
        let bit = (protos[i % 16] >> (j % 64)) & 1 == 1;
        let flip = next() % 10 == 0;
        f64::from(u8::from(bit ^ flip))
    });
    let mut model = BetaBernoulli::new(&[1.0], &[1.0], d)?;
    model.prepare(n);
    let params = BrtParams::new(Mixing::Brt { gamma: 0.5 }).binary(binary);
    let start = std::time::Instant::now();
    let tree = brt::fit(&model, &params.check()?, x.view())?;
    eprintln!(
        "n={n} d={d} binary={binary}: {:.3}s, ln p = {:.3}",
        start.elapsed().as_secs_f64(),
        tree.log_evidence()
    );
    Ok(())
}
