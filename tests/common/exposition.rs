//! Reading `strata serve`'s output back: a parser of the Prometheus text format (0.0.4),
//! written from the format's description rather than from strata's encoder, a plain HTTP
//! client, and a running `strata serve` child.

use super::{strata, Running};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub type Labels = BTreeMap<String, String>;

/// One metric family: its `# HELP`, `# TYPE`, and samples.
#[derive(Debug, Default, Clone)]
pub struct Family {
    pub help: Option<String>,
    pub kind: Option<String>,
    pub samples: Vec<(Labels, f64)>,
}

/// Families by name, in the order met.
#[derive(Debug, Default, Clone)]
pub struct Exposition {
    pub families: BTreeMap<String, Family>,
    pub order: Vec<String>,
}

impl Exposition {
    pub fn family(&self, name: &str) -> &Family {
        self.families
            .get(name)
            .unwrap_or_else(|| panic!("no metric {name}; have {:?}", self.order))
    }

    /// The samples of `name` whose labels include every pair of `with`.
    pub fn select(&self, name: &str, with: &[(&str, &str)]) -> Vec<(Labels, f64)> {
        self.families
            .get(name)
            .map(|f| {
                f.samples
                    .iter()
                    .filter(|(labels, _)| {
                        with.iter()
                            .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
                    })
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Parses the text format; panics, naming the line, on anything it does not allow.
pub fn parse(text: &str) -> Exposition {
    let mut out = Exposition::default();
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let keyword = parts.next().unwrap_or_default();
            let name = parts.next().unwrap_or_default().to_string();
            let value = parts.next().unwrap_or_default().to_string();
            match keyword {
                "HELP" | "TYPE" => {
                    if !out.families.contains_key(&name) {
                        out.order.push(name.clone());
                    }
                    let family = out.families.entry(name).or_default();
                    let slot = if keyword == "HELP" {
                        &mut family.help
                    } else {
                        &mut family.kind
                    };
                    assert!(slot.is_none(), "line {n}: a second {keyword}: {line}");
                    *slot = Some(value);
                }
                "UNIT" | "EOF" => {}
                _ => {}
            }
            continue;
        }
        let (name, labels, rest) =
            parse_sample(line).unwrap_or_else(|e| panic!("line {n}: {e}: {line:?}"));
        let value: f64 = rest
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .parse()
            .unwrap_or_else(|_| panic!("line {n}: not a value: {line:?}"));
        let family_name = family_of(&out, &name);
        out.families
            .get_mut(&family_name)
            .unwrap_or_else(|| panic!("line {n}: sample of {name} before its TYPE"))
            .samples
            .push((labels, value));
    }
    out
}

/// A counter's samples are `<family>_total` in OpenMetrics; in 0.0.4 the family has the name.
fn family_of(out: &Exposition, name: &str) -> String {
    if out.families.contains_key(name) {
        return name.to_string();
    }
    name.strip_suffix("_total")
        .filter(|base| out.families.contains_key(*base))
        .map(str::to_string)
        .unwrap_or_else(|| name.to_string())
}

fn parse_sample(line: &str) -> Result<(String, Labels, &str), String> {
    let name_end = line.find(['{', ' ']).ok_or("no value")?;
    let name = &line[..name_end];
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        || name.starts_with(|c: char| c.is_ascii_digit())
    {
        return Err(format!("bad metric name {name:?}"));
    }
    let mut labels = Labels::new();
    let mut rest = &line[name_end..];
    if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices().peekable();
        loop {
            // A label name, `=`, a quoted value with \\ \" \n escapes, then `,` or `}`.
            let start = chars.peek().map(|&(i, _)| i).ok_or("labels not closed")?;
            if body[start..].starts_with('}') {
                chars.next();
                break;
            }
            let mut key_end = start;
            for (i, c) in chars.by_ref() {
                if c == '=' {
                    key_end = i;
                    break;
                }
                if !(c.is_ascii_alphanumeric() || c == '_') {
                    return Err(format!("bad label name character {c:?}"));
                }
            }
            let key = body[start..key_end].to_string();
            if chars.next().map(|(_, c)| c) != Some('"') {
                return Err("label value not quoted".into());
            }
            let mut value = String::new();
            loop {
                match chars.next().ok_or("label value not closed")?.1 {
                    '"' => break,
                    '\\' => match chars.next().ok_or("escape at end")?.1 {
                        '\\' => value.push('\\'),
                        '"' => value.push('"'),
                        'n' => value.push('\n'),
                        other => return Err(format!("unknown escape \\{other}")),
                    },
                    '\n' => return Err("raw newline in a label value".into()),
                    c => value.push(c),
                }
            }
            if labels.insert(key.clone(), value).is_some() {
                return Err(format!("label {key} twice"));
            }
            match chars.next().ok_or("labels not closed")?.1 {
                ',' => continue,
                '}' => break,
                c => return Err(format!("unexpected {c:?} after a label")),
            }
        }
        let consumed = chars.peek().map_or(body.len(), |&(i, _)| i);
        rest = &body[consumed..];
    }
    let rest = rest.strip_prefix(' ').ok_or("no space before the value")?;
    Ok((name.to_string(), labels, rest))
}

/// An HTTP response: status, headers (lower-case names), body.
pub struct Response {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: String,
}

/// `GET path` over HTTP/1.1 with `Connection: close`, optionally with an `Accept` header.
pub fn get(addr: &str, path: &str, accept: Option<&str>) -> std::io::Result<Response> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let raw = String::from_utf8(raw).map_err(|e| std::io::Error::other(e.to_string()))?;
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no end of headers"))?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect::<HashMap<_, _>>();
    let body = if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok(Response {
        status,
        headers,
        body,
    })
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// A running `strata serve`, killed (and reaped) on drop.
pub struct Server {
    pub child: Running,
    /// `127.0.0.1:PORT`, as it printed.
    pub addr: String,
}

impl Server {
    /// `strata serve --demo` of seed `seed`, at story time 300 s (a node of the fleet tests:
    /// its host is `demo-node-SEED`, `demo-node` for 0).
    pub fn demo(seed: u32) -> Server {
        Server::start(
            &[
                "--demo",
                "--demo-at",
                "300",
                "--demo-seed",
                &seed.to_string(),
            ],
            &[],
        )
    }

    /// Starts `strata serve --listen 127.0.0.1:0 ARGS` with `envs`, and waits for the
    /// address it prints.
    pub fn start(args: &[&str], envs: &[(&str, &std::ffi::OsStr)]) -> Server {
        let mut command = Command::new(strata());
        command
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("STRATA_FEED_DIR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in envs {
            command.env(k, v);
        }
        let mut child = Running::spawn(&mut command);
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("strata serve's first line");
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        Server { child, addr }
    }

    /// `/metrics`, parsed, once the server answers (it takes the first sample first).
    pub fn metrics(&self) -> Exposition {
        parse(&self.metrics_text())
    }

    pub fn metrics_text(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match get(&self.addr, "/metrics", None) {
                Ok(r) if r.status == 200 => return r.body,
                other if Instant::now() > deadline => {
                    panic!("no metrics: {:?}", other.map(|r| (r.status, r.body)))
                }
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}
