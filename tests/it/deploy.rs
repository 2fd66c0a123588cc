//! The deployment files stay in step with the code:
//! * `deploy/Dockerfile` builds on the crate's rust-version, runs unprivileged and checks
//!   its health with `seawall health`, which works against a real admin listener;
//! * the build to deploy (`scripts/build-production`, which the image and the bench
//!   use) hands rustc the profile in `deploy/pgo`, and this toolchain reads it;
//! * the Kubernetes base and its Redis overlay render with `kubectl kustomize`, pass
//!   `kubernetes-validate --strict` (the Kubernetes schemas, offline), and hang together
//!   (probes on the admin port, selectors, the generated ConfigMap, the session key's
//!   Secret mounted where the config reads it, no client affinity, the Redis Service);
//! * `deploy/compose.yaml` mounts files that exist and names services that exist (no
//!   `docker compose` here to run `config`), its Prometheus config passes `promtool
//!   check config` with the files laid out as the compose mounts them, and Grafana and
//!   the OpenTelemetry collector are wired to the services seawall and Prometheus use;
//! * every seawall config they carry passes `Config::parse_with_env`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{Interop, Seawall, TestDir, Upstream, config_yaml, prometheus_binary, seawall_bin};
use base64::Engine as _;
use seawall::config::Config;
use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn yaml(text: &str, what: &str) -> Value {
    yaml_serde::from_str(text).unwrap_or_else(|e| panic!("{what} is not YAML: {e}"))
}

/// A seawall config as the deployment carries it, validated with every `${VAR}` set.
fn seawall_config(text: &str, origin: &str) -> Config {
    Config::parse_with_env(text, origin, &|_| Some("placeholder-value-0123456789".to_owned()))
        .unwrap_or_else(|e| panic!("{origin} fails seawall's validation:\n{e}"))
}

/// `host:port` of an `http://host:port/...` URL.
fn authority(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.split('/').next().unwrap_or(rest)
}

// ---------------------------------------------------------------------------------------
// The container image
// ---------------------------------------------------------------------------------------

