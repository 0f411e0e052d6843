//! The demo GPUs' temperature, power draw and SM clock: each follows its GPU's utilisation,
//! as a real board's do (a busy GPU runs hot, near its power limit, at its boost clock; an
//! idle one cools and drops its clock), with a little seeded noise.

use super::noise;

/// What a board of the demo can do: its enforced power limit (mW), its idle draw (mW) and its
/// SM clock's maximum and idle (MHz).
pub(super) struct Board {
    pub(super) power_limit_mw: u32,
    idle_mw: u32,
    pub(super) sm_clock_max_mhz: u32,
    idle_clock_mhz: u32,
}

/// An H100 SXM: 700 W, 1980 MHz.
pub(super) const H100: Board = Board {
    power_limit_mw: 700_000,
    idle_mw: 72_000,
    sm_clock_max_mhz: 1980,
    idle_clock_mhz: 345,
};

/// An A100 SXM: 400 W, 1410 MHz.
pub(super) const A100: Board = Board {
    power_limit_mw: 400_000,
    idle_mw: 58_000,
    sm_clock_max_mhz: 1410,
    idle_clock_mhz: 210,
};

/// Temperature (°C), power draw (mW) and SM clock (MHz) of GPU `index` at story second `t`,
/// running at `util` percent.
pub(super) fn at(seed: u64, index: usize, board: &Board, util: u32, t: f64) -> (u32, u32, u32) {
    let busy = f64::from(util.min(100)) / 100.0;
    let t = t.max(0.0);
    // Each figure wanders at its own pace: the die's heat over half a minute, the clock's
    // boost bins every few seconds, the draw every sample.
    let jitter = |stream: u64, every: f64| {
        noise(
            seed,
            12_000 + 10 * stream + index as u64,
            (t / every) as u64,
        )
    };
    // The die settles between 31 °C idle and about 74 °C flat out, in whole degrees.
    let celsius = 31.0 + 41.0 * busy + 3.0 * jitter(0, 30.0);
    // A busy board draws most of its limit and wanders below it; it never passes it.
    let span = f64::from(board.power_limit_mw - board.idle_mw);
    let draw = f64::from(board.idle_mw) + span * busy * (0.86 + 0.12 * jitter(1, 1.0));
    let power_mw = (draw as u32).min(board.power_limit_mw);
    // Busy: the boost clock, throttled a few bins when the draw nears the limit; idle: parked.
    let clock_mhz = if util == 0 {
        board.idle_clock_mhz
    } else {
        let bins = (jitter(2, 5.0) * 4.0) as u32 * 15;
        board.sm_clock_max_mhz - bins
    };
    (celsius as u32, power_mw, clock_mhz)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vitals_follow_the_load_within_the_board() {
        for board in [&H100, &A100] {
            for t in 0..200 {
                let t = f64::from(t);
                let (idle_c, idle_mw, idle_mhz) = at(7, 0, board, 0, t);
                let (busy_c, busy_mw, busy_mhz) = at(7, 0, board, 95, t);
                assert!(busy_c > idle_c + 30, "{busy_c} vs {idle_c} °C");
                assert!(busy_mw > 2 * idle_mw && busy_mw <= board.power_limit_mw);
                assert!(idle_mw >= board.idle_mw);
                assert_eq!(idle_mhz, board.idle_clock_mhz);
                assert!(
                    busy_mhz <= board.sm_clock_max_mhz && busy_mhz + 60 > board.sm_clock_max_mhz
                );
            }
        }
    }
}
