// `npm run setup:gpu` (scripts/setup-gpu.mjs) without a GPU: its ELF reader, the link check's
// one-line verdicts on fake library folders, and installing from a wheel, a nupkg and a folder
// into a temp `--into` folder (never node_modules, which another run may be using). The real
// onnxruntime-gpu wheel is used when one is at hand (.ci/run downloads it into .cache/).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { writeZip } from '../import/helpers.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCRIPT = path.join(ROOT, 'scripts', 'setup-gpu.mjs');
const ORT_VERSION: string = JSON.parse(fs.readFileSync(path.join(ROOT, 'node_modules/onnxruntime-node/package.json'), 'utf8')).version;
const ORT_LIB = path.join(ROOT, 'node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1');
const PROVIDER = 'libonnxruntime_providers_cuda.so';
const SHARED = 'libonnxruntime_providers_shared.so';

// scripts/cuda-libs.mjs is plain JS without declarations; these are the parts the tests use.
interface ElfDynamic { machine: string; needed: string[]; soname: string | null; runpath: string | null }
interface LinkReport { ok: boolean; line: string; exportLine?: string }
interface CudaLibs {
  ElfError: new (message: string) => Error;
  readElfDynamic(file: string): ElfDynamic;
  cudnnMajorFor(ortVersion: string): number | null;
  linkReport(args: { ortVersion: string; needed: string[]; loaderDirs?: string[]; ldconfigText?: string; offPathDirs?: string[]; ldLibraryPath?: string }): LinkReport;
}
const cudaLibsUrl = new URL('../../scripts/cuda-libs.mjs', import.meta.url).href;
const libs: CudaLibs = await import(cudaLibsUrl);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-setup-gpu-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
let n = 0;
const freshDir = (name: string) => {
  const d = path.join(tmp, `${n++}-${name}`);
  fs.mkdirSync(d, { recursive: true });
  return d;
};

/** A minimal x86-64 shared library image: program headers only (PT_LOAD + PT_DYNAMIC), no sections. */
function makeElf(needed: string[]): Buffer {
  const strtab = Buffer.concat([Buffer.from([0]), ...needed.map((s) => Buffer.from(s + '\0'))]);
  const phOff = 64;
  const dynOff = phOff + 2 * 56;
  const dynEntries: [number, number][] = [];
  let at = 1;
  for (const s of needed) {
    dynEntries.push([1, at]); // DT_NEEDED
    at += Buffer.byteLength(s) + 1;
  }
  const strOff = dynOff + (dynEntries.length + 3) * 16;
  dynEntries.push([5, strOff], [10, strtab.length], [0, 0]); // DT_STRTAB (vaddr = offset), DT_STRSZ, DT_NULL
  const size = strOff + strtab.length;
  const b = Buffer.alloc(size);
  b.writeUInt32BE(0x7f454c46, 0);
  b[4] = 2; // 64-bit
  b[5] = 1; // little-endian
  b[6] = 1;
  b.writeUInt16LE(3, 16); // ET_DYN
  b.writeUInt16LE(62, 18); // EM_X86_64
  b.writeUInt32LE(1, 20);
  b.writeBigUInt64LE(BigInt(phOff), 0x20);
  b.writeUInt16LE(64, 0x34);
  b.writeUInt16LE(56, 0x36);
  b.writeUInt16LE(2, 0x38);
  b.writeUInt16LE(64, 0x3a);
  const ph = (i: number, type: number, offset: number, filesz: number) => {
    const o = phOff + i * 56;
    b.writeUInt32LE(type, o);
    b.writeBigUInt64LE(BigInt(offset), o + 8);
    b.writeBigUInt64LE(BigInt(offset), o + 16);
    b.writeBigUInt64LE(BigInt(offset), o + 24);
    b.writeBigUInt64LE(BigInt(filesz), o + 32);
    b.writeBigUInt64LE(BigInt(filesz), o + 40);
  };
  ph(0, 1, 0, size); // PT_LOAD: the whole file at address 0
  ph(1, 2, dynOff, dynEntries.length * 16); // PT_DYNAMIC
  dynEntries.forEach(([tag, val], i) => {
    b.writeBigInt64LE(BigInt(tag), dynOff + i * 16);
    b.writeBigUInt64LE(BigInt(val), dynOff + i * 16 + 8);
  });
  strtab.copy(b, strOff);
  return b;
}

