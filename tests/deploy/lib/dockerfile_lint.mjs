// Lint of deploy/docker/Dockerfile.* without a Docker engine.
//
// Two layers:
//  1. dockerfile-utils' validator (the engine behind the VS Code Docker language server): syntax,
//     instruction arguments, flags of FROM/COPY/HEALTHCHECK, JSON forms; every diagnostic of
//     severity warning or error fails.
//  2. The project's image rules, checked on the parsed instructions (dockerfile-ast):
//     multi-stage with COPY --from; base images pinned to a tag (ARG defaults resolved, no
//     `latest`); apt-get install with --no-install-recommends and the lists removed in the same
//     RUN; the final stage runs as a non-root USER, has a HEALTHCHECK using `pkv health` and an
//     exec-form ENTRYPOINT; `expectStages` names the base image of each stage.

import dockerfileUtils from "dockerfile-utils";
import dockerfileAst from "dockerfile-ast";

const { validate } = dockerfileUtils;
const { DockerfileParser } = dockerfileAst;

// ARG defaults declared before the first FROM (the ones FROM lines may use).
function argDefaults(text) {
  const defaults = {};
  for (const line of text.split("\n")) {
    if (/^\s*FROM\s/i.test(line)) break;
    const m = /^\s*ARG\s+(\w+)=("?)(.*)\2\s*$/i.exec(line);
    if (m) defaults[m[1]] = m[3];
  }
  return defaults;
}

function expand(text, defaults) {
  return text.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a, b) => defaults[a ?? b] ?? `<unset ${a ?? b}>`);
}

function checkImageRules(text, expectStages) {
  const errors = [];
  const dockerfile = DockerfileParser.parse(text);
  const defaults = argDefaults(text);
  const froms = dockerfile.getFROMs();
  if (froms.length < 2) errors.push("not a multi-stage build");
  froms.forEach((from, i) => {
    const image = expand(from.getImage() ?? "", defaults);
    if (!image.includes(":") || image.endsWith(":latest") || image.includes("<unset")) {
      errors.push(`stage ${i}: base image ${image} is not pinned to a tag`);
    }
    if (expectStages?.[i] && !expectStages[i].test(image)) {
      errors.push(`stage ${i}: base image ${image} does not match ${expectStages[i]}`);
    }
  });
  const instructions = dockerfile.getInstructions();
  if (!instructions.some((x) => x.getKeyword() === "COPY" && /--from=/.test(x.getTextContent()))) {
    errors.push("no COPY --from between stages");
  }
  for (const run of instructions.filter((x) => x.getKeyword() === "RUN")) {
    const body = run.getTextContent();
    if (/apt-get\s+install/.test(body)) {
      if (!/--no-install-recommends/.test(body)) errors.push(`line ${run.getRange().start.line + 1}: apt-get install without --no-install-recommends`);
      if (!/rm -rf \/var\/lib\/apt\/lists/.test(body)) errors.push(`line ${run.getRange().start.line + 1}: apt lists not removed in the same RUN`);
    }
  }
  const lastFrom = froms[froms.length - 1].getRange().start.line;
  const final = instructions.filter((x) => x.getRange().start.line > lastFrom);
  const user = final.filter((x) => x.getKeyword() === "USER").pop();
  const who = user?.getArgumentsContent()?.split(":")[0];
  if (!user || who === "0" || who === "root") errors.push("final stage does not switch to a non-root USER");
  const health = final.find((x) => x.getKeyword() === "HEALTHCHECK");
  if (!health || !/"pkv",\s*"health"|pkv health/.test(health.getTextContent())) errors.push("final stage has no HEALTHCHECK running `pkv health`");
  const entry = final.find((x) => x.getKeyword() === "ENTRYPOINT");
  if (!entry || !entry.getArgumentsContent().trim().startsWith("[")) errors.push("final stage has no exec-form ENTRYPOINT");
  return errors;
}

// Returns the list of problems in Dockerfile `text` (empty = clean).
export function lintDockerfile(text, expectStages) {
  const errors = [];
  for (const d of validate(text)) {
    if (d.severity <= 2) errors.push(`line ${d.range.start.line + 1}: ${d.message}`);  // 1 error, 2 warning
  }
  return errors.concat(checkImageRules(text, expectStages));
}
