#!/usr/bin/env node
// `npm run setup:gpu` — installs ONNX Runtime's CUDA execution provider for onnxruntime-node.
//
// The CUDA provider libraries are too large for the npm registry, so onnxruntime-node
// fetches them from NuGet in its install script; this project's .npmrc disables install
// scripts (nothing downloads at `npm ci`), hence this explicit step.
//
//   npm run setup:gpu                      online: runs onnxruntime-node's own installer
//                                          (ONNXRUNTIME_NODE_INSTALL=cuda12; needs api.nuget.org)
//   npm run setup:gpu -- --from PATH       offline: copies libonnxruntime_providers_{cuda,shared}.so
//                                          from a Microsoft.ML.OnnxRuntime.Gpu.Linux 1.23.x .nupkg
//                                          (a zip) or from a folder holding them (searched recursively)
//   npm run setup:gpu -- --check           only reports whether the CUDA EP is installed and loads
//
// Needs, at run time: an NVIDIA driver, CUDA 12 and cuDNN 9 libraries on the loader path.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

const require = createRequire(import.meta.url);
const LIBS = ['libonnxruntime_providers_cuda.so', 'libonnxruntime_providers_shared.so'];
const NUPKG_DIR = 'runtimes/linux-x64/native/';

function fail(message) {
  process.stderr.write(`setup:gpu: ${message}\n`);
  process.exit(1);
}

function ortRoot() {
  try {
    return path.dirname(require.resolve('onnxruntime-node/package.json'));
  } catch {
    fail('onnxruntime-node is not installed; run `npm ci` first');
  }
}

const binDir = () => path.join(ortRoot(), 'bin', 'napi-v6', process.platform, process.arch);
const missingLibs = () => LIBS.filter((f) => !fs.existsSync(path.join(binDir(), f)));

function runOfficialInstaller() {
  const script = path.join(ortRoot(), 'script', 'install.js');
  process.stderr.write(`setup:gpu: running onnxruntime-node's installer (downloads Microsoft.ML.OnnxRuntime.Gpu.Linux from NuGet)…\n`);
  const r = spawnSync(process.execPath, [script], { stdio: 'inherit', env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: 'cuda12' } });
  if (r.status !== 0 || missingLibs().length) {
    fail(`the installer did not install ${missingLibs().join(', ') || 'the CUDA provider'} (exit ${r.status}). ` +
      'It needs to reach api.nuget.org. Offline: download Microsoft.ML.OnnxRuntime.Gpu.Linux 1.23.x (.nupkg) on another machine ' +
      'and run `npm run setup:gpu -- --from /path/to/file.nupkg`.');
  }
}

function findFiles(dir, names, found = new Map()) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) findFiles(p, names, found);
    else if (names.includes(entry.name) && !found.has(entry.name)) found.set(entry.name, p);
  }
  return found;
}

async function extractFromNupkg(file) {
  const yauzl = (await import('yauzl')).default;
  const zip = await new Promise((resolve, reject) => yauzl.open(file, { lazyEntries: true }, (err, z) => (err ? reject(err) : resolve(z))));
  const wanted = new Map(LIBS.map((f) => [NUPKG_DIR + f, f]));
  const written = [];
  await new Promise((resolve, reject) => {
    zip.on('error', reject);
    zip.on('end', resolve);
    zip.on('entry', (entry) => {
      const name = wanted.get(entry.fileName);
      if (!name) return zip.readEntry();
      zip.openReadStream(entry, (err, stream) => {
        if (err) return reject(err);
        const target = path.join(binDir(), name);
        const tmp = target + '.partial';
        stream.pipe(fs.createWriteStream(tmp)).on('finish', () => {
          fs.renameSync(tmp, target);
          written.push(name);
          zip.readEntry();
        }).on('error', reject);
      });
    });
    zip.readEntry();
  });
  zip.close();
  return written;
}

async function installFrom(source) {
  if (!fs.existsSync(source)) fail(`--from ${source}: no such file or folder`);
  if (/\d+\.\d+\.\d+/.test(path.basename(source)) && !/1\.23\./.test(path.basename(source))) {
    process.stderr.write(`setup:gpu: warning: ${path.basename(source)} does not look like version 1.23.x; onnxruntime-node here is ${require('onnxruntime-node/package.json').version}\n`);
  }
  if (fs.statSync(source).isDirectory()) {
    const found = findFiles(source, LIBS);
    const absent = LIBS.filter((f) => !found.has(f));
    if (absent.length) fail(`--from ${source}: ${absent.join(', ')} not found in that folder (expected an extracted Microsoft.ML.OnnxRuntime.Gpu.Linux package, ${NUPKG_DIR})`);
    for (const [name, p] of found) fs.copyFileSync(p, path.join(binDir(), name));
  } else {
    let written;
    try {
      written = await extractFromNupkg(source);
    } catch (err) {
      fail(`--from ${source}: cannot read it as a .nupkg (zip) file: ${err.message}`);
    }
    const absent = LIBS.filter((f) => !written.includes(f));
    if (absent.length) fail(`--from ${source}: ${absent.map((f) => NUPKG_DIR + f).join(', ')} not in the package; is it Microsoft.ML.OnnxRuntime.Gpu.Linux?`);
  }
  process.stderr.write(`setup:gpu: copied ${LIBS.join(', ')} into ${binDir()}\n`);
}

/** Creates a one-node session on the CUDA EP only: proves the provider and driver load. */
async function checkCudaSession() {
  const ort = (await import('onnxruntime-node')).default;
  const { onnx } = (await import('onnx-proto')).default;
  const f32 = { tensorType: { elemType: 1, shape: { dim: [{ dimValue: 2 }] } } };
  const bytes = onnx.ModelProto.encode({
    irVersion: 8,
    opsetImport: [{ domain: '', version: 18 }],
    graph: { name: 'check', node: [{ opType: 'Add', input: ['x', 'x'], output: ['y'] }], input: [{ name: 'x', type: f32 }], output: [{ name: 'y', type: f32 }] },
  }).finish();
  const session = await ort.InferenceSession.create(bytes, { executionProviders: ['cuda'] });
  const out = await session.run({ x: new ort.Tensor('float32', Float32Array.from([1, 2]), [2]) });
  await session.release();
  return Array.from(out.y.data);
}

const { values } = parseArgs({ options: { from: { type: 'string' }, check: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h' } } });
if (values.help) {
  process.stdout.write('usage: npm run setup:gpu [-- --from NUPKG_OR_DIR] [-- --check]\n');
  process.exit(0);
}
if (process.platform !== 'linux' || process.arch !== 'x64') fail(`the CUDA provider of onnxruntime-node ships for linux/x64 only (this is ${process.platform}/${process.arch})`);

if (!values.check) {
  if (values.from) await installFrom(path.resolve(values.from));
  else if (missingLibs().length) runOfficialInstaller();
  else process.stderr.write('setup:gpu: the CUDA provider is already installed\n');
}
const absent = missingLibs();
if (absent.length) fail(`not installed: ${absent.join(', ')} missing in ${binDir()}`);
try {
  const y = await checkCudaSession();
  process.stderr.write(`setup:gpu: OK — a CUDA EP session ran (1+1, 2+2 = ${y.join(', ')}). Use --device cuda.\n`);
} catch (err) {
  process.stderr.write(`setup:gpu: the provider files are installed, but a CUDA session could not start here: ${String(err.message).split('\n')[0]}\n` +
    'setup:gpu: this needs an NVIDIA GPU with its driver, and CUDA 12 + cuDNN 9 libraries on the loader path (LD_LIBRARY_PATH).\n');
  process.exit(values.check ? 1 : 0);
}
