//! Compiles `proto/batchweave/v1/manifest.proto` (inside this crate, so that the
//! packaged crate builds; the repository's top-level `proto` links here) into Rust
//! types with prost, using protox (a pure-Rust protobuf compiler), so no `protoc` is
//! needed.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let proto_root = manifest_dir.join("proto");
    let proto_file = proto_root
        .join("batchweave")
        .join("v1")
        .join("manifest.proto");
    println!("cargo:rerun-if-changed={}", proto_file.display());
    println!("cargo:rerun-if-changed=build.rs");

    let fds = protox::compile(["batchweave/v1/manifest.proto"], [&proto_root])?;
    // BTreeMap for every map field: the encoding of a manifest is then a pure
    // function of its content (HashMap iteration order would not be).
    prost_build::Config::new()
        .btree_map(["."])
        .compile_fds(fds)?;
    Ok(())
}