#[test]
fn the_build_to_deploy_is_optimised_with_the_profile_in_the_repository_which_this_rustc_reads() {
    // One way to build what is deployed: the image and the bench go through
    // scripts/build-production, which hands rustc the profile.
    let script = read("scripts/build-production");
    assert!(script.contains(r#"profile="$PWD/deploy/pgo/seawall.profdata""#), "{script}");
    assert!(script.contains("-Cprofile-use=$profile"), "{script}");
    assert!(script.contains("cargo build --profile production --locked --bin seawall"), "{script}");
    // A profile the toolchain or a dependency outdated reaches no code: the build fails
    // when the functions sampled from it are not in the binary.
    assert!(script.contains(r#"sample="$PWD/deploy/pgo/functions.txt""#), "{script}");
    assert!(script.contains("the PGO profile is stale"), "{script}");
    let sample = read("deploy/pgo/functions.txt");
    assert!(sample.lines().count() >= 50, "deploy/pgo/functions.txt samples the profile");
    for name in sample.lines() {
        assert!(name.starts_with("_ZN7seawall") && name.ends_with('E'), "a mangled seawall function: {name}");
    }
    let dockerfile = read("deploy/Dockerfile");
    for line in [
        "COPY deploy/pgo ./deploy/pgo",
        "COPY scripts/build-production ./scripts/build-production",
        "RUN scripts/build-production",
    ] {
        assert!(dockerfile.contains(line), "the image: {line}");
    }
    assert!(read("scripts/bench").lines().any(|l| l.trim() == "scripts/build-production"), "the bench builds with it");
    // The image strips after the build: a profile setting would rename what the profile names.
    assert!(!dockerfile.contains("CARGO_PROFILE_PRODUCTION"), "the image builds the profile as Cargo.toml has it");

    // LLVM's indexed profile format, and one this toolchain reads: rustc only warns about
    // a profile it cannot read (another LLVM's format version, a damaged file) and builds
    // without it, so a compilation with the profile must be silent.
    let profile = repo().join("deploy/pgo/seawall.profdata");
    let bytes = std::fs::read(&profile).expect("deploy/pgo/seawall.profdata");
    assert_eq!(bytes.get(..8), Some(&[0xff, b'l', b'p', b'r', b'o', b'f', b'i', 0x81][..]), "indexed profile magic");
    let dir = TestDir::new("pgo");
    let source = dir.path().join("main.rs");
    std::fs::write(&source, "fn main() { println!(\"{}\", std::env::args().count()); }\n").expect("write main.rs");
    let compile_with = |profile: &Path| {
        let out = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
            .arg("-O")
            .arg(format!("-Cprofile-use={}", profile.display()))
            .arg("-o")
            .arg(dir.path().join("main"))
            .arg(&source)
            .output()
            .expect("run rustc");
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (built, stderr) = compile_with(&profile);
    assert!(built && stderr.trim().is_empty(), "rustc with the profile: {stderr}");

    // And rustc does tell a profile it cannot read, so the check above can fail.
    let damaged = dir.path().join("damaged.profdata");
    std::fs::write(&damaged, &bytes[8..bytes.len().min(4096)]).expect("write damaged profile");
    let (_, stderr) = compile_with(&damaged);
    assert!(stderr.contains("profile"), "rustc is silent about a damaged profile: {stderr}");
}

#[test]
fn the_dockerfile_builds_on_the_rust_version_and_runs_unprivileged_with_a_health_check() {
    let dockerfile = read("deploy/Dockerfile");
    assert!(!repo().join("deploy/Containerfile").exists(), "one image file: deploy/Dockerfile");
    let manifest: toml_like::Manifest = toml_like::read(&read("Cargo.toml"));
    let arg = dockerfile.lines().find_map(|l| l.strip_prefix("ARG RUST_VERSION=")).expect("ARG RUST_VERSION");
    assert_eq!(arg, manifest.rust_version, "the builder's Rust is the crate's rust-version");

    let stages: Vec<&str> = dockerfile.split("\nFROM ").skip(1).collect();
    assert_eq!(stages.len(), 2, "a builder and a runtime stage");
    assert!(stages[0].starts_with("docker.io/library/rust:${RUST_VERSION}"), "{}", stages[0]);
    let runtime = stages[1];
    assert!(runtime.starts_with("gcr.io/distroless/cc-debian12"), "{runtime}");
    let user = runtime.lines().find_map(|l| l.strip_prefix("USER ")).expect("USER in the runtime stage");
    assert!(!matches!(user.split(':').next(), Some("0" | "root")), "runs as {user}");

    // Every file copied from the build context exists.
    for line in dockerfile.lines().filter(|l| l.starts_with("COPY ") && !l.contains("--from=")) {
        let parts: Vec<&str> = line.split_whitespace().collect();
        for source in &parts[1..parts.len() - 1] {
            assert!(repo().join(source).exists(), "{line}: {source} does not exist");
        }
    }

    // The health check GETs the admin /healthz that CMD listens on.
    let health = runtime.split("HEALTHCHECK").nth(1).expect("a HEALTHCHECK").replace("\\\n", " ");
    let health = health.lines().next().unwrap_or_default();
    assert!(health.contains(r#"CMD ["/usr/local/bin/seawall", "health""#), "{health}");
    let cmd = runtime.lines().find_map(|l| l.strip_prefix("CMD ")).expect("CMD");
    let cmd: Vec<String> = serde_json::from_str(cmd).expect("CMD in exec form");
    let admin = cmd.iter().position(|a| a == "--admin-listen").map(|i| &cmd[i + 1]).expect("--admin-listen");
    let port = admin.rsplit(':').next().unwrap_or_default();
    assert!(health.contains(&format!("http://127.0.0.1:{port}/healthz")), "{health} vs {admin}");
    assert!(dockerfile.contains(&format!("EXPOSE 8080 {port}")));
    // The config CMD names is the one the image carries.
    let config = cmd.iter().position(|a| a == "--config").map(|i| &cmd[i + 1]).expect("--config");
    assert!(runtime.contains(&format!("COPY config/demo.yaml {config}")), "{config}");
}

/// Just enough of Cargo.toml.
mod toml_like {
    pub struct Manifest {
        pub rust_version: String,
    }

    pub fn read(text: &str) -> Manifest {
        let rust_version = text
            .lines()
            .find_map(|l| l.strip_prefix("rust-version = "))
            .map(|v| v.trim_matches('"').to_owned())
            .expect("rust-version in Cargo.toml");
        Manifest { rust_version }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seawall_health_exits_zero_only_for_a_healthy_admin_listener() {
    let mut gw = Seawall::start(&config_yaml(&[Upstream::demo_stdio("demo", false)], "")).await;
    let health = |url: String| async move {
        tokio::process::Command::new(seawall_bin())
            .args(["health", "--timeout", "2s", &url])
            .output()
            .await
            .expect("run seawall health")
    };
    let ok = health(format!("{}/healthz", gw.admin_url)).await;
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let missing = health(format!("{}/no-such-page", gw.admin_url)).await;
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("HTTP 404"));
    gw.stop(Duration::from_secs(5)).await;
    let closed = health(format!("{}/healthz", gw.admin_url)).await;
    assert!(!closed.status.success(), "the gateway is gone");
}

// ---------------------------------------------------------------------------------------
// Kubernetes
// ---------------------------------------------------------------------------------------

/// `deploy/kubernetes` as an operator has it before the first apply: a copy, with the
/// base's session key made as its kustomization says (`openssl rand -base64 32 >
/// base/session.key`; the file is never in the repository).
fn prepared_kubernetes() -> TestDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).expect("mkdir");
        for entry in std::fs::read_dir(from).expect("read dir").flatten() {
            let path = entry.path();
            let target = to.join(entry.file_name());
            if path.is_dir() {
                copy(&path, &target);
            } else {
                std::fs::copy(&path, &target).unwrap_or_else(|e| panic!("copy {}: {e}", path.display()));
            }
        }
    }
    let dir = TestDir::new("kubernetes");
    copy(&repo().join("deploy/kubernetes"), dir.path());
    let key = base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 32]>());
    dir.write("base/session.key", &format!("{key}\n"));
    dir
}

/// `kubectl kustomize DIR` (a directory under `deploy/kubernetes/`, rendered in a
/// [`prepared_kubernetes`] copy), as YAML documents; where kubectl is missing, the same
/// rendering of the features these kustomizations use (see [`render`]).
fn kustomize(dir: &str) -> (String, Vec<Value>) {
    let copy = prepared_kubernetes();
    let path = copy.path().join(dir.strip_prefix("deploy/kubernetes/").expect("a directory of deploy/kubernetes"));
    let out = match Command::new("kubectl").arg("kustomize").arg(&path).output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("kubectl is not installed: rendering {dir} with the test's own kustomize subset");
            let docs = render(&path);
            // JSON is YAML, and keeps numbers numbers.
            let text = docs.iter().map(|d| serde_json::to_string(d).expect("JSON")).collect::<Vec<_>>().join("\n---\n");
            return (text, docs);
        }
        Err(e) => panic!("kubectl kustomize {dir}: {e}"),
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "kubectl kustomize {dir} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let docs = text.split("\n---\n").map(|doc| yaml(doc, dir)).collect();
    (text, docs)
}

/// What kustomize makes of `dir`, for the features these kustomizations use:
/// `resources` (files and other kustomizations), `configMapGenerator` (names with a
/// hash of the content, `behavior: replace`, references from volumes renamed),
/// `secretGenerator` (the same, `files` as `key=file`, data in base64), `labels` with
/// `includeSelectors`, and `images`.
fn render(dir: &Path) -> Vec<Value> {
    let k =
        yaml(&std::fs::read_to_string(dir.join("kustomization.yaml")).expect("kustomization.yaml"), "kustomization");
    let mut docs = Vec::new();
    for resource in k["resources"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        let path = dir.join(resource);
        if path.is_dir() {
            docs.extend(render(&path));
        } else {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            docs.extend(text.split("\n---\n").map(|d| yaml(d, resource)).filter(|d| !d.is_null()));
        }
    }
    for generator in k["configMapGenerator"].as_array().into_iter().flatten() {
        generate(dir, generator, "ConfigMap", &mut docs);
    }
    for generator in k["secretGenerator"].as_array().into_iter().flatten() {
        generate(dir, generator, "Secret", &mut docs);
    }
    for labels in k["labels"].as_array().into_iter().flatten() {
        let pairs = labels["pairs"].as_object().expect("label pairs");
        let add = |at: &mut Value| {
            if !at.is_object() {
                *at = Value::Object(Default::default());
            }
            for (key, value) in pairs {
                at[key] = value.clone();
            }
        };
        for doc in &mut docs {
            add(&mut doc["metadata"]["labels"]);
            if labels["includeSelectors"] == true {
                match doc["kind"].as_str() {
                    Some("Deployment") => {
                        add(&mut doc["spec"]["selector"]["matchLabels"]);
                        add(&mut doc["spec"]["template"]["metadata"]["labels"]);
                    }
                    Some("PodDisruptionBudget") => add(&mut doc["spec"]["selector"]["matchLabels"]),
                    Some("Service") => add(&mut doc["spec"]["selector"]),
                    _ => {}
                }
            }
        }
    }
    for image in k["images"].as_array().into_iter().flatten() {
        let tagged = format!(
            "{}:{}",
            image["newName"].as_str().unwrap_or_default(),
            image["newTag"].as_str().unwrap_or("latest")
        );
        for doc in &mut docs {
            let containers = doc.pointer_mut("/spec/template/spec/containers").and_then(Value::as_array_mut);
            for container in containers.into_iter().flatten() {
                if container["image"] == image["name"] {
                    container["image"] = Value::String(tagged.clone());
                }
            }
        }
    }
    docs
}

/// One `configMapGenerator` (`kind` ConfigMap) or `secretGenerator` (`kind` Secret)
/// entry of the kustomization in `dir`, applied to `docs`.
fn generate(dir: &Path, generator: &Value, kind: &str, docs: &mut Vec<Value>) {
    let name = generator["name"].as_str().expect("a generator name");
    let mut data = serde_json::Map::new();
    for file in generator["files"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        let (key, file) = file.split_once('=').unwrap_or((file, file));
        let text = std::fs::read_to_string(dir.join(file)).expect("a generator file");
        let value = match kind {
            "Secret" => base64::engine::general_purpose::STANDARD.encode(text),
            _ => text,
        };
        data.insert(key.to_owned(), Value::String(value));
    }
    let hash = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        serde_json::to_string(&data).expect("JSON").hash(&mut h);
        format!("{:010x}", h.finish() & 0xff_ffff_ffff)
    };
    let generated = format!("{name}-{hash}");
    let generated_from = |d: &Value| {
        d["kind"] == kind && d["metadata"]["name"].as_str().is_some_and(|n| n.starts_with(&format!("{name}-")))
    };
    // A replaced one keeps what the base's kustomization gave it (its labels).
    let mut labels = Value::Null;
    if generator["behavior"] == "replace" {
        if let Some(old) = docs.iter().find(|d| generated_from(d)) {
            labels = old["metadata"]["labels"].clone();
        }
        docs.retain(|d| !generated_from(d));
    }
    let (source, field) = match kind {
        "Secret" => ("secret", "secretName"),
        _ => ("configMap", "name"),
    };
    for doc in docs.iter_mut() {
        // `pointer_mut`, not indexing: indexing would add the keys it does not find.
        let volumes = doc.pointer_mut("/spec/template/spec/volumes").and_then(Value::as_array_mut);
        for volume in volumes.into_iter().flatten() {
            let old = volume[source][field].as_str().map(str::to_owned);
            if old.as_deref() == Some(name) || old.as_deref().is_some_and(|o| o.starts_with(&format!("{name}-"))) {
                volume[source][field] = Value::String(generated.clone());
            }
        }
    }
    let mut made = serde_json::json!({
        "apiVersion": "v1", "kind": kind, "metadata": { "name": generated }, "data": data
    });
    if kind == "Secret" {
        made["type"] = Value::String("Opaque".into());
    }
    if !labels.is_null() {
        made["metadata"]["labels"] = labels;
    }
    docs.push(made);
}

#[test]
fn the_own_kustomize_subset_renders_what_kubectl_renders() {
    if Command::new("kubectl").arg("version").arg("--client").output().is_err() {
        eprintln!("kubectl is not installed: nothing to compare the subset with");
        return;
    }
    for dir in ["deploy/kubernetes/base", "deploy/kubernetes/overlays/redis"] {
        let (_, by_kubectl) = kustomize(dir);
        let copy = prepared_kubernetes();
        let ours = render(&copy.path().join(dir.strip_prefix("deploy/kubernetes/").expect("under deploy/kubernetes")));
        let shape = |docs: &[Value]| {
            let mut shape: Vec<String> = docs
                .iter()
                .map(|d| {
                    let name = d["metadata"]["name"].as_str().unwrap_or("?");
                    // Generated names differ in their hash only.
                    let generated = d["kind"] == "ConfigMap" || d["kind"] == "Secret";
                    let name = if generated { name.rsplit_once('-').map_or(name, |(n, _)| n) } else { name };
                    let labels: BTreeMap<String, Value> =
                        serde_json::from_value(d["metadata"]["labels"].clone()).unwrap_or_default();
                    format!("{}/{name} {labels:?}", d["kind"].as_str().unwrap_or("?"))
                })
                .collect();
            shape.sort();
            shape
        };
        assert_eq!(shape(&ours), shape(&by_kubectl), "{dir}");
        let config = |docs: &[Value]| check_gateway(docs, dir).listen;
        assert_eq!(config(&ours), config(&by_kubectl), "{dir}");
    }
}

/// `kubernetes-validate --strict` on `manifests` (the tool of the test venv).
fn kubernetes_validate(manifests: &str, what: &str) {
    let python = Interop::from_env().python;
    let tool = python.with_file_name("kubernetes-validate");
    let mut child = Command::new(&tool)
        .args(["--strict", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e} (bash tests/run installs it)", tool.display()));
    if let Some(mut stdin) = child.stdin.take() {
        std::io::Write::write_all(&mut stdin, manifests.as_bytes()).expect("write manifests");
    }
    let out = child.wait_with_output().expect("kubernetes-validate");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what} fails kubernetes-validate --strict:\n{report}");
    assert!(report.contains("passed"), "{report}");
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} among {:?}", kinds(docs)))
}

