#!/bin/sh
# Assembles the runtime tree of the onnx-mme image into DEST:
#   DEST/package.json, package-lock.json           (package.json's "type": "module" makes dist/ ESM)
#   DEST/node_modules                              production dependencies only, from the lockfile
#   DEST/dist/src                                  the compiled server and CLI (and the gRPC .proto files)
#   DEST/serve                                     SageMaker's entry point (docker run IMAGE serve)
# Both Dockerfiles run this in their build stage and copy DEST into the
# runtime stage unchanged; test/integration/packaging.test.ts runs it too and
# starts the result, so what the test proves is what the image holds.
#
# Usage: docker/assemble-runtime.sh REPO_ROOT BUILD_DIR DEST
#   BUILD_DIR: tsc's output directory (dist/ after `npm run build`).
# The production install is `npm ci --omit=dev --offline`: it takes every
# package from the npm cache that the full `npm ci` before it filled, so it
# downloads nothing and installs exactly the lockfile's production closure.
# Install scripts are not run (onnxruntime-node's would download CUDA
# libraries); the GPU image installs those explicitly afterwards.
set -eu
if [ "$#" -ne 3 ]; then
  echo "usage: $0 REPO_ROOT BUILD_DIR DEST" >&2
  exit 2
fi
repo=$1
build=$2
dest=$3

if [ ! -f "$build/src/main.js" ] || [ ! -f "$build/src/cli/onnx-mme.js" ]; then
  echo "$0: $build/src has no compiled server; run 'npm run build' first" >&2
  exit 1
fi
if [ ! -f "$build/src/grpc/proto/grpc_service.proto" ]; then
  echo "$0: $build/src/grpc/proto has no .proto files (the gRPC listener loads them); 'npm run build' copies them" >&2
  exit 1
fi
if [ -e "$dest" ] && [ -n "$(ls -A "$dest")" ]; then
  echo "$0: $dest exists and is not empty" >&2
  exit 1
fi
mkdir -p "$dest/dist"

cp "$repo/package.json" "$repo/package-lock.json" "$dest/"
(
  cd "$dest"
  ONNXRUNTIME_NODE_INSTALL=skip npm ci --omit=dev --offline --ignore-scripts --no-audit --no-fund --loglevel=error
)

# onnxruntime-node ships binaries for every OS and CPU (about 290 MB); keep this platform's.
bin="$dest/node_modules/onnxruntime-node/bin/napi-v6"
platform=$(node -p 'process.platform')
arch=$(node -p 'process.arch')
if [ ! -f "$bin/$platform/$arch/onnxruntime_binding.node" ]; then
  echo "$0: onnxruntime-node has no binary for $platform/$arch" >&2
  exit 1
fi
for os_dir in "$bin"/*; do
  [ "$(basename "$os_dir")" = "$platform" ] || rm -rf "$os_dir"
done
for arch_dir in "$bin/$platform"/*; do
  [ "$(basename "$arch_dir")" = "$arch" ] || rm -rf "$arch_dir"
done

cp -R "$build/src" "$dest/dist/src"
# Source maps point at TypeScript sources the image does not carry.
find "$dest/dist" -name '*.map' -type f -exec rm -f {} +
cp "$repo/serve" "$dest/serve"
chmod 755 "$dest/serve" "$dest/dist/src/cli/onnx-mme.js"
