//! What this build is: the crate's version, the commit and date it was built from (stamped
//! by `build.rs`), and the version of the feed protocol it reads. `strata --version` prints
//! them; a bug report quotes them.

/// The version of strata (the crate's, the wheel's and the agent's).
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The allocator feed protocol this monitor reads (`"v"` of every line;
/// `assets/python/PROTOCOL.md`).
pub(crate) const FEED_PROTOCOL: u64 = 1;

/// `strata --version`'s line after the name (a constant: clap takes it as it is): the git
/// commit the binary was built from, or `unknown` (a build outside a checkout), and the
/// build's date, UTC (`SOURCE_DATE_EPOCH` when set).
pub(crate) const DESCRIBE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("STRATA_GIT_COMMIT"),
    ", built ",
    env!("STRATA_BUILD_DATE"),
    ", feed protocol 1)"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_names_the_commit_the_date_and_the_protocol() {
        let text = DESCRIBE;
        let (commit, date) = (env!("STRATA_GIT_COMMIT"), env!("STRATA_BUILD_DATE"));
        assert!(text.starts_with(VERSION), "{text}");
        assert!(
            text.contains(&format!("commit {commit}, built {date}")),
            "{text}"
        );
        assert!(
            text.ends_with(&format!("feed protocol {FEED_PROTOCOL})")),
            "{text}"
        );
        assert!(
            date == "unknown" || (date.len() == 10 && date.as_bytes()[4] == b'-'),
            "{date}"
        );
        assert!(!commit.is_empty());
    }

    #[test]
    fn the_agent_is_the_same_version_as_the_monitor() {
        let init = include_str!("../assets/python/strata_feed/__init__.py");
        assert!(
            init.contains(&format!("__version__ = \"{VERSION}\"")),
            "assets/python/strata_feed/__init__.py must carry version {VERSION}"
        );
    }
}
