#!/usr/bin/env node
// `npm run setup:gpu` — installs ONNX Runtime's CUDA execution provider for onnxruntime-node,
// then checks that this machine can load it.
//
// The CUDA provider libraries (libonnxruntime_providers_cuda.so is 272 MB) are too large for
// the npm registry, so onnxruntime-node fetches them from NuGet in its install script; this
// project's .npmrc disables install scripts (nothing downloads at `npm ci`), hence this step.
// The provider must be of onnxruntime-node's exact version: another one does not load.
//
//   npm run setup:gpu                      online: runs onnxruntime-node's own installer
//                                          (ONNXRUNTIME_NODE_INSTALL=cuda12, its manifest's name
//                                          even for 1.30's CUDA 13 build; needs api.nuget.org)
//   npm run setup:gpu -- --from FILE.whl   offline: from PyPI's onnxruntime-gpu wheel of the same
//                                          version (`pip download onnxruntime-gpu==X --no-deps`)
//   npm run setup:gpu -- --from FILE.nupkg from NuGet's Microsoft.ML.OnnxRuntime.Gpu.Linux package
//   npm run setup:gpu -- --from FOLDER     from a folder holding the two libraries (searched recursively)
//   npm run setup:gpu -- --check           only checks the installed provider
//   --into DIR                             installs into DIR instead (for tests and packagers)
//
// After installing, and with --check: a link check (scripts/cuda-libs.mjs) reads which CUDA
// libraries the provider links against and says in one line what is missing or off the
// loader path; then a one-node CUDA session proves the driver and GPU work.
// onnxruntime-node 1.30's provider needs an NVIDIA driver, CUDA 13 and cuDNN 9.
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { linkReport, machineSearchPlaces, readElfDynamic, requiredLibs } from './cuda-libs.mjs';

const require = createRequire(import.meta.url);
const LIBS = ['libonnxruntime_providers_cuda.so', 'libonnxruntime_providers_shared.so'];
// Where the libraries lie in each kind of package.
const ZIP_DIRS = ['runtimes/linux-x64/native/', 'onnxruntime/capi/'];

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

const ortVersion = () => require('onnxruntime-node/package.json').version;
const binDir = () => path.join(ortRoot(), 'bin', 'napi-v6', process.platform, process.arch);
const offlineWays = (v) =>
  `offline: \`pip download onnxruntime-gpu==${v} --no-deps\` then \`npm run setup:gpu -- --from onnxruntime_gpu-${v}-….whl\` ` +
  `(or --from Microsoft.ML.OnnxRuntime.Gpu.Linux.${v}.nupkg, or a folder holding the libraries)`;

function runOfficialInstaller(dir) {
  const script = path.join(ortRoot(), 'script', 'install.js');
  process.stderr.write(`setup:gpu: running onnxruntime-node's installer (downloads Microsoft.ML.OnnxRuntime.Gpu.Linux ${ortVersion()} from NuGet)…\n`);
  // cuda12 is the name of the installer's only linux/x64 manifest, whatever CUDA it holds.
  // It honours proxies through global-agent, which reads GLOBAL_AGENT_*, not the usual names.
  const proxy = process.env.HTTPS_PROXY ?? process.env.https_proxy;
  const env = { ...process.env, ONNXRUNTIME_NODE_INSTALL: 'cuda12', ...(proxy && !process.env.GLOBAL_AGENT_HTTPS_PROXY ? { GLOBAL_AGENT_HTTPS_PROXY: proxy } : {}) };
  // Its progress goes through; its stderr is an unhandled-rejection stack, cut to the error.
  const r = spawnSync(process.execPath, [script], { stdio: ['ignore', 'inherit', 'pipe'], encoding: 'utf8', env });
  const missing = LIBS.filter((f) => !fs.existsSync(path.join(dir, f)));
  if (r.status !== 0 || missing.length) {
    const why = (r.stderr ?? '').split('\n').find((l) => /^\w*Error\b/.test(l)) ?? `exit ${r.status}`;
    fail(`onnxruntime-node's installer did not install the CUDA provider (${why}): it downloads it from api.nuget.org; ${offlineWays(ortVersion())}`);
  }
}

/** The version in a package's file name: onnxruntime_gpu-1.30.0-cp311-….whl, ….Gpu.Linux.1.30.0.nupkg. */
function versionInName(file) {
  const base = path.basename(file);
  if (/\.whl$/i.test(base)) return base.split('-')[1] ?? null;
  return /\.(\d+\.\d+\.\d+[^/]*?)\.nupkg$/i.exec(base)?.[1] ?? /\d+\.\d+\.\d+/.exec(base)?.[0] ?? null;
}

