#!/usr/bin/env python3
"""Writes the PersistentKV Grafana dashboards (dashboards/*.json) from the panel lists below.

The JSON files are committed; this script is their source. Run it after editing a panel:
    python3 dashboards/gen_dashboards.py            # rewrite the JSON files
    python3 dashboards/gen_dashboards.py --check    # exit 1 when a JSON file differs (CI)
Every query names its datasource through the ${datasource} variable, so the dashboards import into
any Grafana whatever its Prometheus datasource is called. Metric names: shared/DESIGN.md and
worker/engine/worker_metrics.cc, router/router_metrics.cc. Only metrics the binaries export are
used; tests/deploy checks every query against a real Prometheus scraping a live cluster.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DS = {"type": "prometheus", "uid": "${datasource}"}
RATE = "[$__rate_interval]"


def quantiles(metric, by="", qs=(0.5, 0.9, 0.99), where=""):
    """p50/p90/p99 targets of a histogram, optionally split by a label (`by`)."""
    group = f"le, {by}" if by else "le"
    return [(f"histogram_quantile({q}, sum by ({group}) (rate({metric}_bucket{where}{RATE})))",
             f"p{int(q * 100)}" + (f" {{{{{by}}}}}" if by else "")) for q in qs]


def mean(metric, by, where=""):
    """Mean of a histogram's observations over the rate window, split by `by`."""
    return (f"sum by ({by}) (rate({metric}_sum{where}{RATE})) / "
            f"sum by ({by}) (rate({metric}_count{where}{RATE}))", f"{{{{{by}}}}}")


def panel(title, targets, unit="short", kind="timeseries", w=12, h=8, stack=False, desc=""):
    return {"title": title, "targets": targets, "unit": unit, "kind": kind, "w": w, "h": h,
            "stack": stack, "description": desc}


def stat(title, expr, unit="short", desc=""):
    return panel(title, [(expr, title)], unit=unit, kind="stat", w=6, h=4, desc=desc)


OVERVIEW = [
    stat("Requests/s", f"sum(rate(pkv_router_requests_total{RATE}))", "reqps",
         "Generate streams finished per second at the routers, any outcome."),
    stat("Error ratio",
         f'sum(rate(pkv_router_requests_total{{code!~"OK|CANCELLED|INVALID_ARGUMENT|UNAUTHENTICATED"}}{RATE}))'
         f" / sum(rate(pkv_router_requests_total{RATE}))", "percentunit",
         "Share of streams ending in a server-side error (client-caused codes excluded)."),
    stat("Healthy workers", 'min(pkv_router_workers{state="healthy"})', "short",
         "Placeable workers as the router that sees the fewest reports them."),
    stat("Generated tokens/s", f"sum(rate(pkv_generated_tokens_total{RATE}))", "short"),
    panel("Requests by status code", [(f"sum by (code) (rate(pkv_router_requests_total{RATE}))",
                                       "{{code}}")], "reqps", stack=True),
    panel("Errors by status code",
          [(f'sum by (code) (rate(pkv_router_requests_total{{code!="OK"}}{RATE}))', "{{code}}")],
          "reqps", stack=True, desc="Every non-OK ending at the routers, by gRPC code."),
    panel("Time to first token (router)", quantiles("pkv_router_time_to_first_token_seconds"), "s",
          desc="From stream start at the router to the first chunk: what clients wait."),
    panel("Inter-token latency (workers)", quantiles("pkv_inter_token_latency_seconds"), "s"),
    panel("End-to-end request duration (router)",
          quantiles("pkv_router_request_duration_seconds"), "s"),
    panel("Tokens/s", [(f"sum(rate(pkv_generated_tokens_total{RATE}))", "generated"),
                       (f"sum(rate(pkv_prompt_tokens_total{RATE}))", "prompt")], "short"),
    panel("Requests running / waiting (workers)",
          [("sum by (state) (pkv_requests)", "{{state}}")], "short", stack=True),
    panel("KV-cache usage by worker", [("max by (instance) (vllm:kv_cache_usage_perc)",
                                         "{{instance}}")], "percentunit"),
]

