//! The deployment files stay in step with the code: the Kubernetes manifests parse, and
//! the gateway config they carry passes `seawall`'s own validation.

use std::collections::BTreeMap;

#[test]
fn the_kubernetes_config_map_holds_a_valid_seawall_config() {
    let manifests = include_str!("../deploy/kubernetes/seawall.yaml");
    let docs: Vec<serde_json::Value> = manifests
        .split("\n---\n")
        .map(|doc| yaml_serde::from_str(doc).unwrap_or_else(|e| panic!("manifest does not parse: {e}\n{doc}")))
        .collect();
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(kinds, ["ConfigMap", "Deployment", "Service", "PodDisruptionBudget"]);
    let config = docs[0]["data"]["seawall.yaml"].as_str().expect("seawall.yaml in the ConfigMap");
    let env: BTreeMap<&str, &str> = [("SEARCH_TOKEN", "test")].into();
    let lookup = |name: &str| env.get(name).map(|v| (*v).to_owned());
    let parsed = seawall::config::Config::parse_with_env(config, "deploy/kubernetes/seawall.yaml", &lookup)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(parsed.listen.port(), 8080);
    // The probes and the scrape annotation point at the admin listener.
    let pod = &docs[1]["spec"]["template"];
    assert_eq!(pod["metadata"]["annotations"]["prometheus.io/port"], "9090");
    assert_eq!(parsed.admin_listen.map(|a| a.port()), Some(9090));
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
}

#[test]
fn the_demo_and_example_configs_validate() {
    let demo = seawall::config::Config::parse(include_str!("../config/demo.yaml"), "config/demo.yaml");
    assert!(demo.is_ok(), "{:?}", demo.err());
    let lookup = |name: &str| (name == "UPSTREAM_TOKEN").then(|| "t".to_owned());
    let example =
        seawall::config::Config::parse_with_env(include_str!("../config/example.yaml"), "config/example.yaml", &lookup);
    assert!(example.is_ok(), "{}", example.err().map(|e| e.to_string()).unwrap_or_default());
}