/** The version a wheel's METADATA or a nupkg's .nuspec states. */
function versionInMetadata(name, text) {
  if (name.endsWith('METADATA')) return /^Version:\s*(\S+)/m.exec(text)?.[1] ?? null;
  if (/\.nuspec$/i.test(name)) return /<version>\s*([^<\s]+)\s*<\/version>/i.exec(text)?.[1] ?? null;
  return null;
}
const isMetadata = (name) => /(^|\/)[^/]+\.dist-info\/METADATA$/.test(name) || /\.nuspec$/i.test(name);

function refuseOtherVersion(source, version, where) {
  if (version && version !== ortVersion()) {
    fail(`--from ${source}: it is ONNX Runtime ${version} (${where}), but onnxruntime-node here is ${ortVersion()}, and a provider of another version does not load; ` +
      `get ${ortVersion()} (\`pip download onnxruntime-gpu==${ortVersion()} --no-deps\`)`);
  }
}

/**
 * Writes `target` from `write(tmp)` under a temporary name and renames it into place, so a
 * failed or interrupted copy never leaves a half provider that onnxruntime-node would load.
 * Checks it is an x86-64 shared library first: a wheel for aarch64 is a zip like any other.
 */
async function installFile(target, write) {
  const tmp = path.join(path.dirname(target), `.${path.basename(target)}.${process.pid}.partial`);
  try {
    await write(tmp);
    fs.chmodSync(tmp, 0o755);
    let elf;
    try {
      elf = readElfDynamic(tmp);
    } catch (err) {
      throw new Error(`${path.basename(target)} in it is not a usable library (${err.message.slice(tmp.length + 2)})`);
    }
    if (elf.machine !== 'x86-64') throw new Error(`${path.basename(target)} is built for ${elf.machine}, not x86-64`);
    fs.renameSync(tmp, target);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}

const openZip = async (file) => {
  const yauzl = (await import('yauzl')).default;
  // autoClose off: entries are read after the central directory has been listed.
  return new Promise((resolve, reject) => yauzl.open(file, { lazyEntries: true, autoClose: false }, (err, z) => (err ? reject(err) : resolve(z))));
};

function zipEntries(zip) {
  return new Promise((resolve, reject) => {
    const entries = [];
    zip.on('error', reject);
    zip.on('entry', (e) => {
      entries.push(e);
      zip.readEntry();
    });
    zip.on('end', () => resolve(entries));
    zip.readEntry();
  });
}

const entryStream = (zip, entry) => new Promise((resolve, reject) => zip.openReadStream(entry, (err, s) => (err ? reject(err) : resolve(s))));

async function entryText(zip, entry) {
  const chunks = [];
  for await (const c of await entryStream(zip, entry)) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8');
}

/** A .whl or .nupkg: both zips, with the libraries in ZIP_DIRS. Streams them out, one by one. */
async function installFromZip(source, dir) {
  let zip;
  let entries;
  try {
    zip = await openZip(source);
    entries = await zipEntries(zip);
  } catch (err) {
    fail(`--from ${source}: cannot read it as a .whl or .nupkg (zip) file: ${err.message}`);
  }
  try {
    const meta = entries.find((e) => isMetadata(e.fileName));
    if (meta) refuseOtherVersion(source, versionInMetadata(meta.fileName, await entryText(zip, meta)), meta.fileName);
    const found = new Map();
    for (const lib of LIBS) {
      const e = entries.find((x) => ZIP_DIRS.some((d) => x.fileName === d + lib));
      if (e) found.set(lib, e);
    }
    const absent = LIBS.filter((f) => !found.has(f));
    if (absent.length) {
      fail(`--from ${source}: ${absent.join(', ')} not in it (looked in ${ZIP_DIRS.join(' and ')}); it should be PyPI's onnxruntime-gpu wheel ` +
        `or NuGet's Microsoft.ML.OnnxRuntime.Gpu.Linux (the CPU packages have no CUDA provider)`);
    }
    for (const [lib, entry] of found) {
      await installFile(path.join(dir, lib), async (tmp) => pipeline(await entryStream(zip, entry), fs.createWriteStream(tmp)));
    }
  } finally {
    zip.close();
  }
}

function findFiles(dir, wanted, found = new Map()) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) findFiles(p, wanted, found);
    else {
      const key = wanted(p);
      if (key && !found.has(key)) found.set(key, p);
    }
  }
  return found;
}

