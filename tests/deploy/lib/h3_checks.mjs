// RELIABILITY.md H3: static checks of the rendered chart that a schema cannot express.
//
// checkH3(objects) takes the parsed objects of one `helm template` run and returns a list of
// violations (empty = pass). The rules, per workload (Deployment / StatefulSet) container:
//  - readinessProbe is a native gRPC probe (`grpc:`, grpc.health.v1) on a non-empty service name;
//    only when the container serves TLS (a --tls_cert flag), which kubelet's gRPC probe cannot
//    speak, an exec probe running `pkv health --service=...` is accepted instead;
//  - livenessProbe exists, differs from readiness and is more tolerant: higher failureThreshold
//    and a longer failure window (periodSeconds x failureThreshold);
//  - startupProbe exists and its window covers process start (router >= 30 s) or model load
//    (worker >= 300 s);
//  - a preStop hook exists and terminationGracePeriodSeconds >= --drain_timeout + preStop
//    sleep + 5 s;
//  - the metrics port (--metrics_listen) differs from the gRPC port (--listen).
// Per chart: every workload that can run >= 2 replicas has a PodDisruptionBudget with
// minAvailable >= 1 (and below its minimum replica count, so node drains can proceed); no Service
// reachable from outside the pods' own network identity (anything but a headless one) exposes a
// metrics port; the router's --workers_dns names a headless Service of the worker pods on their
// gRPC port; each worker asks for exactly one GPU when it asks for any.

function flagValue(args, name) {
  const hit = (args ?? []).find((a) => a.startsWith(`--${name}=`));
  return hit === undefined ? undefined : hit.slice(name.length + 3);
}

// An absl::Duration flag value as seconds: one number with a unit (h, m, s, ms), e.g. "60s", or
// "0"; NaN for anything else (compound values like "1m30s" are not used by the chart).
function durationSeconds(text) {
  if (text === "0") return 0;
  const m = /^(\d+(?:\.\d+)?)(h|m|s|ms)$/.exec(text ?? "");
  if (!m) return NaN;
  return Number(m[1]) * { h: 3600, m: 60, s: 1, ms: 0.001 }[m[2]];
}

function portOf(hostPort) {
  const m = /:(\d+)$/.exec(hostPort ?? "");
  return m ? Number(m[1]) : undefined;
}

function window(probe) {
  return (probe.periodSeconds ?? 10) * (probe.failureThreshold ?? 3);
}

function matches(selector, labels) {
  return Object.entries(selector ?? {}).every(([k, v]) => labels?.[k] === v);
}

function preStopSeconds(container) {
  const hook = container.lifecycle?.preStop;
  if (hook?.sleep) return Number(hook.sleep.seconds);
  const cmd = hook?.exec?.command ?? [];
  if (cmd[0] === "sleep") return Number(cmd[1]);
  return undefined;
}

function checkReadiness(name, c, tls, errors) {
  const r = c.readinessProbe;
  if (!r) return errors.push(`${name}: no readinessProbe`);
  if (r.grpc) {
    if (!r.grpc.service) errors.push(`${name}: readiness gRPC probe has no service name`);
    return;
  }
  const cmd = r.exec?.command ?? [];
  const isPkvHealth = cmd[0] === "pkv" && cmd[1] === "health" && cmd.some((a) => a.startsWith("--service=") && a.length > 10);
  if (!(tls && isPkvHealth)) {
    errors.push(`${name}: readinessProbe must be a native gRPC probe (grpc:)` + (tls ? " or `pkv health --service`" : ""));
  }
}

function checkContainer(name, component, podSpec, c, errors) {
  const args = c.args ?? [];
  const tls = flagValue(args, "tls_cert") !== undefined;
  checkReadiness(name, c, tls, errors);
  const r = c.readinessProbe ?? {};
  const l = c.livenessProbe;
  if (!l) errors.push(`${name}: no livenessProbe`);
  else {
    if (JSON.stringify(l) === JSON.stringify(r)) errors.push(`${name}: livenessProbe is identical to readinessProbe`);
    if (!((l.failureThreshold ?? 3) > (r.failureThreshold ?? 3))) errors.push(`${name}: liveness failureThreshold must exceed readiness's`);
    if (!(window(l) > window(r))) errors.push(`${name}: liveness failure window must exceed readiness's`);
  }
  const s = c.startupProbe;
  const minStartup = component === "worker" ? 300 : 30;
  if (!s) errors.push(`${name}: no startupProbe`);
  else if (window(s) < minStartup) errors.push(`${name}: startupProbe window ${window(s)} s < ${minStartup} s`);
  const drain = durationSeconds(flagValue(args, "drain_timeout"));
  const preStop = preStopSeconds(c);
  if (!Number.isFinite(drain)) errors.push(`${name}: no --drain_timeout (a duration such as 60s)`);
  if (preStop === undefined) errors.push(`${name}: no preStop sleep`);
  const grace = podSpec.terminationGracePeriodSeconds ?? 30;
  if (Number.isFinite(drain) && preStop !== undefined && grace < drain + preStop + 5) {
    errors.push(`${name}: terminationGracePeriodSeconds ${grace} < drain ${drain} + preStop ${preStop} + 5`);
  }
  const grpcPort = portOf(flagValue(args, "listen"));
  const metricsPort = portOf(flagValue(args, "metrics_listen"));
  if (grpcPort === undefined || metricsPort === undefined) errors.push(`${name}: --listen and --metrics_listen must both be set`);
  else if (grpcPort === metricsPort) errors.push(`${name}: metrics share the gRPC port ${grpcPort}`);
  return { grpcPort, metricsPort };
}