/** A zip of stored (uncompressed) entries: what a .whl or .nupkg is, minus compression. */
const storedZip = (file: string, entries: Record<string, Buffer | string>): string =>
  writeZip(file, Object.entries(entries).map(([name, data]) => ({ name, data: Buffer.from(data), deflate: false })));

// A fake provider that needs a CUDA no machine has, so its link check fails everywhere.
const FAKE_PROVIDER = makeElf(['libcudart.so.99', 'libcuda.so.1', 'libstdc++.so.6', 'libc.so.6']);
const FAKE_SHARED = makeElf(['libc.so.6']);

function fakeWheel(version: string, metadataVersion = version): string {
  return storedZip(path.join(freshDir('wheel'), `onnxruntime_gpu-${version}-cp311-cp311-manylinux_2_28_x86_64.whl`), {
    'onnxruntime/__init__.py': '',
    [`onnxruntime/capi/${PROVIDER}`]: FAKE_PROVIDER,
    [`onnxruntime/capi/${SHARED}`]: FAKE_SHARED,
    [`onnxruntime_gpu-${metadataVersion}.dist-info/METADATA`]: `Metadata-Version: 2.1\nName: onnxruntime-gpu\nVersion: ${metadataVersion}\n`,
  });
}

function fakeNupkg(fileName: string, version: string): string {
  return storedZip(path.join(freshDir('nupkg'), fileName), {
    'Microsoft.ML.OnnxRuntime.Gpu.Linux.nuspec': `<?xml version="1.0"?><package><metadata><id>Microsoft.ML.OnnxRuntime.Gpu.Linux</id><version>${version}</version></metadata></package>`,
    [`runtimes/linux-x64/native/${PROVIDER}`]: FAKE_PROVIDER,
    [`runtimes/linux-x64/native/${SHARED}`]: FAKE_SHARED,
  });
}

function setupGpu(...args: string[]) {
  const r = spawnSync(process.execPath, [SCRIPT, ...args], { cwd: ROOT, encoding: 'utf8' });
  return { status: r.status, stderr: r.stderr.trim(), lines: r.stderr.trim().split('\n') };
}

function expectInstalled(into: string) {
  for (const [lib, content] of [[PROVIDER, FAKE_PROVIDER], [SHARED, FAKE_SHARED]] as const) {
    const file = path.join(into, lib);
    expect(fs.readFileSync(file).equals(content)).toBe(true);
    expect(fs.statSync(file).mode & 0o777).toBe(0o755);
  }
  expect(fs.readdirSync(into).sort()).toEqual([PROVIDER, SHARED]); // no temp files left
}

describe('the ELF reader', () => {
  it("lists a real shared library's DT_NEEDED (section headers)", () => {
    const elf = libs.readElfDynamic(ORT_LIB);
    expect(elf.machine).toBe('x86-64');
    expect(elf.needed).toContain('libstdc++.so.6');
    expect(elf.soname).toBe('libonnxruntime.so.1');
  });

  it('reads one with program headers only (PT_DYNAMIC)', () => {
    const file = path.join(freshDir('elf'), 'lib.so');
    fs.writeFileSync(file, makeElf(['libcudart.so.13', 'libc.so.6']));
    expect(libs.readElfDynamic(file).needed).toEqual(['libcudart.so.13', 'libc.so.6']);
  });

  it('refuses a truncated or non-ELF file with one clear error', () => {
    const dir = freshDir('bad');
    const truncated = path.join(dir, 'truncated.so');
    const fd = fs.openSync(ORT_LIB, 'r');
    const head = Buffer.alloc(4096);
    fs.readSync(fd, head, 0, head.length, 0);
    fs.closeSync(fd);
    fs.writeFileSync(truncated, head);
    const text = path.join(dir, 'text.so');
    fs.writeFileSync(text, 'INPUT(-lfoo)\n'.repeat(10));
    expect(() => libs.readElfDynamic(truncated)).toThrow(libs.ElfError);
    expect(() => libs.readElfDynamic(truncated)).toThrow(/truncated\.so: truncated ELF file/);
    expect(() => libs.readElfDynamic(text)).toThrow(/text\.so: not an ELF file/);
  });
});

