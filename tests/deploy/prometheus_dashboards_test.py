#!/usr/bin/env python3
"""Every dashboard query and alert rule against a real Prometheus scraping a live local cluster.

ctest deploy_prometheus_dashboards (label integration). Starts, on free loopback ports, two
pkv-workers (CPU backend, the tiny model), a pkv-router in front of them and Debian's `prometheus`
scraping all three every second with deploy/prometheus/pkv-alerts.rules.yml loaded; puts a short
load through the router with the `pkv` client; then, through Prometheus's HTTP API:
  - every target of every panel of dashboards/*.json (template variables replaced by their "All"
    value, $__rate_interval by 5s) runs as a range query over the load window: it must parse and
    return at least one series with a finite sample;
  - every alert rule is loaded (as many as promtool counts), evaluates with health "ok", and its
    expression parses as an instant query;
  - `promtool check rules` passes on the rules file.
Everything it started is stopped on the way out, failure or not.

    prometheus_dashboards_test.py --bin BUILD/bin [--repo ROOT] [--model DIR] [--keep]
Python 3 standard library only. Ends with "N passed, M failed"; exit 1 on any failure.
"""

import argparse
import glob
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

RATE_INTERVAL = "5s"  # Grafana: max(4 x scrape interval, interval + scrape) with 1 s scrapes


class Cluster:
    """Child processes in their own sessions, stopped (TERM, then KILL) by stop()."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.procs = []  # (name, Popen, log path)

    def start(self, name, argv):
        log = os.path.join(self.workdir, f"{name}.log")
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append((name, proc, log))
        return proc

    def check_alive(self):
        for name, proc, log in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{tail(log)}")

    def stop(self):
        for _, proc, _ in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.time() + 8
        for _, proc, _ in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def logs(self):
        return "\n".join(f"--- {name} ({log})\n{tail(log)}" for name, _, log in self.procs)


def tail(path, lines=15):
    try:
        with open(path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-lines:]).decode("utf-8", "replace")
    except OSError:
        return "(no log)"


def free_ports(n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def wait_for(what, predicate, timeout, cluster):
    deadline = time.time() + timeout
    while time.time() < deadline:
        cluster.check_alive()
        if predicate():
            return
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


def http_json(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.load(r)


def prom_api(base, path, **params):
    url = f"{base}{path}?{urllib.parse.urlencode(params)}"
    try:
        return http_json(url)
    except urllib.error.HTTPError as e:  # 400 = bad query: Prometheus explains in the body
        return json.load(e)


def healthy(bin_dir, addr, service=""):
    r = subprocess.run([os.path.join(bin_dir, "pkv"), "health", "--addr", addr, "--service",
                        service, "--timeout", "500ms"], capture_output=True)
    return r.returncode == 0


def start_cluster(cluster, args, model):
    ports = free_ports(7)
    workers = []
    for i in range(2):
        grpc_port, metrics_port = ports[2 * i], ports[2 * i + 1]
        cluster.start(f"worker-{i}", [
            os.path.join(args.bin, "pkv-worker"), f"--listen=127.0.0.1:{grpc_port}",
            f"--metrics_listen=127.0.0.1:{metrics_port}", f"--worker_id=worker-{i}",
            f"--model={model}", "--backend=cpu", "--drain_timeout=2s", "--insecure"])
        workers.append((f"127.0.0.1:{grpc_port}", f"127.0.0.1:{metrics_port}"))
    router = (f"127.0.0.1:{ports[4]}", f"127.0.0.1:{ports[5]}")
    cluster.start("router", [
        os.path.join(args.bin, "pkv-router"), f"--listen={router[0]}",
        f"--metrics_listen={router[1]}", "--workers=" + ",".join(w[0] for w in workers),
        "--drain_timeout=2s", "--insecure"])
    for addr, _ in workers:
        wait_for(f"worker {addr} SERVING", lambda a=addr: healthy(args.bin, a, "pkv.v1.Worker"),
                 60, cluster)
    wait_for("router SERVING", lambda: healthy(args.bin, router[0], "pkv.v1.Generation"), 30,
             cluster)
    return router, workers, ports[6]


def start_prometheus(cluster, workdir, rules, router, workers, port):
    config = os.path.join(workdir, "prometheus.yml")
    with open(config, "w") as f:
        f.write(f"""global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: ["{rules}"]
scrape_configs:
  - job_name: pkv-router
    static_configs: [{{targets: ["{router[1]}"]}}]
  - job_name: pkv-worker
    static_configs: [{{targets: [{", ".join(f'"{w[1]}"' for w in workers)}]}}]
