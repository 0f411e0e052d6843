//! The systemd unit of `strata serve --record` (assets/systemd/strata-serve.service): it
//! passes `systemd-analyze verify` (Debian's `systemd` package; tests/all installs it), and
//! its command line is one strata parses, with the flight record and ring it promises.

use crate::common;

use common::{strata, Scratch};
use std::path::Path;
use std::process::Command;

const UNIT: &str = include_str!("../../assets/systemd/strata-serve.service");

fn exec_start() -> Vec<String> {
    let line = UNIT
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart");
    line.split_whitespace().map(str::to_string).collect()
}

#[test]
fn the_unit_passes_systemd_analyze_verify() {
    let Ok(found) = Command::new("systemd-analyze").arg("--version").output() else {
        panic!("systemd-analyze is missing (hint: apt-get install systemd; tests/all does)");
    };
    assert!(found.status.success());
    let scratch = Scratch::new("unit");
    let dir = &scratch.dir;
    // Verified against this build's binary (verify checks that ExecStart's exists), and its
    // man page (`Documentation=man:strata-serve(1)`) where the wheel's pages are.
    let unit = UNIT.replace("/usr/local/bin/strata", strata());
    let path = dir.join("strata-serve.service");
    std::fs::write(&path, unit).expect("write");
    let man =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/packaging/wheel-data/data/share/man");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .env("MANPATH", &man)
        .output()
        .expect("runs");
    let said =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(
        !said.contains("strata-serve.service:"),
        "no warning about the unit: {said}"
    );
}

#[test]
fn the_units_command_line_is_strata_serve_with_its_flight_record() {
    let args = exec_start();
    assert_eq!(args[0], "/usr/local/bin/strata");
    let cli = strata::cli::Cli::parse_with(&args, |_| false).expect("parses");
    match cli.command {
        Some(strata::cli::Command::Serve(serve)) => {
            assert_eq!(
                serve.record.as_deref(),
                Some(Path::new("/var/lib/strata/ring"))
            );
            assert_eq!(
                serve.ring.ring,
                Some(std::time::Duration::from_secs(6 * 3600))
            );
            assert_eq!(serve.listen, "127.0.0.1:9842");
        }
        other => panic!("{other:?}"),
    }
    for needed in [
        "User=root",
        "Restart=on-failure",
        "PrivateTmp=no",
        "StateDirectory=strata",
    ] {
        assert!(UNIT.lines().any(|l| l == needed), "{needed}");
    }
}
