//! Opening a [`StreamStore`] from a URL.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;

use crate::clock::Clock;
use crate::error::{StoreError, redact_url};
use crate::store::{RetryPolicy, StreamStore};

/// How to open a store. `Default` is right for production use.
#[derive(Clone, Default)]
pub struct OpenOptions {
    /// Backend options as `object_store` config keys (`aws_endpoint`,
    /// `aws_allow_http`, `google_service_account`, `azure_storage_sas_key`, ...).
    /// They override the `AWS_*` / `GOOGLE_*` / `AZURE_*` environment variables,
    /// which are always read.
    pub options: Vec<(String, String)>,
    /// Skip the conditional-create probe (see
    /// [`StreamStore::verify_conditional_create`]). Off by default.
    pub skip_verify: bool,
    /// Retry policy for idempotent requests.
    pub retry: Option<RetryPolicy>,
    /// Clock for backoff and timestamps (tokio time when `None`).
    pub clock: Option<Arc<dyn Clock>>,
}

impl std::fmt::Debug for OpenOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Option values may be secrets: print the keys only.
        let keys: Vec<&str> = self.options.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("OpenOptions")
            .field("option_keys", &keys)
            .field("skip_verify", &self.skip_verify)
            .field("retry", &self.retry)
            .finish()
    }
}

impl StreamStore {
    /// Opens the stream at `url` with default options and verifies that the
    /// store honours conditional create.
    ///
    /// Accepted forms: `file:///abs/dir`, a plain path (`./run1`, `/tmp/run1`),
    /// `memory:///` (a new empty store), `s3://bucket/prefix`,
    /// `gs://bucket/prefix`, `az://container/prefix` (also `azure://`,
    /// `abfs://`, `abfss://`, `adl://`).
    pub async fn open(url: &str) -> Result<StreamStore, StoreError> {
        Self::open_with(url, OpenOptions::default()).await
    }

    /// Opens the stream at `url` with `opts`.
    pub async fn open_with(url: &str, opts: OpenOptions) -> Result<StreamStore, StoreError> {
        let (inner, prefix) = backend_for(url, &opts)?;
        let mut s = StreamStore::from_object_store(inner, &prefix, url);
        if let Some(r) = opts.retry {
            s = s.with_retry(r);
        }
        if let Some(c) = opts.clock {
            s = s.with_clock(c);
        }
        if !opts.skip_verify {
            s.verify_conditional_create().await?;
        }
        Ok(s)
    }
}

fn config_err(url: &str, message: impl Into<String>) -> StoreError {
    StoreError::Config {
        url: redact_url(url),
        message: message.into(),
    }
}

/// Retries inside `object_store` are off: this crate retries idempotent
/// requests itself and never retries a conditional create.
fn no_internal_retries() -> object_store::RetryConfig {
    object_store::RetryConfig {
        max_retries: 0,
        ..Default::default()
    }
}

fn backend_for(
    url: &str,
    opts: &OpenOptions,
) -> Result<(Arc<dyn ObjectStore>, String), StoreError> {
    let url = url.trim();
    if url.is_empty() {
        return Err(config_err(
            url,
            "the store URL is empty; pass e.g. file:///tmp/run1 or s3://bucket/prefix",
        ));
    }
    if !url.contains("://") {
        return local_dir(url, url);
    }
    let parsed = url::Url::parse(url).map_err(|e| {
        config_err(
            url,
            format!("not a valid URL ({e}); expected e.g. s3://bucket/prefix"),
        )
    })?;
    let prefix = parsed.path().trim_matches('/').to_string();
    let bad_key = |scheme: &str, k: &str, e: &dyn std::fmt::Display| {
        config_err(
            url,
            format!(
                "unknown option `{k}` for {scheme}:// ({e}); use object_store's config key names, e.g. aws_endpoint, google_service_account, azure_storage_account_name"
            ),
        )
    };
    let build_err = |what: &str, e: object_store::Error| {
        config_err(
            url,
            format!("cannot configure {what}: {e}. {}", hint_for(what)),
        )
    };
    let store: Arc<dyn ObjectStore> = match parsed.scheme() {
        "file" => {
            if parsed.host_str().is_some_and(|h| !h.is_empty()) {
                return Err(config_err(
                    url,
                    "file URLs need an absolute path: file:///abs/dir (three slashes)",
                ));
            }
            return local_dir(url, parsed.path());
        }
        "memory" => Arc::new(InMemory::new()),
        "s3" | "s3a" => {
            let mut b = AmazonS3Builder::from_env()
                .with_url(url)
                .with_retry(no_internal_retries());
            for (k, v) in &opts.options {
                let key: AmazonS3ConfigKey = k.parse().map_err(|e| bad_key("s3", k, &e))?;
                b = b.with_config(key, v.clone());
            }
            Arc::new(b.build().map_err(|e| build_err("S3", e))?)
        }
        "gs" => {
            let mut b = GoogleCloudStorageBuilder::from_env()
                .with_url(url)
                .with_retry(no_internal_retries());
            for (k, v) in &opts.options {
                let key: GoogleConfigKey = k.parse().map_err(|e| bad_key("gs", k, &e))?;
                b = b.with_config(key, v.clone());
            }
            Arc::new(b.build().map_err(|e| build_err("GCS", e))?)
        }
        "az" | "azure" | "abfs" | "abfss" | "adl" => {
            let mut b = MicrosoftAzureBuilder::from_env()
                .with_url(url)
                .with_retry(no_internal_retries());
            for (k, v) in &opts.options {
                let key: AzureConfigKey = k.parse().map_err(|e| bad_key("az", k, &e))?;
                b = b.with_config(key, v.clone());
            }
            Arc::new(b.build().map_err(|e| build_err("Azure", e))?)
        }
        other => {
            return Err(config_err(
                url,
                format!(
                    "unsupported scheme `{other}`; use file://, memory://, s3://, gs:// or az://"
                ),
            ));
        }
    };
    Ok((store, prefix))
}

