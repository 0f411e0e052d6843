//! The Python allocator-feed agent (`assets/python/strata_feed`) and its `sitecustomize`,
//! tested by the standard-library suite in `tests/python` against stub frameworks and a
//! fake `libcuda.so.1` built from `tests/python/fake_libcuda.c` with the system C compiler.
//!
//! Run alone: `python3 -m unittest discover -s tests/python -t tests/python`.

use std::path::Path;
use std::process::Command;

#[test]
fn python_agent_suite() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var("STRATA_TEST_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let output = Command::new(&python)
        .args([
            "-m",
            "unittest",
            "discover",
            "-s",
            "tests/python",
            "-t",
            "tests/python",
        ])
        .current_dir(root)
        // No __pycache__ in the work tree; no inherited settings that change the stubs.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("PYTHONPATH")
        .env_remove("STRATA_FEED_DIR")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "the Python agent suite failed ({}):\n{text}",
        output.status
    );
}
