// Static checks of dashboards/*.json and the Grafana provisioning files (the queries themselves
// are run against a real Prometheus by prometheus_dashboards_test.py).
//
// Per dashboard: unique uid across files, unique panel ids, panels inside the 24-column grid, a
// `datasource` variable of type datasource, every panel and target using it (uid
// "${datasource}", never a fixed uid), every target with a non-empty expr whose $variables are
// all defined (Grafana's built-in $__ ones aside).

import fs from "node:fs";
import path from "node:path";
import YAML from "yaml";

export function dashboardFiles(dir) {
  return fs.readdirSync(dir).filter((f) => f.endsWith(".json")).sort().map((f) => path.join(dir, f));
}

function checkOne(file, board, errors) {
  const name = path.basename(file);
  const vars = new Set((board.templating?.list ?? []).map((v) => v.name));
  const ds = (board.templating?.list ?? []).find((v) => v.name === "datasource");
  if (!ds || ds.type !== "datasource" || ds.query !== "prometheus") errors.push(`${name}: no datasource variable of type prometheus`);
  const ids = new Set();
  if (!Array.isArray(board.panels) || board.panels.length === 0) errors.push(`${name}: no panels`);
  for (const p of board.panels ?? []) {
    const where = `${name} panel "${p.title}"`;
    if (ids.has(p.id)) errors.push(`${where}: duplicate id ${p.id}`);
    ids.add(p.id);
    const g = p.gridPos ?? {};
    if (!(g.w > 0 && g.h > 0 && g.x >= 0 && g.x + g.w <= 24)) errors.push(`${where}: gridPos outside the grid`);
    if (p.datasource?.uid !== "${datasource}") errors.push(`${where}: datasource is not the \${datasource} variable`);
    if (!Array.isArray(p.targets) || p.targets.length === 0) errors.push(`${where}: no targets`);
    for (const t of p.targets ?? []) {
      if (t.datasource?.uid !== "${datasource}") errors.push(`${where} target ${t.refId}: datasource is not \${datasource}`);
      if (typeof t.expr !== "string" || t.expr.trim() === "") errors.push(`${where} target ${t.refId}: empty expr`);
      for (const m of (t.expr ?? "").matchAll(/\$\{?(\w+)/g)) {
        if (!m[1].startsWith("__") && !vars.has(m[1])) errors.push(`${where}: undefined variable $${m[1]}`);
      }
    }
  }
}

// Returns a list of problems in `dashboardsDir` (empty = clean).
export function checkDashboards(dashboardsDir) {
  const errors = [];
  const uids = new Map();
  const files = dashboardFiles(dashboardsDir);
  if (files.length < 3) errors.push(`expected the Overview, Router and Decode dashboards, found ${files.length}`);
  for (const file of files) {
    let board;
    try {
      board = JSON.parse(fs.readFileSync(file, "utf8"));
    } catch (e) {
      errors.push(`${file}: ${e.message}`);
      continue;
    }
    if (uids.has(board.uid)) errors.push(`${file}: uid ${board.uid} also used by ${uids.get(board.uid)}`);
    uids.set(board.uid, file);
    checkOne(file, board, errors);
  }
  const prov = YAML.parse(fs.readFileSync(path.join(dashboardsDir, "provisioning/dashboards/persistentkv.yaml"), "utf8"));
  const provider = prov?.providers?.[0];
  if (prov?.apiVersion !== 1 || provider?.type !== "file" || !provider?.options?.path) errors.push("provisioning/dashboards: no file provider with a path");
  const dsProv = YAML.parse(fs.readFileSync(path.join(dashboardsDir, "provisioning/datasources/prometheus.yaml"), "utf8"));
  if (dsProv?.datasources?.[0]?.type !== "prometheus") errors.push("provisioning/datasources: no prometheus datasource");
  return errors;
}