describe('the link check', () => {
  // onnxruntime-node 1.30's provider, as readelf -d lists it.
  const NEEDED_130 = ['libcublasLt.so.13', 'libcublas.so.13', 'libcurand.so.10', 'libcudart.so.13', 'libcuda.so.1', 'libdl.so.2', 'libstdc++.so.6', 'libc.so.6'];
  const CUDA13 = ['libcudart.so.13', 'libcublas.so.13', 'libcublasLt.so.13', 'libcurand.so.10'];
  const folderWith = (name: string, files: string[]) => {
    const d = freshDir(name);
    fs.mkdirSync(d, { recursive: true });
    for (const f of files) fs.writeFileSync(path.join(d, f), '');
    return d;
  };

  it('takes cuDNN 9 for ONNX Runtime 1.19 and later, from its table', () => {
    expect(libs.cudnnMajorFor('1.30.0')).toBe(9);
    expect(libs.cudnnMajorFor('1.19.2')).toBe(9);
    expect(libs.cudnnMajorFor('1.18.0')).toBe(8);
  });

  it('passes when every library is in an LD_LIBRARY_PATH folder', () => {
    const ld = folderWith('ld', [...CUDA13, 'libcudnn.so.9', 'libcuda.so.1']);
    const r = libs.linkReport({ ortVersion: '1.30.0', needed: NEEDED_130, loaderDirs: [ld] });
    expect(r.ok).toBe(true);
  });

  it("passes when the ldconfig cache lists them", () => {
    const dir = folderWith('cached', [...CUDA13, 'libcudnn.so.9', 'libcuda.so.1']);
    const ldconfigText = `123 libs found in cache \`/etc/ld.so.cache'\n` +
      [...CUDA13, 'libcudnn.so.9', 'libcuda.so.1'].map((f) => `\t${f} (libc6,x86-64) => ${dir}/${f}`).join('\n');
    expect(libs.linkReport({ ortVersion: '1.30.0', needed: NEEDED_130, ldconfigText }).ok).toBe(true);
  });

  it("names the folders off the loader path and prints the export line (Python's NVIDIA wheels)", () => {
    const site = freshDir('site-packages');
    const cu13 = path.join(site, 'nvidia', 'cu13', 'lib');
    const cudnn = path.join(site, 'nvidia', 'cudnn', 'lib');
    fs.mkdirSync(cu13, { recursive: true });
    fs.mkdirSync(cudnn, { recursive: true });
    for (const f of CUDA13) fs.writeFileSync(path.join(cu13, f), '');
    fs.writeFileSync(path.join(cudnn, 'libcudnn.so.9'), '');
    const driver = folderWith('driver', ['libcuda.so.1']);
    const r = libs.linkReport({ ortVersion: '1.30.0', needed: NEEDED_130, loaderDirs: [driver], offPathDirs: [cudnn, cu13], ldLibraryPath: '/opt/x' });
    expect(r.ok).toBe(false);
    expect(r.line).not.toContain('\n');
    expect(r.line).toContain(`libcudart.so.13 in ${cu13}`);
    expect(r.line).toContain(`libcudnn.so.9 in ${cudnn}`);
    expect(r.exportLine).toBe(`export LD_LIBRARY_PATH=${cu13}:${cudnn}:/opt/x`);
    expect(r.line.endsWith(r.exportLine!)).toBe(true);
  });

  it('says which CUDA it needs and which one the machine has instead', () => {
    const cuda12 = path.join(freshDir('usr-local'), 'cuda-12.4', 'lib64');
    fs.mkdirSync(cuda12, { recursive: true });
    for (const f of ['libcudart.so.12', 'libcudart.so.12.4.127', 'libcublas.so.12']) fs.writeFileSync(path.join(cuda12, f), '');
    const driver = folderWith('driver', ['libcuda.so.1', 'libcudnn.so.9']);
    const r = libs.linkReport({ ortVersion: '1.30.0', needed: NEEDED_130, loaderDirs: [driver], offPathDirs: [cuda12] });
    expect(r.ok).toBe(false);
    expect(r.line).toBe('the CUDA provider of onnxruntime-node 1.30.0 needs libcudart.so.13, libcublasLt.so.13, libcublas.so.13, libcurand.so.10 (CUDA 13) ' +
      `and libcudnn.so.9 (cuDNN 9); not found: libcudart.so.13, libcublasLt.so.13, libcublas.so.13, libcurand.so.10; ` +
      `found CUDA 12.4 (libcudart.so.12 in ${cuda12}), cuDNN 9 (libcudnn.so.9 in ${driver})`);
  });

  it('says when no CUDA runtime is there, and when the driver is missing', () => {
    const r = libs.linkReport({ ortVersion: '1.30.0', needed: NEEDED_130, loaderDirs: [freshDir('empty')] });
    expect(r.line).toMatch(/^the NVIDIA driver is missing .*needs libcudart\.so\.13.*; found no CUDA runtime, no cuDNN$/);
    const all = folderWith('no-driver', [...CUDA13, 'libcudnn.so.9']);
    const d = libs.linkReport({ ortVersion: '1.30.0', needed: NEEDED_130, loaderDirs: [all] });
    expect(d.ok).toBe(false);
    expect(d.line).toMatch(/^the NVIDIA driver is missing/);
  });
});

