"""The deployment files are what their generators and schemas say: the Grafana dashboard JSON is the generator's
output, the Dockerfile passes hadolint, compose.yaml the compose-spec schema, the Kubernetes manifests the
Kubernetes OpenAPI schemas (kubernetes-validate) and the ServiceMonitor its CRD's schema."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import yaml
from ops_support import DEPLOY, ROOT
from script_support import load_script


def _dashboard_module():
    return load_script(DEPLOY / "grafana" / "dashboard.py", "chunlian_dashboard")


def test_dashboard_json_is_the_generators_output():
    mod = _dashboard_module()
    committed = (DEPLOY / "grafana" / "dashboards" / "chunlian.json").read_text(encoding="utf-8")
    assert committed == mod.render(), "run: python deploy/grafana/dashboard.py"
    assert mod.main(["--check"]) == 0


def test_dashboard_has_the_panels_operators_asked_for():
    board = json.loads((DEPLOY / "grafana" / "dashboards" / "chunlian.json").read_text(encoding="utf-8"))
    assert board["uid"] == "chunlian"
    exprs = " ".join(t["expr"] for p in board["panels"] for t in p["targets"])
    for series in (
        "chunlian_request_latency_seconds:p99",
        "chunlian_couplets_generated",
        "chunlian_model_batch_rows",
        "chunlian_model_batch_requests",
        "chunlian_queue_depth",
        "chunlian_cache_hit",
        "chunlian_requests_rejected",
        "process_resident_memory_bytes",
        "chunlian_gpu_memory_used_bytes",
        "chunlian_gpu_memory_total_bytes",
    ):
        assert series in exprs, series
    assert all(p["datasource"] == {"type": "prometheus", "uid": "${datasource}"} for p in board["panels"])
    # every panel is described for people in docs/OPERATIONS.md
    ops = (ROOT / "docs" / "OPERATIONS.md").read_text(encoding="utf-8")
    for p in board["panels"]:
        assert f"**{p['title']}**" in ops, p["title"]


# -- compose -------------------------------------------------------------------------------------------------------
COMPOSE = DEPLOY / "compose.yaml"


def _check_jsonschema(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "check_jsonschema", *args], capture_output=True, text=True)


def test_compose_file_passes_the_compose_spec_schema(tmp_path):
    p = _check_jsonschema("--builtin-schema", "vendor.compose-spec", str(COMPOSE))
    assert p.returncode == 0, p.stdout + p.stderr
    # and the check can fail: a misspelt key is refused
    broken = yaml.safe_load(COMPOSE.read_text())
    broken["services"]["chunlian"]["port"] = broken["services"]["chunlian"].pop("ports")
    (tmp_path / "compose.yaml").write_text(yaml.safe_dump(broken))
    p = _check_jsonschema("--builtin-schema", "vendor.compose-spec", str(tmp_path / "compose.yaml"))
    assert p.returncode == 1 and "port" in p.stdout + p.stderr


def test_compose_services_fit_together():
    """What the schema cannot see: mounted files exist, names and ports agree between the files."""
    doc = yaml.safe_load(COMPOSE.read_text())
    services = doc["services"]
    assert set(services) >= {"chunlian", "prometheus", "grafana"}
    build = services["chunlian"]["build"]
    assert (DEPLOY / build["context"] / build["dockerfile"]).is_file()
    for svc in services.values():
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            if src.startswith("."):
                assert (DEPLOY / src).exists(), vol
    # Prometheus scrapes the chunlian service on the port the image listens on; Grafana reads that Prometheus
    prom = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    (target,) = prom["scrape_configs"][0]["static_configs"][0]["targets"]
    assert target == "chunlian:8000"
    assert "--port 8000" in " ".join(json.loads(re.search(r"^CMD (.*)$", (ROOT / "Dockerfile").read_text(), re.M)[1]))
    ds = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text())
    assert ds["datasources"][0]["url"] == "http://prometheus:9090"
    dash = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "dashboards" / "chunlian.yml").read_text())
    mounted = [v.split(":")[1] for v in services["grafana"]["volumes"] if v.startswith("./grafana/dashboards")]
    assert dash["providers"][0]["options"]["path"] in mounted
    assert all(k.startswith("CHUNLIAN_") for k in services["chunlian"]["environment"])
