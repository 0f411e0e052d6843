//! Reading a `strata serve` endpoint's `/metrics`: the Prometheus text format (0.0.4 and
//! OpenMetrics, which strata serve writes), samples only. Bounded: a line over
//! [`MAX_LINE`] or more than [`MAX_SAMPLES`] samples is refused with a line that says so,
//! never read into memory without end.

use super::Series;
use std::collections::BTreeMap;

/// The longest line read (a label of 10 KB passes; a megabyte line does not).
pub const MAX_LINE: usize = 64 * 1024;
/// The most samples one endpoint may send (strata serve sends a few thousand at most).
pub const MAX_SAMPLES: usize = 200_000;

/// The samples of `text`, each named by its metric, with `instance` added to its labels.
/// Comments and blank lines are skipped; a malformed line is an error naming its number.
pub fn parse(text: &str, instance: &str) -> Result<Vec<Series>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.len() > MAX_LINE {
            return Err(format!("line {}: longer than {MAX_LINE} bytes", n + 1));
        }
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if out.len() >= MAX_SAMPLES {
            return Err(format!("more than {MAX_SAMPLES} samples"));
        }
        let mut s = sample(line).map_err(|e| format!("line {}: {e}", n + 1))?;
        s.labels.insert("instance".into(), instance.to_string());
        out.push(s);
    }
    Ok(out)
}

fn sample(line: &str) -> Result<Series, String> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .ok_or("no value")?;
    let name = &line[..name_end];
    let valid_name = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if !valid_name {
        return Err("not a metric name".into());
    }
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = label_set(after, &mut labels)?;
    }
    let value = rest.split_whitespace().next().ok_or("no value")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse::<f64>().map_err(|_| "not a value")?,
    };
    Ok(Series {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Reads `name="value",...}` into `labels`; returns what follows the `}`.
fn label_set<'a>(mut s: &'a str, labels: &mut BTreeMap<String, String>) -> Result<&'a str, String> {
    loop {
        s = s.trim_start_matches([' ', ',']);
        if let Some(after) = s.strip_prefix('}') {
            return Ok(after);
        }
        let eq = s.find('=').ok_or("a label without a value")?;
        let key = s[..eq].trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err("not a label name".into());
        }
        let after = s[eq + 1..]
            .strip_prefix('"')
            .ok_or("a label value not quoted")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            let Some((i, c)) = chars.next() else {
                return Err("a label value not closed".into());
            };
            match c {
                '"' => break i,
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, other)) => {
                        value.push('\\');
                        value.push(other);
                    }
                    None => return Err("a label value not closed".into()),
                },
                c => value.push(c),
            }
        };
        labels.insert(key.to_string(), value);
        s = &after[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_with_escaped_labels_and_the_instance_added() {
        let text = "# HELP x y\n# TYPE strata_gpu_layer_bytes gauge\n\
            strata_gpu_layer_bytes{gpu=\"0\",name=\"a \\\"b\\\"\\\\c\\nd\",layer=\"live\"} 1.5e3\n\
            strata_samples_total 7\n\nup NaN\n# EOF\n";
        let got = parse(text, "n1:9842").unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].name, "strata_gpu_layer_bytes");
        assert_eq!(got[0].labels["name"], "a \"b\"\\c\nd");
        assert_eq!(got[0].labels["instance"], "n1:9842");
        assert_eq!(got[0].value, 1500.0);
        assert_eq!(got[1].value, 7.0);
        assert!(got[2].value.is_nan());
    }

    #[test]
    fn a_malformed_line_is_an_error_that_names_it() {
        for (text, why) in [
            ("x{a=\"1} 2\n", "line 1: a label value not closed"),
            ("x{a=1} 2\n", "line 1: a label value not quoted"),
            ("\n9x 1\n", "line 2: not a metric name"),
            ("x two\n", "line 1: not a value"),
            ("<html>\n", "line 1: no value"),
        ] {
            assert_eq!(parse(text, "i").unwrap_err(), why, "{text:?}");
        }
        let long = format!("x{{a=\"{}\"}} 1\n", "v".repeat(MAX_LINE));
        assert!(parse(&long, "i").unwrap_err().contains("longer than"));
        // A 10 KB label value is read whole.
        let wide = format!("x{{a=\"{}\"}} 1\n", "v".repeat(10_000));
        assert_eq!(parse(&wide, "i").unwrap()[0].labels["a"].len(), 10_000);
    }
}
