//! A GPU's vitals as its panel shows them: temperature, power draw against its limit, SM
//! clock against its most, in the richest form the room allows.

use crate::sample::GpuInfo;
use unicode_width::UnicodeWidthStr;

/// The five figures a line is made of (a copy: the line is drawn every frame).
#[derive(Clone, Copy)]
struct Figures {
    temperature: Option<u32>,
    power_mw: Option<u32>,
    power_limit_mw: Option<u32>,
    sm_clock_mhz: Option<u32>,
    sm_clock_max_mhz: Option<u32>,
}

/// The forms, richest first: which parts a line holds and whether the limits come with them.
const FORMS: [(bool, bool, bool, bool); 5] = [
    // (power, power's limit, clock, clock's most)
    (true, true, true, true),
    (true, true, true, false),
    (true, false, true, false),
    (true, false, false, false),
    (false, false, false, false),
];

/// `64°C 412/700W 1755/1980MHz`, or a shorter form where `width` is less (down to the
/// temperature alone, then nothing). Each unknown figure is `n/a` with its name.
///
/// The form is chosen as if each figure stood at its limit (the draw at the power limit, the
/// clock at its most, the temperature at three digits), so that it holds still while the
/// figures move under a fixed width.
pub(crate) fn line(gpu: &GpuInfo, width: usize, ascii: bool) -> String {
    let now = Figures {
        temperature: gpu.temperature,
        power_mw: gpu.power_mw,
        power_limit_mw: gpu.power_limit_mw,
        sm_clock_mhz: gpu.sm_clock_mhz,
        sm_clock_max_mhz: gpu.sm_clock_max_mhz,
    };
    let widest = Figures {
        temperature: now.temperature.map(|t| t.max(100)),
        power_mw: now
            .power_mw
            .map(|p| now.power_limit_mw.map_or(p, |l| p.max(l))),
        sm_clock_mhz: now
            .sm_clock_mhz
            .map(|c| now.sm_clock_max_mhz.map_or(c, |m| c.max(m))),
        ..now
    };
    FORMS
        .into_iter()
        .find(|&form| render(widest, form, ascii).width() <= width)
        .map(|form| render(now, form, ascii))
        .filter(|line| line.width() <= width)
        .unwrap_or_default()
}

fn render(
    gpu: Figures,
    (power, power_limit, clock, clock_max): (bool, bool, bool, bool),
    ascii: bool,
) -> String {
    let degrees = if ascii { "C" } else { "°C" };
    let mut parts = vec![match gpu.temperature {
        Some(c) => format!("{c}{degrees}"),
        None => "temp n/a".to_string(),
    }];
    let watts = |mw: u32| (f64::from(mw) / 1000.0).round() as u64;
    if power {
        parts.push(match (gpu.power_mw, gpu.power_limit_mw) {
            (Some(draw), Some(limit)) if power_limit => {
                format!("{}/{}W", watts(draw), watts(limit))
            }
            (Some(draw), _) => format!("{}W", watts(draw)),
            (None, _) => "power n/a".to_string(),
        });
    }
    if clock {
        parts.push(match (gpu.sm_clock_mhz, gpu.sm_clock_max_mhz) {
            (Some(now), Some(most)) if clock_max => format!("{now}/{most}MHz"),
            (Some(now), _) => format!("{now}MHz"),
            (None, _) => "clock n/a".to_string(),
        });
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu() -> GpuInfo {
        let mut gpu = GpuInfo::new(0, "GPU-x".into());
        gpu.temperature = Some(64);
        gpu.power_mw = Some(412_345);
        gpu.power_limit_mw = Some(700_000);
        gpu.sm_clock_mhz = Some(1755);
        gpu.sm_clock_max_mhz = Some(1980);
        gpu
    }

    #[test]
    fn the_richest_form_that_fits() {
        let gpu = gpu();
        let at = |width| line(&gpu, width, false);
        assert_eq!(at(80), "64°C 412/700W 1755/1980MHz");
        // Room is judged at three digits of temperature: 27 cells hold the whole line.
        assert_eq!(at(27), "64°C 412/700W 1755/1980MHz");
        assert_eq!(at(26), "64°C 412/700W 1755MHz");
        assert_eq!(at(21), "64°C 412W 1755MHz");
        assert_eq!(at(16), "64°C 412W");
        assert_eq!(at(8), "64°C");
        assert_eq!(at(4), "");
        assert_eq!(line(&gpu, 80, true), "64C 412/700W 1755/1980MHz");
    }

    #[test]
    fn the_form_holds_still_while_the_figures_move() {
        // At a width where the draw's limit just fits, a draw of one digit fewer keeps the form.
        let mut gpu = gpu();
        let width = line(&gpu, 80, false).width() + 1;
        let rich = line(&gpu, width, false);
        gpu.power_mw = Some(95_000);
        gpu.sm_clock_mhz = Some(210);
        gpu.temperature = Some(31);
        let idle = line(&gpu, width, false);
        assert_eq!(rich, "64°C 412/700W 1755/1980MHz");
        assert_eq!(idle, "31°C 95/700W 210/1980MHz");
        // A draw above the limit (a moment's excursion) still fits the form chosen for it.
        gpu.power_mw = Some(712_000);
        assert!(line(&gpu, width, false).starts_with("31°C 712/700W"));
    }

    #[test]
    fn unknown_figures_say_n_a() {
        let mut gpu = gpu();
        gpu.power_mw = None;
        gpu.sm_clock_max_mhz = None;
        gpu.temperature = None;
        assert_eq!(line(&gpu, 80, false), "temp n/a power n/a 1755MHz");
        assert_eq!(
            line(&GpuInfo::new(1, "GPU-y".into()), 80, false),
            "temp n/a power n/a clock n/a"
        );
    }
}