fn kinds(docs: &[Value]) -> Vec<String> {
    docs.iter().map(|d| format!("{}/{}", d["kind"].as_str().unwrap_or("?"), d["metadata"]["name"])).collect()
}

/// Whether every label of `selector` is among `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    selector.as_object().is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| labels.get(k) == Some(v)))
}

/// Checks the gateway's objects in rendered manifests; returns its config.
fn check_gateway(docs: &[Value], what: &str) -> Config {
    let deployment = find(docs, "Deployment", "seawall");
    let pod = &deployment["spec"]["template"];
    let labels = &pod["metadata"]["labels"];
    assert!(selects(&deployment["spec"]["selector"]["matchLabels"], labels), "{what}: Deployment selector");
    let container = &pod["spec"]["containers"][0];
    let port = |name: &str| {
        container["ports"]
            .as_array()
            .and_then(|ports| ports.iter().find(|p| p["name"] == name))
            .map(|p| p["containerPort"].as_u64().unwrap_or_default())
    };
    for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
        assert_eq!(container[probe]["httpGet"]["port"], "admin", "{what}: {probe}");
    }
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    for bound in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            assert!(container["resources"][bound][resource].is_string(), "{what}: resources.{bound}.{resource}");
        }
    }
    assert_eq!(pod["spec"]["securityContext"]["runAsNonRoot"], true);

    // The config comes from the ConfigMap kustomize generated, at the path `--config` names.
    let volume = pod["spec"]["volumes"].as_array().and_then(|v| v.iter().find(|v| v["name"] == "config"));
    let map_name = volume.and_then(|v| v["configMap"]["name"].as_str()).expect("the config volume");
    assert!(map_name.starts_with("seawall-"), "{what}: a generated (hashed) name, got {map_name}");
    let args: Vec<&str> = container["args"].as_array().expect("args").iter().filter_map(Value::as_str).collect();
    let config_path = args.iter().position(|a| *a == "--config").map(|i| args[i + 1]).expect("--config");
    let mount = container["volumeMounts"].as_array().and_then(|m| m.iter().find(|m| m["name"] == "config"));
    let mount_path = mount.and_then(|m| m["mountPath"].as_str()).expect("the config mount");
    let key = config_path.strip_prefix(&format!("{mount_path}/")).expect("--config inside the config mount");
    let text = find(docs, "ConfigMap", map_name)["data"][key].as_str().expect("the config in the ConfigMap");

    // The session key: a generated Secret, mounted where `session.key_file` reads it.
    let key_volume = pod["spec"]["volumes"].as_array().and_then(|v| v.iter().find(|v| v["secret"].is_object()));
    let secret_name = key_volume.and_then(|v| v["secret"]["secretName"].as_str()).expect("a Secret volume");
    assert!(secret_name.starts_with("seawall-session-key-"), "{what}: a generated (hashed) name, got {secret_name}");
    let secret = find(docs, "Secret", secret_name);
    let key_mount = container["volumeMounts"]
        .as_array()
        .and_then(|m| m.iter().find(|m| Some(&m["name"]) == key_volume.map(|v| &v["name"])))
        .expect("the Secret is mounted");
    assert_eq!(key_mount["readOnly"], true, "{what}: the key is mounted read-only");
    let key_file = yaml(text, "the gateway config")["session"]["key_file"].as_str().map(str::to_owned);
    let key_file = key_file.expect("session.key_file in the gateway config");
    let mount_path = key_mount["mountPath"].as_str().expect("mountPath");
    let item = key_file.strip_prefix(&format!("{mount_path}/")).expect("session.key_file inside the Secret's mount");
    let encoded = secret["data"][item].as_str().unwrap_or_else(|| panic!("{what}: no {item} in the Secret"));
    let key = base64::engine::general_purpose::STANDARD.decode(encoded).expect("Secret data is base64");
    // The config as a pod reads it: the key file where the Secret puts it.
    let here = TestDir::new("session-key");
    let local = here.write("session-key", std::str::from_utf8(&key).expect("a text key"));
    let text = text.replace(&key_file, &local.display().to_string());
    let config = seawall_config(&text, &format!("{what}: ConfigMap {map_name}"));
    assert!(config.session.key_material().is_ok_and(|m| m.current.is_some()), "{what}: the key seals session ids");
    assert_eq!(Some(u64::from(config.listen.port())), port("mcp"), "{what}: listen vs the mcp port");
    let admin = config.admin_listen.map(|a| u64::from(a.port()));
    assert_eq!(admin, port("admin"), "{what}: admin_listen vs the admin port");
    let scrape = &pod["metadata"]["annotations"]["prometheus.io/port"];
    assert_eq!(scrape.as_str().and_then(|p| p.parse().ok()), admin, "{what}: the scrape port");

    let service = find(docs, "Service", "seawall");
    assert!(selects(&service["spec"]["selector"], labels), "{what}: the Service selects the pods");
    // Any replica serves any request: no client affinity.
    assert!(matches!(service["spec"].get("sessionAffinity"), None | Some(Value::Null)), "{what}: sessionAffinity");
    let hpa = find(docs, "HorizontalPodAutoscaler", "seawall");
    assert_eq!(hpa["spec"]["scaleTargetRef"]["kind"], "Deployment");
    assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], "seawall");
    assert!(hpa["spec"]["minReplicas"].as_u64() >= Some(2), "{what}: at least two replicas");
    let pdb = find(docs, "PodDisruptionBudget", "seawall");
    assert!(selects(&pdb["spec"]["selector"]["matchLabels"], labels), "{what}: the PDB selects the pods");
    config
}