async function installFromFolder(source, dir) {
  const found = findFiles(source, (p) => (LIBS.includes(path.basename(p)) ? path.basename(p) : isMetadata(p.split(path.sep).join('/')) ? 'metadata' : null));
  // An extracted wheel or nupkg still says its version; bare libraries cannot be checked.
  const meta = found.get('metadata');
  if (meta) refuseOtherVersion(source, versionInMetadata(meta.split(path.sep).join('/'), fs.readFileSync(meta, 'utf8')), meta);
  const absent = LIBS.filter((f) => !found.has(f));
  if (absent.length) fail(`--from ${source}: ${absent.join(', ')} not found in that folder (expected an extracted onnxruntime-gpu wheel or Microsoft.ML.OnnxRuntime.Gpu.Linux package)`);
  for (const lib of LIBS) await installFile(path.join(dir, lib), async (tmp) => pipeline(fs.createReadStream(found.get(lib)), fs.createWriteStream(tmp)));
}

async function installFrom(source, dir) {
  if (!fs.existsSync(source)) fail(`--from ${source}: no such file or folder`);
  fs.mkdirSync(dir, { recursive: true });
  try {
    if (fs.statSync(source).isDirectory()) {
      await installFromFolder(source, dir);
    } else {
      refuseOtherVersion(source, versionInName(source), 'its file name');
      await installFromZip(source, dir);
    }
  } catch (err) {
    fail(`--from ${source}: ${err.message}`);
  }
  process.stderr.write(`setup:gpu: installed ${LIBS.join(', ')} (ONNX Runtime ${ortVersion()}) into ${dir}\n`);
}

/** The link check: whether the loader can find every library the installed provider needs. */
function linkCheck(dir) {
  let elf;
  try {
    elf = readElfDynamic(path.join(dir, LIBS[0]));
  } catch (err) {
    return { ok: false, line: `cannot read the installed provider: ${err.message}`, needed: [] };
  }
  return { ...linkReport({ ortVersion: ortVersion(), needed: elf.needed, ...machineSearchPlaces() }), needed: elf.needed };
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

const USAGE = `usage: npm run setup:gpu [-- --from FILE.whl|FILE.nupkg|FOLDER] [-- --check] [-- --into DIR]
  (no --from)  run onnxruntime-node's own installer (downloads from api.nuget.org)
  --from PATH  install from onnxruntime-gpu's wheel (pip download onnxruntime-gpu==VERSION --no-deps),
               a Microsoft.ML.OnnxRuntime.Gpu.Linux .nupkg, or a folder holding the libraries;
               it must be the installed onnxruntime-node's version
  --check      only check the installed provider: its libraries, then a CUDA session
  --into DIR   install into (or check) DIR instead of onnxruntime-node's folder, for tests and
               packagers; the CUDA session check is skipped there, onnxruntime-node does not load from it
`;

const { values } = parseArgs({
  options: { from: { type: 'string' }, into: { type: 'string' }, check: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h' } },
});
if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
if (process.platform !== 'linux' || process.arch !== 'x64') fail(`the CUDA provider of onnxruntime-node ships for linux/x64 only (this is ${process.platform}/${process.arch})`);

const dir = values.into ? path.resolve(values.into) : binDir();
if (!values.check) {
  if (values.from) await installFrom(path.resolve(values.from), dir);
  else if (values.into) fail("--into needs --from: onnxruntime-node's installer writes only into its own folder");
  else if (LIBS.some((f) => !fs.existsSync(path.join(dir, f)))) runOfficialInstaller(dir);
  else process.stderr.write('setup:gpu: the CUDA provider is already installed\n');
}
const absent = LIBS.filter((f) => !fs.existsSync(path.join(dir, f)));
if (absent.length) fail(`the CUDA provider is not installed: ${absent.join(', ')} missing in ${dir}; run \`npm run setup:gpu\`, or ${offlineWays(ortVersion())}`);

// A failed check after installing still exits 0: the files are in place, and the line says
// what the machine lacks. With --check it is the answer, so it fails.
const link = linkCheck(dir);
if (!link.ok) {
  process.stderr.write(`setup:gpu: ${link.line}\n`);
  process.exit(values.check ? 1 : 0);
}
process.stderr.write(`setup:gpu: ${link.line}\n`);
if (values.into) {
  process.stderr.write(`setup:gpu: no CUDA session check for --into ${dir}: onnxruntime-node loads its provider from ${binDir()}\n`);
  process.exit(0);
}
try {
  const y = await checkCudaSession();
  process.stderr.write(`setup:gpu: OK — a CUDA EP session ran (1+1, 2+2 = ${y.join(', ')}). Use --device cuda.\n`);
} catch (err) {
  const req = requiredLibs(link.needed, ortVersion());
  process.stderr.write(`setup:gpu: the provider and the libraries it links against are here, but a CUDA session could not start: ${String(err.message).split('\n')[0]} ` +
    `(it needs an NVIDIA GPU and its driver${req.cudaMajor ? `, CUDA ${req.cudaMajor}` : ''}${req.cudnnMajor ? `, cuDNN ${req.cudnnMajor}` : ''})\n`);
  process.exit(values.check ? 1 : 0);
}