function minReplicas(objects, workload) {
  const ref = (o) => o.spec?.scaleTargetRef?.name === workload.metadata.name && o.spec.scaleTargetRef.kind === workload.kind;
  const hpa = objects.find((o) => o.kind === "HorizontalPodAutoscaler" && ref(o));
  if (hpa) return hpa.spec.minReplicas ?? 1;
  const keda = objects.find((o) => o.kind === "ScaledObject" && ref(o));
  if (keda) return keda.spec.minReplicaCount ?? 0;
  return workload.spec.replicas ?? 1;
}

function checkWorkload(objects, w, errors, ports) {
  const component = w.metadata.labels?.["app.kubernetes.io/component"];
  const podSpec = w.spec.template.spec;
  const podLabels = w.spec.template.metadata.labels;
  for (const c of podSpec.containers) {
    const name = `${w.kind}/${w.metadata.name}/${c.name}`;
    ports.push({ component, podLabels, ...checkContainer(name, component, podSpec, c, errors) });
    const gpuLimits = Object.entries(c.resources?.limits ?? {}).filter(([k]) => /gpu/.test(k));
    for (const [k, v] of gpuLimits) if (Number(v) !== 1) errors.push(`${name}: ${k} limit ${v}, expected 1 GPU per pod`);
  }
  const replicas = minReplicas(objects, w);
  if (replicas >= 2) {
    const pdb = objects.find((o) => o.kind === "PodDisruptionBudget" && matches(o.spec.selector?.matchLabels, podLabels));
    if (!pdb) errors.push(`${w.kind}/${w.metadata.name}: ${replicas} replicas but no PodDisruptionBudget`);
    else if (!(pdb.spec.minAvailable >= 1)) errors.push(`PodDisruptionBudget/${pdb.metadata.name}: minAvailable must be >= 1`);
    else if (pdb.spec.minAvailable >= replicas) errors.push(`PodDisruptionBudget/${pdb.metadata.name}: minAvailable ${pdb.spec.minAvailable} >= ${replicas} replicas blocks every drain`);
  }
}

function checkServices(objects, ports, errors) {
  for (const svc of objects.filter((o) => o.kind === "Service")) {
    const headless = svc.spec.clusterIP === "None" && (svc.spec.type ?? "ClusterIP") === "ClusterIP";
    for (const p of ports.filter((x) => matches(svc.spec.selector, x.podLabels))) {
      for (const sp of svc.spec.ports ?? []) {
        const target = sp.targetPort ?? sp.port;
        const isMetrics = target === "metrics" || target === p.metricsPort;
        if (isMetrics && !headless) errors.push(`Service/${svc.metadata.name}: exposes the ${p.component} metrics port (${sp.name})`);
      }
    }
  }
}

function checkDiscovery(objects, ports, errors) {
  const routers = objects.filter((o) => o.kind === "Deployment");
  for (const r of routers) {
    for (const c of r.spec.template.spec.containers) {
      const dns = flagValue(c.args, "workers_dns");
      if (dns === undefined) continue;
      const [host, port] = dns.split(":");
      const svcName = host.split(".")[0];
      const svc = objects.find((o) => o.kind === "Service" && o.metadata.name === svcName);
      const worker = ports.find((p) => p.component === "worker");
      if (!svc) { errors.push(`--workers_dns ${dns}: no Service ${svcName}`); continue; }
      if (svc.spec.clusterIP !== "None") errors.push(`Service/${svcName}: --workers_dns needs a headless Service`);
      if (!worker || !matches(svc.spec.selector, worker.podLabels)) errors.push(`Service/${svcName}: does not select the worker pods`);
      if (worker && Number(port) !== worker.grpcPort) errors.push(`--workers_dns port ${port} != worker gRPC port ${worker?.grpcPort}`);
      if (!(svc.spec.ports ?? []).some((p) => p.port === Number(port))) errors.push(`Service/${svcName}: no port ${port}`);
    }
  }
}

export function checkH3(objects) {
  const errors = [];
  const ports = [];
  const workloads = objects.filter((o) => o.kind === "Deployment" || o.kind === "StatefulSet");
  if (workloads.length === 0) errors.push("no Deployment or StatefulSet rendered");
  for (const w of workloads) checkWorkload(objects, w, errors, ports);
  checkServices(objects, ports, errors);
  checkDiscovery(objects, ports, errors);
  return errors;
}
