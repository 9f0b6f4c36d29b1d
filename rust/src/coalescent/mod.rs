//! Kingman's coalescent clustering (Teh, Daumé & Roy 2007): inference over timed binary trees.

pub mod smc;