fn hint_for(what: &str) -> &'static str {
    match what {
        "S3" => {
            "Set AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION (and AWS_ENDPOINT plus AWS_ALLOW_HTTP=true for a local server), or pass them as options"
        }
        "GCS" => {
            "Set GOOGLE_SERVICE_ACCOUNT (path to a service-account JSON) or GOOGLE_APPLICATION_CREDENTIALS, or pass google_service_account as an option"
        }
        _ => {
            "Set AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY (or a SAS token), or AZURE_STORAGE_USE_EMULATOR=true for Azurite"
        }
    }
}

fn local_dir(url: &str, path: &str) -> Result<(Arc<dyn ObjectStore>, String), StoreError> {
    let dir = std::path::Path::new(path);
    std::fs::create_dir_all(dir).map_err(|e| {
        config_err(
            url,
            format!("cannot create directory {}: {e}", dir.display()),
        )
    })?;
    let fs = LocalFileSystem::new_with_prefix(dir)
        .map_err(|e| config_err(url, format!("cannot use directory {}: {e}", dir.display())))?;
    Ok((Arc::new(fs), String::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_urls_say_what_to_fix() {
        let e = StreamStore::open("ftp://x/y").await.unwrap_err();
        assert!(e.to_string().contains("unsupported scheme `ftp`"), "{e}");
        let e = StreamStore::open("").await.unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
        let e = StreamStore::open("file://host/x").await.unwrap_err();
        assert!(e.to_string().contains("three slashes"), "{e}");
        let opts = OpenOptions {
            options: vec![("aws_not_a_key".into(), "v".into())],
            ..Default::default()
        };
        let e = StreamStore::open_with("s3://bucket/p", opts)
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("unknown option `aws_not_a_key`"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn secrets_never_show_in_errors_or_debug() {
        let opts = OpenOptions {
            options: vec![
                ("aws_secret_access_key".into(), "TOPSECRETVALUE".into()),
                ("aws_not_a_key".into(), "TOPSECRETVALUE".into()),
            ],
            ..Default::default()
        };
        assert!(!format!("{opts:?}").contains("TOPSECRETVALUE"));
        let e =
            StreamStore::open_with("s3://user:TOPSECRETVALUE@bucket/p?sig=TOPSECRETVALUE", opts)
                .await
                .unwrap_err();
        assert!(!e.to_string().contains("TOPSECRETVALUE"), "{e}");
        assert!(!format!("{e:?}").contains("TOPSECRETVALUE"), "{e:?}");
    }

    #[tokio::test]
    async fn local_dir_and_plain_path_open() {
        let d = tempfile::tempdir().unwrap();
        let url = format!("file://{}", d.path().join("stream").display());
        let s = StreamStore::open(&url).await.unwrap();
        s.put("a/b", bytes::Bytes::from_static(b"x")).await.unwrap();
        assert!(d.path().join("stream/a/b").exists());
        let s2 = StreamStore::open(d.path().join("plain").to_str().unwrap())
            .await
            .unwrap();
        s2.put("k", bytes::Bytes::from_static(b"y")).await.unwrap();
        assert!(d.path().join("plain/k").exists());
    }
}
