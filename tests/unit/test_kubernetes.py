"""``deploy/kubernetes``: valid against the Kubernetes schemas (offline) and in step with the code.

The base is rendered (``tests/support/kustomize.py``; compared with ``kubectl kustomize`` when
installed), every object is validated strictly against the schemas ``kubernetes-validate``
ships, and the manifests are checked against the gateway itself: the ConfigMap's gateway.yaml
passes ``mcp-gateway check`` with the mounted Secrets stubbed, ports and probe paths are the
configured listeners and the ops routes, the grace period covers drain plus shutdown delay, the
NetworkPolicy admits what the configuration needs and nothing on 9090 but monitoring.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml

from gateway.app.ops import build_ops_app
from gateway.app.services import Services
from gateway.commands.cli import main as cli_main
from gateway.config import DEFAULT_LOGIN_PREFIX, load_config
from tests.support.kustomize import normalise_generated_names, render

ROOT: Final = Path(__file__).resolve().parents[2]
BASE: Final = ROOT / "deploy" / "kubernetes"
K8S_VERSION: Final = "1.30"
"""The oldest Kubernetes release the base must work on (autoscaling/v2, policy/v1)."""
DOCKERFILE_UID: Final = 10001

# One worker renders the base once (the module fixture) for every test here.
pytestmark = pytest.mark.xdist_group("kubernetes")


@pytest.fixture(scope="module")
def documents() -> list[dict[str, Any]]:
    return render(BASE)


def one(documents: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    """The object of ``kind`` named ``name`` (a generated ConfigMap: ``name-<hash>``)."""

    def matches(actual: str) -> bool:
        return actual == name or (
            kind == "ConfigMap" and re.fullmatch(name + r"-[a-z0-9]+", actual) is not None
        )

    found = [d for d in documents if d["kind"] == kind and matches(d["metadata"]["name"])]
    assert len(found) == 1, (kind, name, [d["metadata"]["name"] for d in found])
    return found[0]


def gateway_deployment(documents: list[dict[str, Any]]) -> dict[str, Any]:
    return next(
        d for d in documents if d["kind"] == "Deployment" and d["metadata"]["name"] == "mcp-gateway"
    )


def container(documents: list[dict[str, Any]]) -> dict[str, Any]:
    spec = gateway_deployment(documents)["spec"]["template"]["spec"]
    (only,) = spec["containers"]
    return dict(only)


def config_text(documents: list[dict[str, Any]]) -> str:
    return str(one(documents, "ConfigMap", "mcp-gateway-config")["data"]["gateway.yaml"])


def raw_config(documents: list[dict[str, Any]]) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(config_text(documents))
    return loaded


def test_the_base_renders_every_object_the_issue_asks_for(documents: list[dict[str, Any]]) -> None:
    kinds = sorted((d["kind"], d["metadata"]["name"].split("-config-")[0]) for d in documents)
    assert kinds == [
        ("ConfigMap", "mcp-gateway"),
        ("ConfigMap", "mcp-gateway-policies"),
        ("Deployment", "mcp-gateway"),
        ("Deployment", "mcp-gateway-redis"),
        ("HorizontalPodAutoscaler", "mcp-gateway"),
        ("NetworkPolicy", "mcp-gateway"),
        ("NetworkPolicy", "mcp-gateway-redis"),
        ("PodDisruptionBudget", "mcp-gateway"),
        ("Service", "mcp-gateway"),
        ("Service", "mcp-gateway-ops"),
        ("Service", "mcp-gateway-redis"),
    ]


@pytest.mark.parametrize("index", range(11))
def test_every_object_validates_strictly_against_the_kubernetes_schema(
    documents: list[dict[str, Any]], index: int
) -> None:
    assert len(documents) == 11
    document = documents[index]
    try:
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(str(p) for p in exc.path)
        pytest.fail(f"{document['kind']}/{document['metadata']['name']}: {path}: {exc.message}")


def test_a_broken_manifest_is_refused_by_the_validator(documents: list[dict[str, Any]]) -> None:
    """The validation above can fail: a typo'd field and a wrong type are both caught."""
    broken = yaml.safe_load(yaml.safe_dump(gateway_deployment(documents)))
    broken["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFilesytem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)
    broken = yaml.safe_load(yaml.safe_dump(gateway_deployment(documents)))
    broken["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "35s"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_the_rendering_matches_kubectl_kustomize(documents: list[dict[str, Any]]) -> None:
    output = subprocess.run(
        ["kubectl", "kustomize", str(BASE)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    theirs = [d for d in yaml.safe_load_all(output) if d]
    bases = {"mcp-gateway-config"}
    assert normalise_generated_names(theirs, bases) == normalise_generated_names(documents, bases)


def test_the_pod_runs_hardened_as_the_image_user(documents: list[dict[str, Any]]) -> None:
    pod = gateway_deployment(documents)["spec"]["template"]["spec"]
    security = pod["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] == security["runAsGroup"] == DOCKERFILE_UID
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert f"USER {DOCKERFILE_UID}:{DOCKERFILE_UID}" in (ROOT / "Dockerfile").read_text()
    assert pod["automountServiceAccountToken"] is False
    c = container(documents)
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert set(c["resources"]) == {"requests", "limits"}
    assert {"cpu", "memory"} <= set(c["resources"]["requests"])
    keys = {(t["topologyKey"]) for t in pod["topologySpreadConstraints"]}
    assert keys == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}


def test_ports_and_probes_are_the_configured_listeners_and_the_ops_routes(
    documents: list[dict[str, Any]],
) -> None:
    raw = raw_config(documents)
    c = container(documents)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"http": raw["listen"]["port"], "ops": raw["ops_listen"]["port"]}
    assert raw["ops_listen"]["host"] == "0.0.0.0"  # the kubelet probes the pod IP
    probes = {
        name: c[name]["httpGet"] for name in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert probes["livenessProbe"] == {"path": "/healthz", "port": "ops"}
    assert probes["startupProbe"] == {"path": "/healthz", "port": "ops"}
    assert probes["readinessProbe"] == {"path": "/readyz", "port": "ops"}
    public = one(documents, "Service", "mcp-gateway")
    assert [(p["port"], p["targetPort"]) for p in public["spec"]["ports"]] == [(8080, "http")]
    ops = one(documents, "Service", "mcp-gateway-ops")
    assert [(p["port"], p["targetPort"]) for p in ops["spec"]["ports"]] == [(9090, "ops")]
    assert ops["spec"]["clusterIP"] == "None"  # headless: Prometheus scrapes every pod


def load_stubbed(documents: list[dict[str, Any]], root: Path) -> tuple[Any, Path]:
    """Lay the pod's mounts out under ``root`` (ConfigMaps as the kubelet does, Secrets as stub
    files for exactly the mounted items) and return the loaded config and its path."""
    pod = gateway_deployment(documents)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    text = config_text(documents)
    for mount in pod["containers"][0]["volumeMounts"]:
        assert "subPath" not in mount, "subPath mounts never see ConfigMap updates"
        target = root / mount["mountPath"].lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            name = volume["configMap"]["name"]
            data = next(
                d for d in documents if d["kind"] == "ConfigMap" and d["metadata"]["name"] == name
            )["data"]
            for key, value in data.items():
                (target / key).write_text(value)
        else:
            for item in volume["secret"]["items"]:
                value = "redis://:stub@127.0.0.1:6379/0" if item["key"] == "url" else "s" * 64
                (target / item["path"]).write_text(value + "\n")
    # Absolute paths in the file are container paths: point them into the laid-out tree.
    for mount in pod["containers"][0]["volumeMounts"]:
        text = text.replace(
            mount["mountPath"] + "/", str(root / mount["mountPath"].lstrip("/")) + "/"
        )
        text = text.replace(
            mount["mountPath"] + "\n", str(root / mount["mountPath"].lstrip("/")) + "\n"
        )
    config_path = root / "etc" / "mcp-gateway" / "config" / "gateway.stubbed.yaml"
    config_path.write_text(text)
    return load_config(config_path, {}), config_path


@pytest.mark.usefixtures("restore_logging")  # main() configures structlog for the process
def test_the_configmap_gateway_yaml_passes_check_with_the_secrets_stubbed(
    documents: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, path = load_stubbed(documents, tmp_path)
    assert config.warnings == ()  # no literal secrets
    assert cli_main(["check", "--config", str(path)]) == 0, capsys.readouterr()
    assert "OK (policy version" in capsys.readouterr().out
    # Every secret reference is a file of a mounted Secret (nothing from the environment).
    assert "{env:" not in config_text(documents)
    assert config.state.backend == "redis" and config.state.share_token_cache
    assert config.admin.token is not None


def test_the_configmap_gateway_yaml_passes_check_skip_secrets_without_the_secrets(
    documents: list[dict[str, Any]], tmp_path: Path
) -> None:
    # Issue 43: --skip-secrets took the unread admin.token for a short one and the unread
    # state.redis.url for one of another scheme, on this very file. No Secret is mounted here.
    _, path = load_stubbed(documents, tmp_path)
    pod = gateway_deployment(documents)["spec"]["template"]["spec"]
    secrets = {v["name"] for v in pod["volumes"] if "secret" in v}
    for mount in pod["containers"][0]["volumeMounts"]:
        if mount["name"] in secrets:
            shutil.rmtree(tmp_path / mount["mountPath"].lstrip("/"))
    check = ["check", "--skip-secrets", "--config", str(path)]
    result = subprocess.run(
        [sys.executable, "-m", "gateway.commands", *check],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("(secrets not read)")


def test_the_grace_period_covers_the_drain_and_the_shutdown_delay(
    documents: list[dict[str, Any]], tmp_path: Path
) -> None:
    config, _ = load_stubbed(documents, tmp_path)
    limits = config.limits
    delay = limits.shutdown_delay_s
    assert delay > 0  # the base keeps serving while the endpoint removal propagates
    grace = gateway_deployment(documents)["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"
    ]
    assert grace > limits.drain_timeout_s + delay
    assert f"({grace})" in config_text(documents)  # the comment in gateway.yaml says the same


def test_the_ops_routes_exist_for_every_probe(
    documents: list[dict[str, Any]], tmp_path: Path
) -> None:
    config, _ = load_stubbed(documents, tmp_path)
    app = build_ops_app(config, Services())
    paths = {r.resource.canonical for r in app.router.routes() if r.resource is not None}
    c = container(documents)
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"]["path"] in paths
    annotations = gateway_deployment(documents)["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/path"] in paths
    assert int(annotations["prometheus.io/port"]) == config.ops_listen.port


def test_the_config_rolls_out_and_the_policies_reload_in_place() -> None:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    generators = {g["name"]: g for g in kustomization["configMapGenerator"]}
    assert "options" not in generators["mcp-gateway-config"]  # hashed name: a change rolls out
    assert generators["mcp-gateway-policies"]["options"] == {"disableNameSuffixHash": True}
    assert (BASE / "policies" / "default.yaml").read_text() == (
        ROOT / "policies" / "default.yaml"
    ).read_text(), "deploy/kubernetes/policies/default.yaml is a copy of policies/default.yaml"


def test_selectors_match_the_pod_labels(documents: list[dict[str, Any]]) -> None:
    deployment = gateway_deployment(documents)
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    for kind, name in [("Service", "mcp-gateway"), ("PodDisruptionBudget", "mcp-gateway")]:
        document = one(documents, kind, name)
        selector = document["spec"]["selector"]
        selector = selector.get("matchLabels", selector)
        assert selector.items() <= labels.items(), (kind, name)
    ops = one(documents, "Service", "mcp-gateway-ops")
    assert ops["spec"]["selector"].items() <= labels.items()
    policy = next(
        d
        for d in documents
        if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == "mcp-gateway"
    )
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    hpa = one(documents, "HorizontalPodAutoscaler", "mcp-gateway")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "mcp-gateway",
    }
    assert hpa["spec"]["minReplicas"] >= 2
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
    assert "replicas" not in deployment["spec"], "the HPA owns the replica count"


def test_the_network_policy_admits_only_what_the_config_needs(
    documents: list[dict[str, Any]], tmp_path: Path
) -> None:
    config, _ = load_stubbed(documents, tmp_path)
    policy = next(
        d
        for d in documents
        if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == "mcp-gateway"
    )
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    ingress = {
        rule["ports"][0]["port"]: rule["from"][0]["namespaceSelector"]["matchLabels"]
        for rule in policy["spec"]["ingress"]
    }
    assert ingress[config.ops_listen.port] == {"kubernetes.io/metadata.name": "monitoring"}
    assert set(ingress) == {config.listen.port, config.ops_listen.port}
    egress_ports = {port["port"] for rule in policy["spec"]["egress"] for port in rule["ports"]}
    backend_port = urlsplit(config.backend.url).port
    assert egress_ports == {53, backend_port, 6379, 443}
    redis_policy = next(
        d
        for d in documents
        if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == "mcp-gateway-redis"
    )
    (rule,) = redis_policy["spec"]["ingress"]
    gateway_labels = gateway_deployment(documents)["spec"]["template"]["metadata"]["labels"]
    assert rule["from"][0]["podSelector"]["matchLabels"].items() <= gateway_labels.items()
    assert redis_policy["spec"]["egress"] == []


def test_the_service_monitor_component_selects_the_ops_service(
    documents: list[dict[str, Any]],
) -> None:
    component = BASE / "components" / "servicemonitor"
    assert yaml.safe_load((component / "kustomization.yaml").read_text())["kind"] == "Component"
    monitor = yaml.safe_load((component / "servicemonitor.yaml").read_text())
    ops = one(documents, "Service", "mcp-gateway-ops")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= ops["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [
        p["name"] for p in ops["spec"]["ports"]
    ]


def test_the_ingress_component_routes_exactly_what_the_gateway_serves_publicly(
    documents: list[dict[str, Any]],
) -> None:
    built = render(BASE, [BASE / "components" / "ingress"])
    ingress = one(built, "Ingress", "mcp-gateway")
    service = one(documents, "Service", "mcp-gateway")
    (rule,) = ingress["spec"]["rules"]
    routes = {(p["path"], p["pathType"]) for p in rule["http"]["paths"]}
    mcp_path = urlsplit(raw_config(documents)["resource"]).path
    assert routes == {
        (mcp_path, "Exact"),
        ("/.well-known/oauth-protected-resource" + mcp_path, "Exact"),
        (DEFAULT_LOGIN_PREFIX, "Prefix"),  # the login surface's pages (issue 45)
    }
    for path in rule["http"]["paths"]:
        backend = path["backend"]["service"]
        assert backend["name"] == service["metadata"]["name"]
        assert backend["port"]["name"] in {p["name"] for p in service["spec"]["ports"]}


# --- the knobs: one kustomize component per choice the base makes for you (issue 32 item 10) ---

COMPONENTS: Final = BASE / "components"
KNOBS: Final = (
    "nodelocal-dns",
    "issuer-in-cluster",
    "issuer-private-network",
    "redis-persistent",
    "redis-pdb",
    "ingress",
)
DOCS: Final = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")


def egress(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    policy = one(documents, "NetworkPolicy", "mcp-gateway")
    rules: list[dict[str, Any]] = policy["spec"]["egress"]
    return rules


def added_rules(knob: str, documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The egress rules ``knob`` adds to the base's."""
    base = egress(documents)
    return [rule for rule in egress(render(BASE, [COMPONENTS / knob])) if rule not in base]


@pytest.mark.parametrize("knob", KNOBS)
def test_each_component_builds_and_every_object_validates(knob: str) -> None:
    built = render(BASE, [COMPONENTS / knob])
    for document in built:
        try:
            kubernetes_validate.validate(document, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{knob}: {document['kind']}/{document['metadata']['name']}: {path}: {exc}")
    assert f"components/{knob}" in DOCS, "docs/operations.md says when to use it"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize("knob", KNOBS)
def test_each_component_renders_as_kubectl_kustomize_does(knob: str, tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(BASE, overlay)],
                "components": [os.path.relpath(COMPONENTS / knob, overlay)],
            }
        )
    )
    output = subprocess.run(
        ["kubectl", "kustomize", str(overlay)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    theirs = [d for d in yaml.safe_load_all(output) if d]
    bases = {"mcp-gateway-config"}
    ours = render(BASE, [COMPONENTS / knob])
    assert normalise_generated_names(theirs, bases) == normalise_generated_names(ours, bases)


def test_the_base_makes_the_restrictive_choice_of_every_knob(
    documents: list[dict[str, Any]],
) -> None:
    rules = egress(documents)
    dns = [rule for rule in rules if {p["port"] for p in rule["ports"]} == {53}]
    assert [rule["to"] for rule in dns] == [
        [
            {
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": "kube-system"}
                },
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
            }
        ]
    ]  # only the cluster DNS pods (no NodeLocal DNSCache address)
    (https,) = [rule for rule in rules if {p["port"] for p in rule["ports"]} == {443}]
    assert https["to"] == [
        {
            "ipBlock": {
                "cidr": "0.0.0.0/0",
                "except": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"],
            }
        }
    ]
    kinds = {(d["kind"], d["metadata"]["name"]) for d in documents}
    assert ("PersistentVolumeClaim", "mcp-gateway-redis") not in kinds
    assert ("PodDisruptionBudget", "mcp-gateway-redis") not in kinds
    redis = one(documents, "Deployment", "mcp-gateway-redis")["spec"]["template"]["spec"]
    assert redis["volumes"] == [{"name": "data", "emptyDir": {"sizeLimit": "64Mi"}}]
    assert raw_config(documents)["trusted_proxies"] == ["10.0.0.0/8"]


def test_nodelocal_dns_adds_the_node_cache_address_on_port_53(
    documents: list[dict[str, Any]],
) -> None:
    assert added_rules("nodelocal-dns", documents) == [
        {
            "to": [{"ipBlock": {"cidr": "169.254.20.10/32"}}],
            "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
        }
    ]


def test_the_issuer_components_open_https_to_one_namespace_or_one_private_range(
    documents: list[dict[str, Any]],
) -> None:
    (in_cluster,) = added_rules("issuer-in-cluster", documents)
    assert in_cluster["to"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "identity"
    }
    assert "podSelector" in in_cluster["to"][0]  # the issuer's pods, not the whole namespace
    assert in_cluster["ports"] == [{"port": 8443, "protocol": "TCP"}]
    (private,) = added_rules("issuer-private-network", documents)
    assert private == {
        "to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}],
        "ports": [{"port": 443, "protocol": "TCP"}],
    }


def test_redis_persistent_puts_an_append_only_file_on_a_claim_redis_may_write() -> None:
    built = render(BASE, [COMPONENTS / "redis-persistent"])
    claim = one(built, "PersistentVolumeClaim", "mcp-gateway-redis")
    pod = one(built, "Deployment", "mcp-gateway-redis")["spec"]["template"]["spec"]
    assert pod["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}
    ]
    (redis,) = pod["containers"]
    args = redis["args"]
    assert args[args.index("--appendonly") + 1] == "yes"
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction"
    assert {"name": "data", "mountPath": "/data"} in redis["volumeMounts"]
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"] == 999


def test_redis_pdb_selects_the_redis_pod_and_blocks_its_eviction() -> None:
    built = render(BASE, [COMPONENTS / "redis-pdb"])
    budget = one(built, "PodDisruptionBudget", "mcp-gateway-redis")
    labels = one(built, "Deployment", "mcp-gateway-redis")["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert budget["spec"]["maxUnavailable"] == 0