#[test]
fn the_kubernetes_base_renders_and_validates() {
    let (text, docs) = kustomize("deploy/kubernetes/base");
    kubernetes_validate(&text, "deploy/kubernetes/base");
    let config = check_gateway(&docs, "deploy/kubernetes/base");
    assert_eq!(docs.len(), 6, "{:?}", kinds(&docs));
    assert_eq!(docs.iter().filter(|d| d["kind"] == "Secret").count(), 1, "the session key's Secret");
    assert!(config.upstream("demo").is_some());
}

#[test]
fn the_redis_overlay_renders_validates_and_points_rate_limits_and_breakers_at_its_redis() {
    let (text, docs) = kustomize("deploy/kubernetes/overlays/redis");
    kubernetes_validate(&text, "deploy/kubernetes/overlays/redis");
    let config = check_gateway(&docs, "deploy/kubernetes/overlays/redis");
    let redis = find(&docs, "Deployment", "seawall-redis");
    let service = find(&docs, "Service", "seawall-redis");
    let labels = &redis["spec"]["template"]["metadata"]["labels"];
    assert!(selects(&service["spec"]["selector"], labels), "the Redis Service selects the Redis pod");
    let gateway = find(&docs, "Deployment", "seawall");
    let gateway_labels = &gateway["spec"]["template"]["metadata"]["labels"];
    assert!(!selects(&find(&docs, "Service", "seawall")["spec"]["selector"], labels), "seawall's Service skips Redis");
    assert!(!selects(&service["spec"]["selector"], gateway_labels), "the Redis Service skips seawall");
    let port = service["spec"]["ports"][0]["port"].as_u64().expect("the Redis port");
    let backend = &config.rate_limits.backend;
    assert_eq!(authority(backend), format!("seawall-redis:{port}"), "rate_limits.backend {backend}");
    assert!(!config.rate_limits.limits.is_empty());
    // Breakers are shared by the replicas through the same Redis.
    assert!(config.shares_breakers(), "the overlay shares breakers");
    let sharing = config.breaker_sharing_redis().expect("a Redis for shared breakers");
    assert_eq!(authority(&sharing), format!("seawall-redis:{port}"), "breakers shared through {sharing}");
    // The base's config is replaced, not added beside it.
    assert_eq!(docs.iter().filter(|d| d["kind"] == "ConfigMap").count(), 1);
}

