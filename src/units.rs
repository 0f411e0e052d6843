//! Human-readable figures: binary units on screen, `n/a` for unknown.

const KIB: f64 = 1024.0;

/// Bytes in binary units with three significant figures: `512 B`, `1.50 KiB`, `38.2 GiB`.
pub(crate) fn bytes(value: u64) -> String {
    let (number, unit) = scaled(value);
    format!("{number} {unit}")
}

/// The binary units, to the largest a `u64` reaches (16 EiB).
const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/// Bytes as three significant figures and their unit: `("38.2", "GiB")`. A figure changes
/// unit at 1024 of the one below, so it is never below 1 in its unit and one magnitude is one
/// unit in every column: 1000 to 1023 of a unit are shown whole (`1000`..`1023`, as bytes
/// below 1 KiB are), never as `0.98` of the next. At most four digits; every `u64` has a unit
/// (the largest, 2^64 − 1, is `16.0 EiB`).
pub(crate) fn scaled(value: u64) -> (String, &'static str) {
    let mut unit = 0;
    while unit + 1 < UNITS.len() && value >> (10 * (unit + 1)) > 0 {
        unit += 1;
    }
    if unit == 0 {
        return (value.to_string(), UNITS[0]);
    }
    let mut scaled = value as f64 / (1u64 << (10 * unit)) as f64;
    // Rounded to `1024`, a figure is its next unit's `1.00` (1023.7 MiB is `1.00 GiB`).
    if scaled.round() >= KIB && unit + 1 < UNITS.len() {
        scaled /= KIB;
        unit += 1;
    }
    let text = if scaled >= 99.95 {
        format!("{scaled:.0}")
    } else if scaled >= 9.995 {
        format!("{scaled:.1}")
    } else {
        format!("{scaled:.2}")
    };
    (text, UNITS[unit])
}

/// Bytes in the short form of dense columns and legends: `38.2G`, `532M`, `1.50K`, `512B`,
/// `16.0E`.
pub(crate) fn short_bytes(value: u64) -> String {
    let (number, unit) = scaled(value);
    format!("{number}{}", &unit[..1])
}

/// Like [`bytes`], `n/a` when unknown.
pub(crate) fn opt_bytes(value: Option<u64>) -> String {
    value.map_or_else(|| "n/a".to_string(), bytes)
}

/// Bytes as GiB with one decimal and no unit, for dense columns: `38.2`.
pub(crate) fn gib(value: u64) -> String {
    format!("{:.1}", value as f64 / (KIB * KIB * KIB))
}

/// A percentage, `n/a` when unknown.
pub(crate) fn opt_percent(value: Option<u32>) -> String {
    value.map_or_else(|| "n/a".to_string(), |v| format!("{v}%"))
}