R = '{instance=~"$router"}'
ROUTER = [
    panel("Placements by reason",
          [(f"sum by (reason) (rate(pkv_router_placements_total{R}{RATE}))", "{{reason}}")],
          "ops", stack=True, desc="affinity: session stuck to its worker; least_loaded: "
          "power-of-two choice; failover: re-placed before the first token."),
    panel("Requests served per worker",
          [(f"sum by (instance) (rate(pkv_request_duration_seconds_count{RATE}))", "{{instance}}")],
          "reqps", stack=True, desc="Completed requests counted by each worker (the router's "
          "placement counter has no worker label)."),
    panel("Running requests per worker",
          [('sum by (instance) (pkv_requests{state="running"})', "{{instance}}")], "short"),
    panel("Failovers and migrations",
          [(f"sum(rate(pkv_router_failovers_total{R}{RATE}))", "failovers"),
           (f"sum(rate(pkv_router_migrations_total{R}{RATE}))", "migrations")], "ops"),
    panel("Admission queue", [(f"sum(pkv_router_queue_depth{R})", "queued"),
                              (f"sum(pkv_router_inflight{R})", "in flight")], "short"),
    panel("Admission rejections by reason",
          [(f"sum by (reason) (rate(pkv_router_admission_rejected_total{R}{RATE}))", "{{reason}}")],
          "ops", stack=True),
    panel("Worker health (per router)",
          [(f"sum by (instance, state) (pkv_router_workers{R})", "{{instance}} {{state}}")],
          "short"),
    panel("Requests by status code",
          [(f"sum by (code) (rate(pkv_router_requests_total{R}{RATE}))", "{{code}}")],
          "reqps", stack=True),
    panel("Time to first token", quantiles("pkv_router_time_to_first_token_seconds", where=R), "s"),
    panel("First token by stage (p50)",
          quantiles("pkv_router_first_token_stage_seconds", by="stage", qs=(0.5,), where=R), "s",
          desc="admit: start to the worker call (admission queue, placement); worker: the call "
          "to the first chunk (worker queue, prefill, both gRPC hops); relay: the chunk to its "
          "write to the client. admit + relay is what the router itself costs."),
    panel("Stream duration", quantiles("pkv_router_request_duration_seconds", where=R), "s"),
]

W = '{instance=~"$worker"}'
DECODE = [
    panel("Route mix (decode steps/s by route)",
          [(f"sum by (route) (rate(pkv_decode_steps_total{W}{RATE}))", "{{route}}")],
          "ops", stack=True, desc="Which attention route the policy picked, step by step."),
    panel("Route share",
          [(f"sum by (route) (rate(pkv_decode_steps_total{W}{RATE})) / ignoring (route) "
            f"group_left sum(rate(pkv_decode_steps_total{W}{RATE}))", "{{route}}")],
          "percentunit", stack=True),
    panel("Decode step latency by route (p50 / p99)",
          quantiles("pkv_decode_step_seconds", by="route", qs=(0.5, 0.99), where=W), "s"),
    panel("Attention launches per step (mean, by route)",
          [mean("pkv_decode_launches_per_step", "route", W)], "short"),
    panel("Split occupancy (mean, by route)", [mean("pkv_decode_split_occupancy", "route", W)],
          "percentunit", desc="Non-empty work items / launched work items: 1 = no wasted CTAs."),
    panel("KV pages used / free", [(f"sum by (state) (pkv_kv_cache_pages{W})", "{{state}}")],
          "short", stack=True),
    panel("KV-cache usage by worker",
          [(f"max by (instance) (vllm:kv_cache_usage_perc{W})", "{{instance}}")], "percentunit"),
    panel("Preemptions/s by worker",
          [(f"sum by (instance) (rate(pkv_preemptions_total{W}{RATE}))", "{{instance}}")], "ops"),
    panel("Running / waiting by worker",
          [(f"sum by (instance, state) (pkv_requests{W})", "{{instance}} {{state}}")], "short"),
    panel("Prefill vs generated tokens/s",
          [(f"sum(rate(pkv_prefill_tokens_total{W}{RATE}))", "prefill"),
           (f"sum(rate(pkv_generated_tokens_total{W}{RATE}))", "generated")], "short"),
]