// ---------------------------------------------------------------------------------------
// Compose
// ---------------------------------------------------------------------------------------

/// The compose file and its services.
struct Compose {
    services: BTreeMap<String, Value>,
}

impl Compose {
    fn load() -> Compose {
        let compose = yaml(&read("deploy/compose.yaml"), "deploy/compose.yaml");
        let services = compose["services"].as_object().expect("services").clone().into_iter().collect();
        Compose { services }
    }

    fn service(&self, name: &str) -> &Value {
        self.services.get(name).unwrap_or_else(|| panic!("no service {name} in deploy/compose.yaml"))
    }

    /// A service's bind mounts: container path → file in the repository.
    fn mounts(&self, name: &str) -> BTreeMap<String, PathBuf> {
        let volumes = self.service(name)["volumes"].as_array().cloned().unwrap_or_default();
        volumes
            .iter()
            .filter_map(Value::as_str)
            .map(|v| {
                let parts: Vec<&str> = v.split(':').collect();
                let host = repo().join("deploy").join(parts[0]);
                // `..` resolved, so the path compares equal to the file's own.
                (parts[1].to_owned(), host.canonicalize().unwrap_or(host))
            })
            .collect()
    }

    /// A service's command as a list.
    fn command(&self, name: &str) -> Vec<String> {
        let command = self.service(name)["command"].as_array().cloned().unwrap_or_default();
        command.iter().filter_map(Value::as_str).map(str::to_owned).collect()
    }

