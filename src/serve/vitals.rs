//! A GPU's vitals as gauges: its temperature, power draw and enforced limit, and SM clock,
//! in base units (degrees Celsius, watts, hertz), labelled as its memory is (`gpu`, `uuid`,
//! `name`). A figure NVML does not give (or refused) is absent, never 0.

use super::labels::{gpu_labels, Floats, Ints};
use crate::sample::NodeSample;
use prometheus_client::registry::{Registry, Unit};

/// Milliwatts in a watt, hertz in a megahertz.
const MW_PER_W: f64 = 1000.0;
const HZ_PER_MHZ: i64 = 1_000_000;

/// Registers the four families, with a series for each GPU where its figure is known.
pub(super) fn register(registry: &mut Registry, sample: &NodeSample) {
    let temperature = Ints::default();
    let power = Floats::default();
    let power_limit = Floats::default();
    let sm_clock = Ints::default();
    for gpu in &sample.gpus {
        if gpu.lost {
            // No value of a lost GPU's sample is current.
            continue;
        }
        let base = gpu_labels(gpu);
        if let Some(celsius) = gpu.temperature {
            temperature.get_or_create(&base).set(i64::from(celsius));
        }
        if let Some(mw) = gpu.power_mw {
            power.get_or_create(&base).set(f64::from(mw) / MW_PER_W);
        }
        if let Some(mw) = gpu.power_limit_mw {
            power_limit
                .get_or_create(&base)
                .set(f64::from(mw) / MW_PER_W);
        }
        if let Some(mhz) = gpu.sm_clock_mhz {
            sm_clock
                .get_or_create(&base)
                .set(i64::from(mhz) * HZ_PER_MHZ);
        }
    }
    registry.register_with_unit(
        "strata_gpu_temperature",
        "The GPU die's temperature (NVML's GPU sensor); absent where NVML does not give it",
        Unit::Celsius,
        temperature,
    );
    registry.register_with_unit(
        "strata_gpu_power",
        "The board's power draw (nvmlDeviceGetPowerUsage); absent where NVML does not give it",
        Unit::Other("watts".into()),
        power,
    );
    registry.register_with_unit(
        "strata_gpu_power_limit",
        "The power limit the GPU enforces (nvmlDeviceGetEnforcedPowerLimit); absent where NVML does not give it",
        Unit::Other("watts".into()),
        power_limit,
    );
    registry.register_with_unit(
        "strata_gpu_sm_clock",
        "The SM clock now (nvmlDeviceGetClockInfo, NVML_CLOCK_SM); absent where NVML does not give it",
        Unit::Other("hertz".into()),
        sm_clock,
    );
}