describe('npm run setup:gpu --from … --into DIR', () => {
  it('installs from a wheel', () => {
    const into = path.join(freshDir('into'), 'bin'); // created by the script
    const r = setupGpu('--from', fakeWheel(ORT_VERSION), '--into', into);
    expect(r.stderr).toContain(`installed ${PROVIDER}, ${SHARED} (ONNX Runtime ${ORT_VERSION}) into ${into}`);
    // The link check runs after installing; the fake needs CUDA 99, which no machine has.
    expect(r.lines.at(-1)).toContain('needs libcudart.so.99 (CUDA 99)');
    expect(r.status).toBe(0);
    expectInstalled(into);
  });

  it('installs from a nupkg', () => {
    const into = freshDir('into');
    const r = setupGpu('--from', fakeNupkg(`Microsoft.ML.OnnxRuntime.Gpu.Linux.${ORT_VERSION}.nupkg`, ORT_VERSION), '--into', into);
    expect(r.status).toBe(0);
    expectInstalled(into);
  });

  it('installs from a folder, searched recursively', () => {
    const src = freshDir('extracted');
    fs.mkdirSync(path.join(src, 'runtimes/linux-x64/native'), { recursive: true });
    fs.writeFileSync(path.join(src, 'runtimes/linux-x64/native', PROVIDER), FAKE_PROVIDER);
    fs.writeFileSync(path.join(src, 'runtimes/linux-x64/native', SHARED), FAKE_SHARED);
    const into = freshDir('into');
    const r = setupGpu('--from', src, '--into', into);
    expect(r.status).toBe(0);
    expectInstalled(into);
  });

  it('refuses, in one line, a wheel or nupkg of another version', () => {
    const cases = [
      fakeWheel('1.23.2'),
      fakeNupkg('Microsoft.ML.OnnxRuntime.Gpu.Linux.1.23.2.nupkg', '1.23.2'),
      fakeWheel(ORT_VERSION, '1.23.2'), // renamed: its METADATA tells
      fakeNupkg('provider.nupkg', '1.23.2'), // no version in the name: its .nuspec tells
    ];
    for (const file of cases) {
      const into = freshDir('into');
      const r = setupGpu('--from', file, '--into', into);
      expect(r.status).toBe(1);
      expect(r.lines).toHaveLength(1);
      expect(r.stderr).toMatch(new RegExp(`^setup:gpu: --from .*: it is ONNX Runtime 1\\.23\\.2 .*onnxruntime-node here is ${ORT_VERSION.replace(/\./g, '\\.')}`));
      expect(fs.readdirSync(into)).toEqual([]);
    }
  });

  it('refuses a package whose provider is not a shared library, leaving nothing behind', () => {
    const file = storedZip(path.join(freshDir('bad'), `onnxruntime_gpu-${ORT_VERSION}-cp311-cp311-manylinux_2_28_x86_64.whl`), {
      [`onnxruntime/capi/${PROVIDER}`]: 'not a library',
      [`onnxruntime/capi/${SHARED}`]: FAKE_SHARED,
    });
    const into = freshDir('into');
    const r = setupGpu('--from', file, '--into', into);
    expect(r.status).toBe(1);
    expect(r.lines).toHaveLength(1);
    expect(r.stderr).toContain(`${PROVIDER} in it is not a usable library (not an ELF file`);
    expect(fs.readdirSync(into)).toEqual([]);
  });

  it('--check ends in one line and exit 1 when the libraries are missing', () => {
    const into = freshDir('into');
    setupGpu('--from', fakeWheel(ORT_VERSION), '--into', into);
    const r = setupGpu('--check', '--into', into);
    expect(r.status).toBe(1);
    expect(r.lines).toHaveLength(1);
    expect(r.stderr).toMatch(/^setup:gpu: .*needs libcudart\.so\.99 \(CUDA 99\) and libcudnn\.so\.9 \(cuDNN 9\); found /);
  });

  it('--into needs --from', () => {
    const r = setupGpu('--into', freshDir('into'));
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('--into needs --from');
  });
});

