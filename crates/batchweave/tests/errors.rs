//! The coarse error maps every layer's errors to the right kind.

use batchweave::{ErrorKind, MeshConfig, ProducerSettings, RankConfig, Stream};
use bytes::Bytes;

#[tokio::test]
async fn kinds_of_real_failures() {
    let e = Stream::open("ftp://nowhere/x").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(!e.retryable());
    assert!(e.message().contains("unsupported scheme"), "{e}");

    let stream = Stream::open("memory:///").await.unwrap();
    let mut zombie = stream
        .producer("p")
        .settings(ProducerSettings::default())
        .open()
        .await
        .unwrap();
    let _fresh = stream.producer("p").open().await.unwrap();
    zombie
        .append(1, 1, vec![Bytes::from_static(b"x")], 1)
        .await
        .unwrap();
    let e: batchweave::Error = zombie.flush().await.unwrap_err().into();
    assert_eq!(e.kind(), ErrorKind::Fenced, "{e}");
    assert!(std::error::Error::source(&e).is_some());

    let bad = RankConfig::new(9, MeshConfig::new(4, 2, 1, 2, 1), "g");
    let e: batchweave::Error = stream.consumer(bad).open().await.unwrap_err().into();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");

    let info = stream.inspect().await.unwrap();
    assert_eq!(info.producers["p"].epoch, 2);
}
