"""The Kubernetes base: rendered by `kubectl kustomize` (offline, no cluster), every built-in resource validated
strictly by kubernetes-validate against the newest Kubernetes schema it ships, and the pieces checked to fit
together (selectors, ports, probes, the image's command, measured resources, the ServiceMonitor's job).

The ServiceMonitor is a CRD (monitoring.coreos.com/v1) that kubernetes-validate has no schema for; no copy of the
CRD's schema is vendored here, so it is checked field by field below instead."""

from __future__ import annotations

import copy
import json
import re
import subprocess

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version
from ops_support import DEPLOY, ROOT, need

BASE = DEPLOY / "k8s" / "base"
VERSION = latest_version()


@pytest.fixture(scope="module")
def rendered() -> dict[str, dict]:
    kubectl = need("kubectl", "kubernetes-client")
    p = subprocess.run([kubectl, "kustomize", str(BASE)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    docs = [d for d in yaml.safe_load_all(p.stdout) if d]
    return {d["kind"]: d for d in docs}


def test_every_file_of_the_base_is_listed():
    kust = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    files = {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kust["resources"]) == files


def test_kustomize_renders_the_expected_kinds(rendered):
    assert set(rendered) == {
        "ConfigMap",
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "ServiceMonitor",
    }


def test_builtin_resources_pass_kubernetes_validate_strictly(rendered):
    assert VERSION >= "1.30"
    for kind, doc in rendered.items():
        if kind == "ServiceMonitor":
            continue
        kubernetes_validate.validate(doc, VERSION, strict=True)
    # and validation can fail: a misspelt field is refused in strict mode
    broken = copy.deepcopy(rendered["Deployment"])
    broken["spec"]["template"]["spec"]["containers"][0]["readinessprobe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSION, strict=True)


def test_deployment_probes_resources_and_command(rendered):
    dep, svc, cm = rendered["Deployment"], rendered["Service"], rendered["ConfigMap"]
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["startupProbe"]["httpGet"]["path"] == "/healthz"
    # the image's own command (Dockerfile CMD)
    cmd = json.loads(re.search(r"^CMD (.*)$", (ROOT / "Dockerfile").read_text(), re.M)[1])
    assert c["args"] == cmd
    assert c["ports"][0]["containerPort"] == int(cmd[cmd.index("--port") + 1])
    # measured: ~330 MiB resident after warm-up, ~750 MiB at the peak of 16 concurrent requests
    res = c["resources"]
    assert res["requests"]["memory"] == "512Mi" and res["limits"]["memory"] == "1Gi"
    assert res["requests"]["cpu"] == "1" and res["limits"]["cpu"] == "2"
    assert pod["securityContext"]["runAsNonRoot"] and c["securityContext"]["readOnlyRootFilesystem"]
    # settings through the generated ConfigMap (hashed name, referenced by the Deployment)
    assert c["envFrom"][0]["configMapRef"]["name"] == cm["metadata"]["name"]
    assert cm["metadata"]["name"].startswith("chunlian-settings-")
    assert all(k.startswith("CHUNLIAN_") for k in cm["data"])
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    # the Service, PDB and HPA point at these pods
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    assert rendered["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert svc["spec"]["ports"][0]["targetPort"] == c["ports"][0]["name"]
    hpa = rendered["HorizontalPodAutoscaler"]["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": dep["metadata"]["name"]}
    assert 2 <= hpa["minReplicas"] < hpa["maxReplicas"]
    assert rendered["PodDisruptionBudget"]["spec"]["minAvailable"] < hpa["minReplicas"]


def test_servicemonitor_fields(rendered):
    """By hand, for want of the CRD schema: the fields the Prometheus Operator reads, with the right types."""
    sm, svc = rendered["ServiceMonitor"], rendered["Service"]
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(sm["spec"]) <= {"selector", "endpoints", "jobLabel", "namespaceSelector", "targetLabels"}
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    (ep,) = sm["spec"]["endpoints"]
    assert set(ep) <= {"port", "path", "interval", "scrapeTimeout", "scheme"}
    assert ep["port"] in {p["name"] for p in svc["spec"]["ports"]} and ep["path"] == "/metrics"
    assert all(re.fullmatch(r"\d+(ms|s|m)", ep[k]) for k in ("interval", "scrapeTimeout"))
    # the job label is the Service's name, which the rules select on
    assert svc["metadata"]["name"] == "chunlian"
    assert 'job="chunlian"' in (DEPLOY / "rules" / "alerts.yml").read_text()