/// A sampling interval, as every screen and line writes it: seconds to two decimals at
/// most, without trailing zeros, and the unit: `1s`, `0.5s`, `0.25s`, `2.5s`, `10s`; `n/a`
/// where it is no interval (not finite, or not above zero).
pub fn interval(secs: f64) -> String {
    if !secs.is_finite() || secs <= 0.0 {
        return "n/a".into();
    }
    let text = format!("{secs:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    // Below 0.005 s two decimals round to nothing: say the milliseconds.
    if text == "0" {
        return format!("{}ms", (secs * 1000.0).round().max(1.0));
    }
    format!("{text}s")
}

/// Seconds as a short duration: `42s`, `3m07s`, `2h05m`.
pub(crate) fn duration(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "n/a".into();
    }
    let s = secs.round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// An age as a list shows it, to the second for its first minute, then to the minute, then
/// to the hour past a day: `42s`, `3m`, `2h05m`, `3d04h`. A screen of ages redrawn every
/// second then changes once a minute.
pub(crate) fn age(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "n/a".into();
    }
    let s = secs.round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// Wall-clock time of day (UTC) of a unix timestamp: `09:14:05`.
pub(crate) fn clock(unix_secs: f64) -> String {
    if !unix_secs.is_finite() || unix_secs < 0.0 {
        return "--:--:--".into();
    }
    let day_secs = (unix_secs as u64) % 86_400;
    format!(
        "{:02}:{:02}:{:02}",
        day_secs / 3600,
        (day_secs % 3600) / 60,
        day_secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_use_binary_units_and_three_figures() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(12 << 30), "12.0 GiB");
        assert_eq!(bytes(80 * (1 << 30)), "80.0 GiB");
        assert_eq!(bytes(512 << 20), "512 MiB");
        assert_eq!(opt_bytes(None), "n/a");
    }

    /// One magnitude, one unit: a figure changes unit at 1024 of the one below, so 1000 to
    /// 1023 MiB are `1000M`..`1023M` beside `988M` in a column, never `0.98G`.
    #[test]
    fn a_unit_changes_at_1024_of_the_one_below() {
        assert_eq!(bytes(1000 << 20), "1000 MiB");
        assert_eq!(short_bytes(1023 << 20), "1023M");
        assert_eq!(short_bytes(988 << 20), "988M");
        assert_eq!(short_bytes(1 << 30), "1.00G");
        assert_eq!(short_bytes(1000 << 10), "1000K");
        assert_eq!(bytes((1000 << 20) - (300 << 10)), "1000 MiB", "999.7 MiB");
        assert_eq!(
            bytes((1 << 30) - (300 << 10)),
            "1.00 GiB",
            "1023.7 MiB rounds to 1 GiB"
        );
        // Every figure is at least 1 in its unit, and below 1024 of it, as shown.
        for value in (0..4096u64).map(|i| i * 997 * 1021 + 1023) {
            let (number, unit) = scaled(value);
            let figure: f64 = number.parse().expect("a number");
            assert!(
                (1.0..1024.0).contains(&figure) || value == 0,
                "{number} {unit}"
            );
            let power = UNITS.iter().position(|u| *u == unit).expect("a unit") as u32;
            let exact = value as f64 / 1024f64.powi(power as i32);
            assert!(
                (figure - exact).abs() <= exact * 0.006,
                "{value}: {number} {unit}"
            );
        }
    }

    #[test]
    fn absurd_values_keep_a_unit_and_three_figures() {
        assert_eq!(bytes(u64::MAX), "16.0 EiB");
        assert_eq!(bytes(8192 << 50), "8.00 EiB");
        assert_eq!(bytes(999 << 50), "999 PiB");
        assert_eq!(bytes(1000 << 50), "1000 PiB");
        assert_eq!(short_bytes(u64::MAX), "16.0E");
        assert_eq!(short_bytes(50 << 20), "50.0M");
        assert_eq!(short_bytes(1 << 20), "1.00M");
        assert_eq!(short_bytes(1000), "1000B");
        for shift in 0..64 {
            let (number, unit) = scaled(1u64 << shift);
            assert!(number.len() <= 4 && !unit.is_empty(), "{number} {unit}");
        }
        for shift in 0..64 {
            let (number, unit) = scaled((1u64 << shift).wrapping_sub(1).max(1) | 1);
            assert!(number.len() <= 4 && !unit.is_empty(), "{number} {unit}");
        }
    }

    #[test]
    fn an_interval_has_one_spelling() {
        assert_eq!(interval(1.0), "1s");
        assert_eq!(interval(10.0), "10s");
        assert_eq!(interval(0.2), "0.2s");
        assert_eq!(interval(0.5), "0.5s");
        assert_eq!(interval(0.25), "0.25s");
        assert_eq!(interval(2.5), "2.5s");
        assert_eq!(interval(0.05), "0.05s");
        assert_eq!(interval(0.001), "1ms");
        assert_eq!(interval(0.0), "n/a");
        assert_eq!(interval(f64::NAN), "n/a");
        assert_eq!(interval(-1.0), "n/a");
    }

    #[test]
    fn durations_and_clock() {
        assert_eq!(duration(42.4), "42s");
        assert_eq!(duration(187.0), "3m07s");
        assert_eq!(duration(7500.0), "2h05m");
        assert_eq!(clock(1_767_258_000.0 + 3.0), "09:00:03");
        assert_eq!(age(42.4), "42s");
        assert_eq!(age(187.0), "3m");
        assert_eq!(age(7500.0), "2h05m");
        assert_eq!(age(3.0 * 86_400.0 + 4.0 * 3600.0 + 5.0), "3d04h");
    }
}