    /// The file mounted at `path` in `service`, read.
    fn mounted(&self, service: &str, path: &str) -> String {
        let host = self.mounts(service).remove(path).unwrap_or_else(|| panic!("{service}: nothing mounted at {path}"));
        std::fs::read_to_string(&host).unwrap_or_else(|e| panic!("{}: {e}", host.display()))
    }
}

#[test]
fn compose_mounts_files_that_exist_and_names_services_that_exist() {
    let compose = Compose::load();
    for name in ["seawall", "demo", "prometheus", "grafana", "otel-collector"] {
        compose.service(name);
    }
    for (name, service) in &compose.services {
        assert!(service["image"].is_string(), "{name}: an image");
        for (container, host) in compose.mounts(name) {
            assert!(host.exists(), "{name}: {} (mounted at {container}) does not exist", host.display());
        }
        let depends = match &service["depends_on"] {
            Value::Array(list) => list.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
            Value::Object(map) => map.keys().cloned().collect(),
            _ => Vec::new(),
        };
        for other in depends {
            assert!(compose.services.contains_key(&other), "{name} depends on unknown service {other}");
        }
    }
    // seawall's image is built from the one Dockerfile; the demo runs the same image.
    let seawall = compose.service("seawall");
    let build = &seawall["build"];
    let context = repo().join("deploy").join(build["context"].as_str().expect("build.context"));
    assert!(context.join(build["dockerfile"].as_str().expect("build.dockerfile")).is_file());
    assert_eq!(compose.service("demo")["image"], seawall["image"]);
}

