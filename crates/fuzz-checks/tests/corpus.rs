//! Replays the checked-in fuzz corpus (`fuzz/corpus/<target>/*`) and any crash regressions
//! (`fuzz/regressions/<target>/*`) through exactly the checks the libFuzzer targets run, so
//! the regular test suite keeps covering what fuzzing found without needing cargo-fuzz.

use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use batchweave_fuzz_checks as targets;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The input files of one target under `fuzz/<kind>/<target>/`, sorted; none if the folder
/// does not exist.
fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let Ok(dir) = fs::read_dir(fuzz_dir().join(kind).join(target)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = dir
        .map(|e| e.expect("read corpus entry").path())
        .filter(|p| p.is_file())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    files
}

#[test]
fn corpus_and_regressions_replay_without_panics() {
    for (target, check) in targets::TARGETS {
        let corpus = inputs("corpus", target);
        assert!(
            corpus.len() >= 4,
            "{target}: only {} corpus files; the corpus is missing",
            corpus.len()
        );
        let mut failures = Vec::new();
        let mut deep = 0usize;
        let all = corpus
            .iter()
            .chain(inputs("regressions", target).iter())
            .cloned()
            .collect::<Vec<_>>();
        for path in &all {
            let data = fs::read(path).expect("read corpus file");
            match catch_unwind(AssertUnwindSafe(|| check(&data))) {
                Ok(reached) => deep += usize::from(reached),
                Err(_) => failures.push(path.display().to_string()),
            }
        }
        assert!(
            failures.is_empty(),
            "{target}: inputs that panic: {failures:#?}"
        );
        // The corpus must keep reaching the checks behind a successful decode, plan or merge.
        eprintln!(
            "{target}: {} inputs, {deep} reach the deep checks",
            all.len()
        );
        assert!(deep >= 2, "{target}: {deep} inputs reach the deep checks");
    }
}

#[test]
fn golden_objects_reach_the_deep_checks() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let read = |p: &str| fs::read(golden.join(p)).expect("read golden file");
    for name in ["v1.manifest", "v1.gcboundary", "v1.watermark"] {
        let data = read(&format!("manifest/tests/golden/{name}"));
        assert!(targets::manifest_envelope(&data), "{name} did not decode");
        assert!(!targets::tgb_footer(&data), "{name} decoded as a TGB");
    }
    let tgb = read("tgb/tests/golden/v1.tgb");
    assert!(targets::tgb_footer(&tgb), "golden TGB did not decode");
    assert!(!targets::manifest_envelope(&tgb[..tgb.len() - 1]));
}

#[test]
fn broken_inputs_are_rejected_by_the_checks() {
    // A TGB with one flipped payload byte still decodes (the footer CRC covers the footer
    // only) but the re-encoding check must not accept it: split_run reports the bad slice.
    let tgb = fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tgb/tests/golden/v1.tgb"))
        .expect("read golden TGB");
    let mut bad = tgb.clone();
    bad[0] ^= 0xff;
    assert!(targets::tgb_footer(&bad));
    // A manifest whose payload is garbage must not decode, even with its CRC fixed.
    let mut m = fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifest/tests/golden/v1.manifest"),
    )
    .expect("read golden manifest");
    let last = m.len() - 1;
    m[16..last].fill(0xff);
    assert!(!targets::manifest_envelope(&m));
}
