//! Test helpers (feature `test-util`): the stores a test suite should run on, and the
//! two hooks an `ObjectStore` wrapper outside this crate needs to misbehave like a
//! backend ([`transient_error`], [`is_conflict_error`]), so that `object_store`
//! errors are built and matched in this crate only.
//!
//! `cargo xtask` starts loopback servers and exports where they are:
//!
//! | variable | meaning |
//! |---|---|
//! | `BATCHWEAVE_TEST_S3_URL`, `BATCHWEAVE_TEST_S3_ENDPOINT` | moto S3 server (`s3://bucket`, `http://127.0.0.1:PORT`) |
//! | `BATCHWEAVE_TEST_SEAWEED_URL`, `BATCHWEAVE_TEST_SEAWEED_ENDPOINT` | SeaweedFS S3 gateway (optional) |
//! | `BATCHWEAVE_TEST_AZURE_URL`, `AZURITE_BLOB_STORAGE_URL` | Azurite blob service |
//! | `BATCHWEAVE_TEST_GCS_URL` | a real `gs://` bucket (credentials from `GOOGLE_*`) |
//! | `BATCHWEAVE_REQUIRE_SERVERS=1` | a missing S3/Azure server is a test failure, not a skip (CI) |

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Class, classify};
use crate::{OpenOptions, StoreError, StreamStore};

/// The error a backend returns for a transient failure (a timeout, a 503): what a
/// wrapper store returns for a request whose client gave up. [`StreamStore`] treats it
/// like any transient error: it retries an idempotent request and reports a conditional
/// create that got it as [`StoreError::Ambiguous`]. `store` names the wrapper,
/// `message` says what happened.
pub fn transient_error(store: &'static str, message: impl Into<String>) -> object_store::Error {
    object_store::Error::Generic {
        store,
        source: message.into().into(),
    }
}

/// True when `err` says the key was already taken: the error a conditional create of
/// an existing key gets, which [`StreamStore::create`] reports as
/// [`StoreError::Conflict`].
pub fn is_conflict_error(err: &object_store::Error) -> bool {
    classify(err) == Class::Conflict
}

/// A store a test can run against.
#[derive(Debug, Clone)]
pub struct TestTarget {
    /// Short name for messages (`memory`, `local`, `s3-moto`, ...).
    pub name: &'static str,
    /// Base URL.
    pub url: String,
    /// Options for [`StreamStore::open_with`].
    pub options: Vec<(String, String)>,
    _tempdir: Option<std::sync::Arc<tempfile_like::TempDir>>,
}

mod tempfile_like {
    /// A directory removed on drop (std only, so `test-util` pulls no dependency).
    #[derive(Debug)]
    pub(crate) struct TempDir(pub(crate) std::path::PathBuf);
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn unique(tag: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    #[allow(clippy::disallowed_methods)]
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{tag}-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        t % 1_000_000_007
    )
}

fn s3_target(name: &'static str, url_var: &str, endpoint_var: &str) -> Option<TestTarget> {
    let url = std::env::var(url_var).ok()?;
    let endpoint = std::env::var(endpoint_var).ok()?;
    Some(TestTarget {
        name,
        url,
        options: vec![
            ("aws_endpoint".into(), endpoint),
            ("aws_allow_http".into(), "true".into()),
            ("aws_access_key_id".into(), "testing".into()),
            ("aws_secret_access_key".into(), "testing".into()),
            ("aws_region".into(), "us-east-1".into()),
        ],
        _tempdir: None,
    })
}

/// Whether CI demands the loopback servers.
pub fn servers_required() -> bool {
    std::env::var("BATCHWEAVE_REQUIRE_SERVERS").is_ok_and(|v| v == "1")
}

