//! A job under the agent that closes every descriptor (`os.closerange`, as daemonising code
//! does), puts its own files over the agent's numbers (`dup2`), or forks and execs: the job's
//! files are left exactly as the job wrote them, and a monitor sees the feed end, never
//! garbage. The cases are the agent's own suite's, `tests/python/test_descriptors.py`, run
//! here with the rest of the adversarial suite (real processes, the stub frameworks).

use std::path::Path;
use std::process::Command;

#[test]
fn the_agent_never_touches_a_descriptor_the_job_closed_or_replaced() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var("STRATA_TEST_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let out = Command::new(&python)
        .args(["-m", "unittest", "discover", "-v", "-s", "tests/python"])
        .args(["-t", "tests/python", "-p", "test_descriptors.py"])
        .current_dir(root)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("PYTHONPATH")
        .env_remove("STRATA_FEED_DIR")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    let ran: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("Ran ")?.split(' ').next()?.parse().ok())
        .expect("unittest says how many ran");
    assert!(ran >= 5, "{ran} cases:\n{text}");
    assert!(!text.contains(" ... skipped "), "none skipped:\n{text}");
}