""")
    binary = shutil.which("prometheus")
    if binary is None:
        raise RuntimeError("prometheus not found (scripts/setup.sh installs Debian's prometheus)")
    cluster.start("prometheus", [
        binary, f"--config.file={config}", f"--storage.tsdb.path={workdir}/tsdb",
        f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"])
    base = f"http://127.0.0.1:{port}"

    def all_up():
        try:
            targets = http_json(f"{base}/api/v1/targets")["data"]["activeTargets"]
        except OSError:
            return False
        return len(targets) == 3 and all(t["health"] == "up" for t in targets)

    wait_for("Prometheus scraping all 3 targets", all_up, 30, cluster)
    return base


def put_load(bin_dir, router_addr, seconds, concurrency=4):
    """Runs `pkv generate` streams, `concurrency` at a time, for about `seconds`. Returns (ok, failed)."""
    ok = failed = 0
    n = 0
    running = []
    deadline = time.time() + seconds
    while time.time() < deadline or running:
        while time.time() < deadline and len(running) < concurrency:
            n += 1
            running.append(subprocess.Popen(
                [os.path.join(bin_dir, "pkv"), "generate", "--router", router_addr, "--prompt",
                 f"Request {n}: tell me about paged attention", "--max_tokens", "24",
                 "--seed", str(n), "--session_id", f"session-{n % 5}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.05)
        for p in [p for p in running if p.poll() is not None]:
            running.remove(p)
            ok, failed = (ok + 1, failed) if p.returncode == 0 else (ok, failed + 1)
    return ok, failed


def substitute(expr, variables):
    expr = expr.replace("$__rate_interval", RATE_INTERVAL).replace("${__rate_interval}",
                                                                    RATE_INTERVAL)
    for name, value in variables.items():
        expr = re.sub(r"\$\{" + name + r"(?::\w+)?\}|\$" + name + r"\b", value, expr)
    return expr


def finite_series(result):
    return [s for s in result if any(math.isfinite(float(v)) for _, v in s.get("values", []))]


class Report:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, name, problem):
        if problem:
            self.failed += 1
            print(f"FAIL {name}\n     {problem}")
        else:
            self.passed += 1
            print(f"PASS {name}")


def check_dashboards(report, base, repo, start, end):
    files = sorted(glob.glob(os.path.join(repo, "dashboards", "*.json")))
    if not files:
        report.check("dashboards found", "no dashboards/*.json")
    for path in files:
        board = json.load(open(path))
        variables = {v["name"]: v.get("allValue") or ".*"
                     for v in board.get("templating", {}).get("list", []) if v["type"] != "datasource"}
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                expr = substitute(target["expr"], variables)
                r = prom_api(base, "/api/v1/query_range", query=expr, start=f"{start:.3f}",
                             end=f"{end:.3f}", step="1")
                name = f"{os.path.basename(path)} / {panel['title']} / {target['refId']}"
                if r.get("status") != "success":
                    problem = f"{r.get('errorType')}: {r.get('error')}  in  {expr}"
                elif not finite_series(r["data"]["result"]):
                    problem = f"no data ({len(r['data']['result'])} series, none finite)  in  {expr}"
                else:
                    problem = None
                report.check(name, problem)


def check_rules(report, base, rules):
    r = subprocess.run(["promtool", "check", "rules", rules], capture_output=True, text=True)
    report.check("promtool check rules", None if r.returncode == 0 else r.stdout + r.stderr)
    m = re.search(r"SUCCESS: (\d+) rules found", r.stdout)
    expected = int(m.group(1)) if m else -1
    time.sleep(2)  # two evaluation cycles after the load, so every rule has run
    groups = http_json(f"{base}/api/v1/rules")["data"]["groups"]
    loaded = [rule for g in groups for rule in g["rules"]]
    report.check(f"Prometheus loaded the {expected} rules promtool counts",
                 None if len(loaded) == expected > 0 else f"loaded {len(loaded)}")
    for rule in loaded:
        q = prom_api(base, "/api/v1/query", query=rule["query"])
        problem = None
        if rule.get("health") != "ok":
            problem = f"rule health {rule.get('health')}: {rule.get('lastError')}"
        elif q.get("status") != "success":
            problem = f"{q.get('errorType')}: {q.get('error')}"
        report.check(f"alert {rule.get('name')} evaluates", problem)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="folder with pkv-worker, pkv-router, pkv")
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(here)))
    ap.add_argument("--model", help="model folder (default: make the tiny model)")
    ap.add_argument("--load_seconds", type=float, default=10)
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args()
    args.bin = os.path.abspath(args.bin)
    rules = os.path.join(args.repo, "deploy", "prometheus", "pkv-alerts.rules.yml")
    workdir = tempfile.mkdtemp(prefix="pkv-prom-test-")
    cluster = Cluster(workdir)
    report = Report()
    try:
        model = args.model
        if not model:
            model = os.path.join(workdir, "tiny")
            subprocess.run([os.path.join(args.bin, "pkv-make-model"), "--out", model, "--shape",
                            "tiny"], check=True, capture_output=True)
        router, workers, prom_port = start_cluster(cluster, args, model)
        base = start_prometheus(cluster, workdir, rules, router, workers, prom_port)
        start = time.time() - 1
        ok, failed = put_load(args.bin, router[0], args.load_seconds)
        report.check(f"load through the router ({ok} streams OK, {failed} failed)",
                     None if ok > 0 and failed == 0 else "streams failed")
        time.sleep(3)  # let Prometheus scrape the final counters
        end = time.time()
        check_dashboards(report, base, args.repo, start, end)
        check_rules(report, base, rules)
    except Exception as e:  # report, clean up, fail
        report.check("test harness", f"{e}\n{cluster.logs()}")
    finally:
        cluster.stop()
        if args.keep:
            print(f"work folder kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"{report.passed} passed, {report.failed} failed")
    return 0 if report.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
