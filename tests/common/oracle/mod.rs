//! Oracles worked out from a fake NVML scenario file alone, never from the code under test:
//! what a correct NVML client must read from it ([`client`]), and the layers strata must
//! show for it ([`layers`]).

pub mod client;
pub mod layers;
