//! What a process's interpreter is and what its command line and environment say of it: the
//! CPython version (from the `libpython` it maps, else its executable's name), and whether
//! remote debugging, which `sys.remote_exec` needs, is disabled.

use super::attach::is_python;
use std::path::Path;

/// The first CPython with `sys.remote_exec`.
pub(crate) const REMOTE_EXEC: (u32, u32) = (3, 14);

/// What runs a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interpreter {
    /// CPython, with its version where it can be told.
    CPython(Option<(u32, u32)>),
    /// PyPy: no `sys.remote_exec`.
    PyPy,
    NotPython,
}

/// `3.14` from `libpython3.14.so.1.0` or `python3.14t`: the digits after `prefix`.
fn version_after(text: &str, prefix: &str) -> Option<(u32, u32)> {
    let rest = text.rsplit_once(prefix)?.1;
    let (major, rest) = rest.split_once('.')?;
    let minor: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The interpreter of a process whose `/proc/PID/exe` is `exe` and whose `maps` (if
/// readable) are given: the libpython it maps tells the version best, else the executable's
/// name.
pub(crate) fn interpreter(exe: &Path, maps: Option<&str>) -> Interpreter {
    if !is_python(exe) {
        return Interpreter::NotPython;
    }
    let name = exe
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.starts_with("pypy") {
        return Interpreter::PyPy;
    }
    let mapped = maps.and_then(|maps| {
        maps.lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find_map(|path| {
                let file = path.rsplit('/').next()?;
                file.starts_with("libpython")
                    .then(|| version_after(file, "libpython"))
                    .flatten()
            })
    });
    Interpreter::CPython(mapped.or_else(|| version_after(&name, "python")))
}

/// Whether a Python 3.14 process has remote debugging, as far as its environment and
/// command line tell (a build without it cannot be told from outside).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RemoteDebug {
    /// Nothing disables it; `note` says what looked as if it might.
    Enabled {
        note: Option<&'static str>,
    },
    Disabled(&'static str),
    /// `PYTHON_DISABLE_REMOTE_DEBUG` is set, but `-E` or `-I` may make Python ignore it.
    Unsure,
    /// The environment cannot be read (another user's process).
    Unknown,
}

/// The interpreter's own `-X` options of a command line (NUL-separated, as in
/// `/proc/PID/cmdline`), and whether `-E` or `-I` is among its flags: options end at the
/// script, `-c`, `-m`, `-` or `--`.
fn interpreter_options(cmdline: &[u8]) -> (Vec<String>, bool) {
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let mut xoptions = Vec::new();
    let mut ignores_env = false;
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        if arg == "--" || arg == "-" || !arg.starts_with('-') {
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            // The one long option that takes a value.
            if long == "check-hash-based-pycs" {
                rest.next();
            }
            continue;
        }
        let flags: Vec<char> = arg.chars().skip(1).collect();
        for (i, flag) in flags.iter().enumerate() {
            match flag {
                'c' | 'm' => return (xoptions, ignores_env),
                'E' | 'I' => ignores_env = true,
                'X' | 'W' => {
                    let inline: String = flags[i + 1..].iter().collect();
                    let value = match inline.is_empty() {
                        true => rest.next().cloned().unwrap_or_default(),
                        false => inline,
                    };
                    if *flag == 'X' {
                        xoptions.push(value);
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    (xoptions, ignores_env)
}

pub(crate) fn remote_debug(environ: Option<&[u8]>, cmdline: &[u8]) -> RemoteDebug {
    let (xoptions, ignores_env) = interpreter_options(cmdline);
    // CPython reads `-X disable-remote-debug` (any value after `=`), hyphens only.
    let named = |o: &String, name: &str| o == name || o.starts_with(&format!("{name}="));
    if xoptions.iter().any(|o| named(o, "disable-remote-debug")) {
        return RemoteDebug::Disabled("started with -X disable-remote-debug");
    }
    let Some(environ) = environ else {
        return RemoteDebug::Unknown;
    };
    let set = environ
        .split(|&b| b == 0)
        .any(|var| var.starts_with(b"PYTHON_DISABLE_REMOTE_DEBUG="));
    match (set, ignores_env) {
        (true, false) => RemoteDebug::Disabled("PYTHON_DISABLE_REMOTE_DEBUG is set"),
        (true, true) => RemoteDebug::Unsure,
        (false, _) => RemoteDebug::Enabled {
            note: xoptions
                .iter()
                .any(|o| named(o, "disable_remote_debug"))
                .then_some(
                "-X disable_remote_debug, which CPython ignores (it reads disable-remote-debug)",
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_comes_from_libpython_else_the_executables_name() {
        let exe = Path::new("/usr/bin/python3.14");
        assert_eq!(interpreter(exe, None), Interpreter::CPython(Some((3, 14))));
        let maps = "7f00-7f01 r-xp 00000000 08:01 42 /opt/lib/libpython3.11.so.1.0\n";
        assert_eq!(
            interpreter(Path::new("/opt/bin/python3"), Some(maps)),
            Interpreter::CPython(Some((3, 11)))
        );
        assert_eq!(
            interpreter(Path::new("/usr/bin/python3.14t"), Some("")),
            Interpreter::CPython(Some((3, 14)))
        );
        assert_eq!(
            interpreter(Path::new("/venv/bin/python"), None),
            Interpreter::CPython(None)
        );
        assert_eq!(
            interpreter(Path::new("/usr/bin/pypy3.10"), None),
            Interpreter::PyPy
        );
        assert_eq!(
            interpreter(Path::new("/usr/bin/sleep"), None),
            Interpreter::NotPython
        );
    }

    fn cmdline(args: &[&str]) -> Vec<u8> {
        args.join("\0").into_bytes()
    }

    #[test]
    fn remote_debugging_is_disabled_by_the_variable_or_the_hyphenated_option() {
        let plain = cmdline(&["python3.14", "train.py"]);
        assert_eq!(
            remote_debug(Some(b"A=1\0"), &plain),
            RemoteDebug::Enabled { note: None }
        );
        assert!(matches!(
            remote_debug(Some(b"A=1\0PYTHON_DISABLE_REMOTE_DEBUG=\0"), &plain),
            RemoteDebug::Disabled(_)
        ));
        for args in [
            &["python3.14", "-X", "disable-remote-debug", "train.py"][..],
            &["python3.14", "-Xdisable-remote-debug", "-c", "pass"],
            &["python3.14", "-uX", "disable-remote-debug=1", "-m", "x"],
        ] {
            assert!(
                matches!(
                    remote_debug(Some(b""), &cmdline(args)),
                    RemoteDebug::Disabled(_)
                ),
                "{args:?}"
            );
        }
        // After the script or -c, arguments belong to the program, not the interpreter.
        for args in [
            &["python3.14", "train.py", "-X", "disable-remote-debug"][..],
            &["python3.14", "-c", "pass", "-X", "disable-remote-debug"],
        ] {
            assert_eq!(
                remote_debug(Some(b""), &cmdline(args)),
                RemoteDebug::Enabled { note: None },
                "{args:?}"
            );
        }
        let underscore = cmdline(&["python3.14", "-X", "disable_remote_debug", "t.py"]);
        let RemoteDebug::Enabled { note: Some(note) } = remote_debug(Some(b""), &underscore) else {
            panic!("the underscore spelling is ignored by CPython");
        };
        assert!(note.contains("ignores"));
        let isolated = cmdline(&["python3.14", "-I", "t.py"]);
        assert_eq!(
            remote_debug(Some(b"PYTHON_DISABLE_REMOTE_DEBUG=1\0"), &isolated),
            RemoteDebug::Unsure
        );
        assert_eq!(remote_debug(None, &plain), RemoteDebug::Unknown);
    }
}