/// The loopback / remote servers configured in the environment. Prints a
/// clear line for each one that is not configured, and panics for S3 and
/// Azure when `BATCHWEAVE_REQUIRE_SERVERS=1`.
pub fn server_targets() -> Vec<TestTarget> {
    let mut v = Vec::new();
    match s3_target(
        "s3-moto",
        "BATCHWEAVE_TEST_S3_URL",
        "BATCHWEAVE_TEST_S3_ENDPOINT",
    ) {
        Some(t) => v.push(t),
        None => {
            assert!(
                !servers_required(),
                "BATCHWEAVE_REQUIRE_SERVERS=1 but no S3 server is configured (BATCHWEAVE_TEST_S3_URL / _ENDPOINT); run the tests through `cargo xtask test`"
            );
            eprintln!(
                "SKIP s3: no S3 server configured (set BATCHWEAVE_TEST_S3_URL and BATCHWEAVE_TEST_S3_ENDPOINT, or run `cargo xtask test`)"
            );
        }
    }
    if let Some(t) = s3_target(
        "s3-seaweedfs",
        "BATCHWEAVE_TEST_SEAWEED_URL",
        "BATCHWEAVE_TEST_SEAWEED_ENDPOINT",
    ) {
        v.push(t);
    }
    match std::env::var("BATCHWEAVE_TEST_AZURE_URL") {
        Ok(url) => v.push(TestTarget {
            name: "azure-azurite",
            url,
            options: vec![
                ("azure_storage_use_emulator".into(), "true".into()),
                ("azure_allow_http".into(), "true".into()),
            ],
            _tempdir: None,
        }),
        Err(_) => {
            assert!(
                !servers_required(),
                "BATCHWEAVE_REQUIRE_SERVERS=1 but no Azure emulator is configured (BATCHWEAVE_TEST_AZURE_URL); run the tests through `cargo xtask test`"
            );
            eprintln!(
                "SKIP azure: no Azurite configured (set BATCHWEAVE_TEST_AZURE_URL and AZURITE_BLOB_STORAGE_URL, or run `cargo xtask test`)"
            );
        }
    }
    match std::env::var("BATCHWEAVE_TEST_GCS_URL") {
        Ok(url) => v.push(TestTarget {
            name: "gcs",
            url,
            options: vec![],
            _tempdir: None,
        }),
        Err(_) => eprintln!(
            "SKIP gcs: no emulator here supports object_store's GCS uploads; set BATCHWEAVE_TEST_GCS_URL to a gs:// bucket to run it"
        ),
    }
    v
}

/// In-memory and local-directory targets (always available).
pub fn embedded_targets() -> Vec<TestTarget> {
    let dir = std::env::temp_dir().join(unique("batchweave-test"));
    let url = format!("file://{}", dir.display());
    vec![
        TestTarget {
            name: "memory",
            url: "memory:///".into(),
            options: vec![],
            _tempdir: None,
        },
        TestTarget {
            name: "local",
            url,
            options: vec![],
            _tempdir: Some(std::sync::Arc::new(tempfile_like::TempDir(dir))),
        },
    ]
}

/// Embedded targets followed by the configured servers.
pub fn all_targets() -> Vec<TestTarget> {
    let mut v = embedded_targets();
    v.extend(server_targets());
    v
}

impl TestTarget {
    /// Opens a fresh, empty stream under a unique prefix of this target.
    pub async fn open_fresh(&self, tag: &str) -> Result<StreamStore, StoreError> {
        let url = if self.url.starts_with("memory:") {
            self.url.clone()
        } else {
            format!("{}/{}", self.url.trim_end_matches('/'), unique(tag))
        };
        StreamStore::open_with(
            &url,
            OpenOptions {
                options: self.options.clone(),
                ..Default::default()
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_agree_with_the_store_mapping() {
        let taken = object_store::Error::AlreadyExists {
            path: "manifests/1".into(),
            source: "exists".into(),
        };
        assert!(is_conflict_error(&taken));
        let gave_up = transient_error("Wrapper", "timeout: the client gave up");
        assert!(!is_conflict_error(&gave_up));
        assert_eq!(classify(&gave_up), Class::Transient);
        assert!(
            gave_up.to_string().contains("the client gave up"),
            "{gave_up}"
        );
    }
}
