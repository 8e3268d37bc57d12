//! The README's main job: the demo passes, and a corrupted stream makes it fail loudly.

use std::process::Command;

fn demo(extra: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_batchweave"))
        .args([
            "demo",
            "--steps",
            "60",
            "--slice-kib",
            "4",
            "--producers",
            "3",
            "--ranks",
            "4",
        ])
        .args(extra)
        .output()
        .expect("run batchweave demo");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn demo_passes_and_verifies_everything() {
    let (ok, text) = demo(&[]);
    assert!(ok, "{text}");
    assert!(text.contains("VERDICT: PASS"), "{text}");
    assert!(text.contains("every byte verified"), "{text}");
    assert!(
        text.contains("1 rank restored from its checkpoint and replayed exactly"),
        "{text}"
    );
}

#[test]
fn a_corrupted_tgb_makes_the_demo_fail_loudly() {
    let (ok, text) = demo(&["--inject-corruption"]);
    assert!(!ok, "the demo must fail on corruption:\n{text}");
    assert!(text.contains("VERDICT: FAIL"), "{text}");
    assert!(
        text.contains("checksum mismatch"),
        "the message names the cause:\n{text}"
    );
    assert!(!text.contains("VERDICT: PASS"), "{text}");
}
