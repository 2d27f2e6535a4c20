// Schema validation of rendered manifests.
//
// Each object is matched by apiVersion + kind to its model in the npm packages `kubernetes-models`
// (built-in kinds; validators compiled from the upstream Kubernetes OpenAPI spec),
// `@kubernetes-models/prometheus-operator` (ServiceMonitor, PrometheusRule: from the operator's
// CRDs) or `@kubernetes-models/keda` (ScaledObject: from KEDA's CRDs). Two passes per object:
//  1. model.validate(): types, required fields, enums and formats of the schema (ajv);
//  2. unknownFields(): every key must be declared by the schema (strict mode).
// A kind with no model is an error: nothing is waved through unvalidated.

import fs from "node:fs";
import path from "node:path";
import { unknownFields } from "./strict_fields.mjs";

// apiVersion group -> npm package holding its models.
const PACKAGES = {
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
  "keda.sh": "@kubernetes-models/keda",
};

function modelLocation(apiVersion, kind, nodeModules) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const pkg = PACKAGES[group] ?? "kubernetes-models";
  const dir = group === "" ? version : `${group}/${version}`;
  const base = path.join(nodeModules, pkg, dir, kind);
  return { js: `${base}.js`, dts: `${base}.d.ts` };
}

// Returns a list of "<kind>/<name>: message" strings; empty when the object is valid.
export async function validateObject(object, nodeModules) {
  const id = `${object?.kind}/${object?.metadata?.name}`;
  if (!object || typeof object.apiVersion !== "string" || typeof object.kind !== "string") {
    return [`${id}: not a Kubernetes object (apiVersion and kind missing)`];
  }
  const loc = modelLocation(object.apiVersion, object.kind, nodeModules);
  if (!fs.existsSync(loc.js)) return [`${id}: no schema for ${object.apiVersion} ${object.kind}`];
  const module = await import(loc.js);
  const Model = module[object.kind];
  const errors = [];
  try {
    new Model(object).validate();
  } catch (e) {
    const details = e.errors ?? [];
    if (details.length === 0) errors.push(`${id}: ${e.message}`);
    for (const d of details) {
      errors.push(`${id}: ${d.instancePath || "/"} ${d.message ?? d.keyword} ${JSON.stringify(d.params ?? {})}`);
    }
  }
  for (const msg of unknownFields(object, loc.dts, nodeModules)) errors.push(`${id}: ${msg}`);
  return errors;
}