#[test]
fn the_seawall_config_of_compose_reaches_the_demo_and_the_collector() {
    let compose = Compose::load();
    let command = compose.command("seawall");
    let path = command.iter().position(|a| a == "--config").map(|i| &command[i + 1]).expect("--config");
    let config = seawall_config(&compose.mounted("seawall", path), "deploy/compose/seawall.yaml");

    // The HTTP upstreams are the demo service, at the address it listens on.
    let demo = compose.command("demo");
    assert_eq!(demo[0], "demo-upstream");
    let listen = demo.iter().position(|a| a == "--listen").map(|i| &demo[i + 1]).expect("demo --listen");
    let demo_port = listen.rsplit(':').next().unwrap_or_default();
    let http: Vec<&str> = config.upstreams.iter().filter_map(|u| u.url.as_deref()).collect();
    assert!(!http.is_empty());
    for url in http {
        assert_eq!(authority(url), format!("demo:{demo_port}"), "{url}");
    }
    assert!(config.upstreams.iter().any(|u| u.command.as_deref() == Some("seawall")), "a stdio upstream too");
    // The published ports are the listeners.
    let ports: Vec<&str> =
        compose.service("seawall")["ports"].as_array().expect("ports").iter().filter_map(Value::as_str).collect();
    for port in [config.listen.port(), config.admin_listen.expect("admin").port()] {
        assert!(ports.iter().any(|p| p.ends_with(&format!(":{port}"))), "port {port} not published: {ports:?}");
    }

    // Spans go to the collector service, on the port its OTLP/HTTP receiver listens on.
    let endpoint = config.tracing.endpoint.as_deref().expect("tracing.endpoint");
    assert_eq!(config.tracing.enabled, Some(true));
    let command = compose.command("otel-collector");
    let collector_path = command[0].strip_prefix("--config=").expect("--config=");
    let collector = yaml(&compose.mounted("otel-collector", collector_path), "the collector config");
    let receiver = collector["receivers"]["otlp"]["protocols"]["http"]["endpoint"].as_str().expect("otlp http");
    let port = receiver.rsplit(':').next().unwrap_or_default();
    assert_eq!(authority(endpoint), format!("otel-collector:{port}"), "{endpoint}");
    let pipeline = &collector["service"]["pipelines"]["traces"];
    assert_eq!(pipeline["receivers"][0], "otlp");
    for exporter in pipeline["exporters"].as_array().expect("exporters") {
        assert!(collector["exporters"].get(exporter.as_str().unwrap_or_default()).is_some(), "{exporter}");
    }
}

