//! Reading `strata snapshot --json` output in tests.

use serde_json::Value;

/// The layer names of the snapshot schema.
pub const LAYERS: [&str; 8] = [
    "context",
    "outside_pool",
    "cached",
    "fragmented",
    "live",
    "unattributed",
    "other",
    "free",
];

/// Checks that every GPU's and MIG instance's layers sum to its NVML total, exactly. With
/// `gaps_allowed`, a device may instead have `layers: null`, but then a `layers_gap` reason.
pub fn assert_layers_add_up(snapshot: &Value, gaps_allowed: bool) {
    for g in snapshot["gpus"].as_array().expect("gpus") {
        let mut devices = vec![g];
        devices.extend(g["mig"].as_array().expect("mig"));
        for d in devices {
            if d["layers"].is_null() {
                assert!(gaps_allowed, "layers withheld: {d}");
                assert!(
                    !d["layers_gap"].is_null(),
                    "null layers without a reason: {d}"
                );
                continue;
            }
            let sum: u64 = LAYERS
                .iter()
                .map(|k| d["layers"][k].as_u64().unwrap_or(0))
                .sum();
            assert_eq!(sum, d["memory"]["total"].as_u64().expect("total"), "{d}");
        }
    }
}

/// The demo's 20-minute story as `strata snapshot --json --count` writes it: 121 samples,
/// 10 s apart, from the demo's start. Made once a test process.
pub fn demo_story() -> &'static [u8] {
    static STORY: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    STORY.get_or_init(|| {
        let out = super::strata_output(&[
            "snapshot",
            "--demo",
            "--demo-at",
            "0",
            "--demo-speed",
            "1",
            "--json",
            "--count",
            "121",
            "--interval",
            "10",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    })
}