def instance_var(name, label, metric):
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": f"label_values({metric}, instance)", "refId": f"{name}-var"},
            "definition": f"label_values({metric}, instance)", "refresh": 2, "includeAll": True,
            "allValue": ".*", "multi": True, "current": {"text": "All", "value": "$__all"},
            "sort": 1}


def grafana_panel(p, pid, x, y):
    targets = [{"datasource": DS, "expr": expr, "legendFormat": legend, "refId": chr(65 + i),
                "range": True} for i, (expr, legend) in enumerate(p["targets"])]
    out = {"id": pid, "type": p["kind"], "title": p["title"], "datasource": DS,
           "gridPos": {"x": x, "y": y, "w": p["w"], "h": p["h"]}, "targets": targets,
           "fieldConfig": {"defaults": {"unit": p["unit"]}, "overrides": []}}
    if p["description"]:
        out["description"] = p["description"]
    if p["kind"] == "timeseries":
        out["fieldConfig"]["defaults"]["custom"] = {
            "drawStyle": "line", "fillOpacity": 20 if p["stack"] else 0,
            "stacking": {"mode": "normal" if p["stack"] else "none"}}
        out["options"] = {"legend": {"displayMode": "list", "placement": "bottom"},
                          "tooltip": {"mode": "multi"}}
    else:
        out["options"] = {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "value"}
    return out


def dashboard(uid, title, panels, variables=(), desc=""):
    laid, x, y, row_h = [], 0, 0, 0
    for pid, p in enumerate(panels, start=1):
        if x + p["w"] > 24:
            x, y, row_h = 0, y + row_h, 0
        laid.append(grafana_panel(p, pid, x, y))
        x, row_h = x + p["w"], max(row_h, p["h"])
    ds_var = {"name": "datasource", "label": "Data source", "type": "datasource",
              "query": "prometheus", "current": {}, "hide": 0}
    return {"uid": uid, "title": title, "description": desc, "tags": ["persistentkv"],
            "timezone": "browser", "schemaVersion": 39, "version": 1, "editable": True,
            "graphTooltip": 1, "refresh": "30s", "time": {"from": "now-1h", "to": "now"},
            "templating": {"list": [ds_var, *variables]}, "annotations": {"list": []},
            "panels": laid}


DASHBOARDS = {
    "persistentkv-overview.json": dashboard(
        "pkv-overview", "PersistentKV / Overview", OVERVIEW,
        desc="Traffic, errors, latency percentiles and throughput of the whole fleet."),
    "persistentkv-router.json": dashboard(
        "pkv-router", "PersistentKV / Router", ROUTER,
        [instance_var("router", "Router", "pkv_router_requests_total")],
        desc="Placement, failover, admission queue and worker health as the routers see them."),
    "persistentkv-decode.json": dashboard(
        "pkv-decode", "PersistentKV / Decode engine", DECODE,
        [instance_var("worker", "Worker", "pkv_decode_steps_total")],
        desc="Attention route mix, per-route step cost, launches, split occupancy and the KV cache."),
}


def main():
    check = "--check" in sys.argv[1:]
    stale = []
    for name, board in DASHBOARDS.items():
        text = json.dumps(board, indent=2) + "\n"
        path = os.path.join(HERE, name)
        current = open(path).read() if os.path.exists(path) else None
        if current == text:
            continue
        if check:
            stale.append(name)
        else:
            with open(path, "w") as f:
                f.write(text)
            print(f"wrote {path}")
    if stale:
        print("stale (run dashboards/gen_dashboards.py): " + ", ".join(stale), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
