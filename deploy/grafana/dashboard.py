"""The chunlian Grafana dashboard, built with grafana-foundation-sdk (never edit the JSON by hand).

    python deploy/grafana/dashboard.py            # writes deploy/grafana/dashboards/chunlian.json
    python deploy/grafana/dashboard.py --check    # exit 1 when the committed JSON differs

Every panel reads Prometheus through the recording rules in deploy/rules/recording.yml where one exists, so the
board, the alerts and tests/test_deploy_prometheus.py (which runs every query below against a real Prometheus)
agree on one definition of each figure. docs/OPERATIONS.md describes each panel.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import common, dashboard, prometheus, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import GraphDrawStyle, LegendDisplayMode, LegendPlacement
from grafana_foundation_sdk.models.dashboard import DataSourceRef, DynamicConfigValue

OUT = Path(__file__).with_name("dashboards") / "chunlian.json"
UID = "chunlian"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")

# (title, description, unit, [(PromQL, legend)], {refId of a query drawn on the right axis: its unit})
PANELS: list[tuple[str, str, str, list[tuple[str, str]], dict[str, str]]] = [
    (
        "Latency quantiles by mode",
        "p50, p95 and p99 of couplet request latency over 5 minutes, by mode (write, match, reverse, fill); cache hits "
        "included. Alert ChunlianLatencyP99High fires at p99 over 2.5 s for 5 minutes.",
        "s",
        [
            ("job_mode:chunlian_request_latency_seconds:p50_5m", "p50 {{mode}}"),
            ("job_mode:chunlian_request_latency_seconds:p95_5m", "p95 {{mode}}"),
            ("job_mode:chunlian_request_latency_seconds:p99_5m", "p99 {{mode}}"),
        ],
        {},
    ),
    (
        "Couplets per second",
        "Couplets returned per second (every candidate counts), and answered requests per second by mode (right axis).",
        "ops",
        [
            ("job:chunlian_couplets_generated:rate5m", "couplets/s"),
            ("job_mode:chunlian_requests:rate5m", "requests/s {{mode}}"),
        ],
        {"B": "reqps"},
    ),
    (
        "Rows and requests per model call",
        "Mean rows (candidate beams of every request) and mean requests merged into one batched model call: how "
        "much dynamic batching is merging. Near 1 request per call means the server is idle or max_wait_ms is 0.",
        "short",
        [
            ("job:chunlian_model_batch_rows:mean_rate5m", "rows per call"),
            ("job:chunlian_model_batch_requests:mean_rate5m", "requests per call"),
        ],
        {},
    ),
    (
        "Queue depth",
        "Requests admitted and not finished (running + waiting) per instance, and the admission limit "
        "max_concurrency + queue_size beyond which requests are answered 503 at once.",
        "short",
        [
            ("chunlian_queue_depth", "depth {{instance}}"),
            ("chunlian_queue_capacity", "limit {{instance}}"),
        ],
        {},
    ),
    (
        "Result cache",
        "Share of deterministic requests answered from the result cache over 5 minutes (left axis), and hits per "
        "second (right axis). An empty ratio: no deterministic request arrived.",
        "percentunit",
        [
            ("job:chunlian_cache_hit:ratio_rate5m", "hit ratio"),
            ("sum by (job) (rate(chunlian_cache_hits_total[5m]))", "hits/s"),
        ],
        {"B": "ops"},
    ),
    (
        "Rejections by reason",
        "Couplet requests answered 503 per second, by reason (overloaded: the queue was full; timeout: ran past "
        "request_timeout_s), and the share of requests refused (right axis). Alert ChunlianRejecting fires over 1%.",
        "ops",
        [
            ("job_reason:chunlian_requests_rejected:rate5m", "{{reason}}/s"),
            ("job:chunlian_requests_rejected:ratio_rate5m", "share refused"),
        ],
        {"B": "percentunit"},
    ),
    (
        "Resident memory",
        "Resident memory of each server process and its limit (the container's cgroup limit, or the machine's RAM "
        "without one). Alert ChunlianMemoryHigh fires over 90% of the limit.",
        "bytes",
        [
            ('process_resident_memory_bytes{job="chunlian"}', "resident {{instance}}"),
            ("chunlian_memory_limit_bytes", "limit {{instance}}"),
        ],
        {},
    ),
    (
        "GPU memory",
        "GPU memory used and in all, per device (NVML; only where a GPU and the gpu extra are present, empty on "
        "CPU). Alert ChunlianGpuMemoryHigh fires over 90%.",
        "bytes",
        [
            ("chunlian_gpu_memory_used_bytes", "used gpu{{gpu}} {{instance}}"),
            ("chunlian_gpu_memory_total_bytes", "total gpu{{gpu}} {{instance}}"),
        ],
        {},
    ),
]


def panel(
    title: str, description: str, unit: str, queries: list[tuple[str, str]], right: dict[str, str]
) -> timeseries.Panel:
    p = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .min(0)
        .height(8)
        .span(12)
        .draw_style(GraphDrawStyle.LINE)
        .line_width(1)
        .fill_opacity(10)
        .legend(
            common.VizLegendOptions()
            .display_mode(LegendDisplayMode.LIST)
            .placement(LegendPlacement.BOTTOM)
            .show_legend(True)
        )
    )
    for ref, (expr, legend) in zip("ABCDEFGH", queries):
        p = p.with_target(prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref).range())
    for ref, axis_unit in right.items():
        p = p.override_by_query(
            ref,
            [
                DynamicConfigValue(id_val="unit", value=axis_unit),
                DynamicConfigValue(id_val="custom.axisPlacement", value="right"),
            ],
        )
    return p


def build() -> dict:
    """The dashboard as the JSON object Grafana's provisioning reads."""
    board = (
        dashboard.Dashboard("chunlian 春联")
        .uid(UID)
        .description("chunlian serve: latency, throughput, batching, queue, cache, refusals, memory")
        .tags(["chunlian"])
        .refresh("30s")
        .time("now-1h", "now")
        .timezone("browser")
        .with_variable(dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
    )
    for spec in PANELS:
        board = board.with_panel(panel(*spec))
    return json.loads(json.dumps(board.build(), cls=JSONEncoder))


def render() -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} differs from the generator: run python {Path(__file__).as_posix()}", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
