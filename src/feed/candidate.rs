//! What a scan for agents' sockets hands on: a socket's identity and a candidate with what
//! its directory looked like. A leaf: the scan (`discover`), the places it opens (`found`),
//! the listings it reads (`listing`) and the connections (`conn`, `hub`) import it, not
//! each other, for these names.

use crate::sample::feed::FoundVia;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;

/// A socket file's identity: (st_dev, st_ino). The same socket seen twice is one feed.
pub(crate) type FeedKey = (u64, u64);

/// Suspicious entries reported per scan.
pub(crate) const MAX_SUSPICIOUS: usize = 256;

/// A socket that may be an agent's, with what its directory looked like.
pub(crate) struct Candidate {
    pub(crate) key: FeedKey,
    /// Its ctime: with `key`, which file this is (a dead inode's number may be used again).
    pub(crate) born: (i64, i64),
    /// As shown to the user (through `/proc/<pid>/root` for a job in a container).
    pub(crate) path: PathBuf,
    /// The file name, `<pid>.sock`.
    pub(crate) name: String,
    /// The number in the name: the agent's pid as it sees itself.
    pub(crate) name_pid: u32,
    /// The uid that must own the directory and be the peer.
    pub(crate) expected_uid: u32,
    pub(crate) via: FoundVia,
    /// The directory, opened `O_PATH`.
    pub(crate) dir: Arc<OwnedFd>,
    /// The check of the directory (owner, mode), done when it was opened.
    pub(crate) dir_verdict: Result<(), String>,
    /// Owner of the socket file.
    pub(crate) socket_uid: u32,
    /// The directory's place in this scan, for its budget of connection attempts; `None`:
    /// looked up directly for a process NVML lists, which no budget holds back.
    pub(crate) budget: Option<usize>,
}