// Without a GPU, whatever is or is not installed in node_modules, --check cannot pass.
const hasGpu = fs.existsSync('/dev/nvidiactl');
it.skipIf(hasGpu)('--check on a machine without a GPU ends in a one-line reason, exit 1', () => {
  const r = setupGpu('--check');
  expect(r.status).toBe(1);
  expect(r.lines).toHaveLength(1);
  expect(r.stderr).toMatch(/^setup:gpu: /);
});

// The real onnxruntime-gpu wheel of onnxruntime-node's version (246 MB; .ci/run downloads it).
function realWheel(): string | undefined {
  if (process.env.HINDSIGHT_ORT_GPU_WHEEL) return process.env.HINDSIGHT_ORT_GPU_WHEEL;
  const cache = path.join(ROOT, '.cache');
  const name = fs.existsSync(cache) ? fs.readdirSync(cache).find((f) => f.startsWith(`onnxruntime_gpu-${ORT_VERSION}-`) && f.endsWith('.whl')) : undefined;
  return name && path.join(cache, name);
}
const wheel = realWheel();
if (!wheel) {
  process.stderr.write(`setup-gpu.test: skipping the real-wheel test: set HINDSIGHT_ORT_GPU_WHEEL or put onnxruntime_gpu-${ORT_VERSION}-*.whl in .cache/ ` +
    `(python3 -m pip download --no-deps --only-binary=:all: onnxruntime-gpu==${ORT_VERSION} -d .cache)\n`);
}
it.skipIf(!wheel)(`installs the real onnxruntime-gpu ${ORT_VERSION} wheel, a CUDA 13 provider`, () => {
  const into = freshDir('real');
  const r = setupGpu('--from', wheel!, '--into', into);
  expect(r.status, r.stderr).toBe(0);
  const elf = libs.readElfDynamic(path.join(into, PROVIDER));
  expect(elf.machine).toBe('x86-64');
  // ONNX Runtime 1.30's GPU builds are CUDA 13 builds (1.23's were CUDA 12).
  expect(elf.needed).toContain('libcudart.so.13');
  expect(elf.needed).toContain('libcuda.so.1');
});
