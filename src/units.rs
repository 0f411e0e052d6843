//! Human-readable figures: binary units on screen, `n/a` for unknown.

const KIB: f64 = 1024.0;

/// Bytes in binary units with three significant figures: `512 B`, `1.50 KiB`, `38.2 GiB`.
pub fn bytes(value: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if value < 1024 {
        return format!("{value} B");
    }
    let mut scaled = value as f64;
    let mut unit = 0;
    while scaled >= 1000.0 && unit + 1 < UNITS.len() {
        scaled /= KIB;
        unit += 1;
    }
    let text = if scaled >= 100.0 {
        format!("{scaled:.0}")
    } else if scaled >= 10.0 {
        format!("{scaled:.1}")
    } else {
        format!("{scaled:.2}")
    };
    format!("{text} {}", UNITS[unit])
}

/// Like [`bytes`], `n/a` when unknown.
pub fn opt_bytes(value: Option<u64>) -> String {
    value.map_or_else(|| "n/a".to_string(), bytes)
}

/// Bytes as GiB with one decimal and no unit, for dense columns: `38.2`.
pub fn gib(value: u64) -> String {
    format!("{:.1}", value as f64 / (KIB * KIB * KIB))
}

/// Like [`gib`], `n/a` when unknown.
pub fn opt_gib(value: Option<u64>) -> String {
    value.map_or_else(|| "n/a".to_string(), gib)
}

/// A percentage, `n/a` when unknown.
pub fn opt_percent(value: Option<u32>) -> String {
    value.map_or_else(|| "n/a".to_string(), |v| format!("{v}%"))
}

/// Seconds as a short duration: `42s`, `3m07s`, `2h05m`.
pub fn duration(secs: f64) -> String {
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

/// Wall-clock time of day (UTC) of a unix timestamp: `09:14:05`.
pub fn clock(unix_secs: f64) -> String {
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
        assert_eq!(bytes(1000 << 20), "0.98 GiB");
        assert_eq!(opt_bytes(None), "n/a");
    }

    #[test]
    fn durations_and_clock() {
        assert_eq!(duration(42.4), "42s");
        assert_eq!(duration(187.0), "3m07s");
        assert_eq!(duration(7500.0), "2h05m");
        assert_eq!(clock(1_767_258_000.0 + 3.0), "09:00:03");
    }
}
