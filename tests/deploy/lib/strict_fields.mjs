// Unknown-field check for Kubernetes objects (what `kubeconform -strict` adds to schema checks).
//
// The kubernetes-models validators are compiled from the upstream OpenAPI schemas, which allow
// unknown properties, so a misspelt key (`livenessprobe`, `tolerations` one level too deep) would
// pass them and be silently dropped by the API server. The same packages ship TypeScript
// declarations listing every property of every type; this module reads those declarations and
// walks an object against them, reporting each key no declaration knows.
//
// Only the declaration shapes the generator emits are understood: `"name"?: Type;` members,
// `Array<T>`, `{ [key: string]: T; }` maps, inline object literals, named interfaces imported from
// sibling files, and unions of literals (leaves). Anything else is treated as a leaf (not walked),
// so the check can miss an unknown key but never invent one.

import fs from "node:fs";
import path from "node:path";

const cache = new Map();  // .d.ts path -> parsed file

function stripComments(text) {
  return text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
}

// Resolves an import specifier of a .d.ts to a .d.ts path.
function resolveSpecifier(fromFile, spec, nodeModules) {
  const base = spec.replace(/\.js$/, "");
  if (spec.startsWith(".")) return path.resolve(path.dirname(fromFile), base + ".d.ts");
  return path.join(nodeModules, base + ".d.ts");
}

// Splits `{ ... }` member text into [name, optional, typeText] at depth-0 semicolons.
function parseMembers(body) {
  const members = [];
  let depth = 0, start = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === "{" || c === "<" || c === "(" || c === "[") depth++;
    else if (c === "}" || c === ">" || c === ")" || c === "]") depth--;
    else if (c === ";" && depth === 0) {
      const m = body.slice(start, i).trim().match(/^"([^"]+)"(\??):\s*([\s\S]+)$/);
      if (m) members.push([m[1], m[2] === "?", m[3].trim()]);
      start = i + 1;
    }
  }
  return members;
}

// Returns the text between the brace at `open` and its match.
function braceBody(text, open) {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === "{") depth++;
    else if (text[i] === "}" && --depth === 0) return text.slice(open + 1, i);
  }
  throw new Error("unbalanced braces");
}

function parseFile(file, nodeModules) {
  if (cache.has(file)) return cache.get(file);
  const text = stripComments(fs.readFileSync(file, "utf8"));
  const imports = new Map();
  for (const m of text.matchAll(/import\s*\{([^}]*)\}\s*from\s*"([^"]+)"/g)) {
    for (const name of m[1].split(",").map((s) => s.trim()).filter(Boolean)) {
      imports.set(name, resolveSpecifier(file, m[2], nodeModules));
    }
  }
  const interfaces = new Map();
  for (const m of text.matchAll(/export interface (\w+)[^{]*\{/g)) {
    const body = braceBody(text, m.index + m[0].length - 1);
    interfaces.set(m[1], new Map(parseMembers(body).map(([n, , t]) => [n, t])));
  }
  const aliases = new Map();
  for (const m of text.matchAll(/export type \{([^}]*)\}/g)) {
    for (const part of m[1].split(",")) {
      const a = part.trim().match(/^(\w+) as (\w+)$/);
      if (a) aliases.set(a[2], a[1]);
    }
  }
  const parsed = { file, imports, interfaces, aliases };
  cache.set(file, parsed);
  return parsed;
}

// The member map of a named type as seen from `parsed` (following one import hop).
function lookupNamed(parsed, name, nodeModules) {
  if (parsed.interfaces.has(name)) return parsed.interfaces.get(name);
  const file = parsed.imports.get(name);
  if (!file || !fs.existsSync(file)) return null;
  const target = parseFile(file, nodeModules);
  const local = target.aliases.get(name) ?? name;
  if (target.interfaces.has(local)) return { members: target.interfaces.get(local), parsed: target };
  const first = target.interfaces.values().next();
  return first.done ? null : { members: first.value, parsed: target };
}

function walk(value, typeText, parsed, where, errors, nodeModules) {
  if (value === null || value === undefined) return;
  const t = typeText.trim();
  let m;
  if ((m = t.match(/^Array<([\s\S]+)>$/))) {
    if (Array.isArray(value)) value.forEach((v, i) => walk(v, m[1], parsed, `${where}[${i}]`, errors, nodeModules));
    return;
  }
  if (t.startsWith("{")) {
    const body = t.slice(1, t.lastIndexOf("}"));
    const map = body.trim().match(/^\[key: string\]:\s*([\s\S]+?);?\s*$/);
    if (typeof value !== "object" || Array.isArray(value)) return;
    if (map) {
      for (const [k, v] of Object.entries(value)) walk(v, map[1], parsed, `${where}.${k}`, errors, nodeModules);
      return;
    }
    walkObject(value, new Map(parseMembers(body).map(([n, , ty]) => [n, ty])), parsed, where, errors, nodeModules);
    return;
  }
  if (/^\w+$/.test(t) && !["string", "number", "boolean", "any", "unknown", "object"].includes(t)) {
    const found = lookupNamed(parsed, t, nodeModules);
    if (!found) return;
    const members = found instanceof Map ? found : found.members;
    const scope = found instanceof Map ? parsed : found.parsed;
    if (typeof value === "object" && !Array.isArray(value)) walkObject(value, members, scope, where, errors, nodeModules);
  }
}

function walkObject(value, members, parsed, where, errors, nodeModules) {
  for (const [k, v] of Object.entries(value)) {
    if (!members.has(k)) {
      errors.push(`${where}.${k}: unknown field (not in the schema)`);
      continue;
    }
    walk(v, members.get(k), parsed, `${where}.${k}`, errors, nodeModules);
  }
}

// Checks `object` against the top-level interface of the model declaration file `dtsFile`
// (e.g. node_modules/kubernetes-models/apps/v1/StatefulSet.d.ts). Returns a list of messages.
export function unknownFields(object, dtsFile, nodeModules) {
  const parsed = parseFile(dtsFile, nodeModules);
  const kind = path.basename(dtsFile, ".d.ts");
  const members = parsed.interfaces.get(`I${kind}`);
  if (!members) throw new Error(`no interface I${kind} in ${dtsFile}`);
  const errors = [];
  walkObject(object, members, parsed, kind, errors, nodeModules);
  return errors;
}