#[test]
fn prometheus_of_compose_passes_promtool_and_scrapes_seawall() {
    let compose = Compose::load();
    // Lay the mounted files out as the container sees them, and check the config there.
    let root = TestDir::new("compose-prometheus");
    for (container, host) in compose.mounts("prometheus") {
        let at = root.path().join(container.trim_start_matches('/'));
        std::fs::create_dir_all(at.parent().expect("a parent")).expect("mkdir");
        std::fs::copy(&host, &at).unwrap_or_else(|e| panic!("copy {}: {e}", host.display()));
    }
    let command = compose.command("prometheus");
    let config_path = command.iter().find_map(|a| a.strip_prefix("--config.file=")).expect("--config.file");
    let config_file = root.path().join(config_path.trim_start_matches('/'));
    let out = Command::new(prometheus_binary("promtool")).arg("check").arg("config").arg(&config_file).output();
    let out = out.expect("run promtool");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool check config failed:\n{report}");
    assert!(report.contains("alerts.yaml") && report.contains("SUCCESS"), "the alert rules were checked: {report}");

    // It scrapes seawall's admin listener.
    let prometheus = yaml(&std::fs::read_to_string(&config_file).expect("read"), "prometheus.yml");
    let job = &prometheus["scrape_configs"][0];
    assert_eq!(job["metrics_path"], "/metrics");
    let target = job["static_configs"][0]["targets"][0].as_str().expect("a target");
    let seawall_command = compose.command("seawall");
    let path = seawall_command.iter().position(|a| a == "--config").map(|i| &seawall_command[i + 1]).expect("--config");
    let config = seawall_config(&compose.mounted("seawall", path), "deploy/compose/seawall.yaml");
    let admin = config.admin_listen.expect("admin_listen").port();
    assert_eq!(target, format!("seawall:{admin}"));
}

#[test]
fn grafana_of_compose_provisions_prometheus_and_the_dashboards() {
    let compose = Compose::load();
    let mounts = compose.mounts("grafana");
    let provisioning = |kind: &str| {
        let dir = mounts.get(&format!("/etc/grafana/provisioning/{kind}")).expect("a provisioning mount");
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir).expect("read dir").flatten().map(|e| e.path()).collect();
        files.sort();
        assert!(!files.is_empty(), "nothing in {}", dir.display());
        files.iter().map(|f| yaml(&std::fs::read_to_string(f).expect("read"), kind)).collect::<Vec<_>>()
    };
    // The data source is the Prometheus service, on the port it listens on inside.
    let sources = provisioning("datasources");
    let source = &sources[0]["datasources"][0];
    assert_eq!(source["type"], "prometheus");
    assert_eq!(source["isDefault"], true, "the dashboard's datasource variable picks the default");
    assert_eq!(authority(source["url"].as_str().expect("url")), "prometheus:9090");
    compose.service("prometheus");

    // The dashboard provider reads the folder every dashboard of dashboards/ is mounted in.
    let providers = provisioning("dashboards");
    let folder = providers[0]["providers"][0]["options"]["path"].as_str().expect("a provider path");
    let dashboards: Vec<&PathBuf> = mounts
        .iter()
        .filter(|(container, _)| Path::new(container).parent() == Some(Path::new(folder)))
        .map(|(_, h)| h)
        .collect();
    let shipped: Vec<PathBuf> = std::fs::read_dir(repo().join("dashboards"))
        .expect("dashboards/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert!(!shipped.is_empty());
    for dashboard in &shipped {
        assert!(dashboards.contains(&dashboard), "{} is not provisioned", dashboard.display());
        let parsed: Value = serde_json::from_str(&std::fs::read_to_string(dashboard).expect("read")).expect("JSON");
        assert!(parsed["panels"].as_array().is_some_and(|p| !p.is_empty()));
    }
}

// ---------------------------------------------------------------------------------------
// systemd
// ---------------------------------------------------------------------------------------

#[test]
fn the_systemd_unit_runs_the_gateway_with_a_config_file() {
    let unit = read("deploy/seawall.service");
    let exec = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("ExecStart");
    let args: Vec<&str> = exec.split_whitespace().collect();
    assert_eq!(&args[..3], ["/usr/local/bin/seawall", "run", "--config"]);
    assert!(unit.contains("\nKillMode=mixed\n"), "SIGTERM to seawall first, so it stops its children");
    assert!(unit.contains("\nDynamicUser=yes\n"));
}
