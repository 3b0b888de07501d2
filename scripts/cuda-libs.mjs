// What ONNX Runtime's CUDA provider links against, and whether this machine's dynamic loader
// can find it: the link check of `npm run setup:gpu` (scripts/setup-gpu.mjs).
//
// ONNX Runtime's own error when the provider fails to load is dlopen's first missing library,
// one at a time, and says nothing of CUDA versions; this check names them all in one line,
// with the CUDA and cuDNN majors they belong to and what the machine has instead.
//
// Plain ESM with Node built-ins only: it runs before (or without) anything else is installed.
// Everything that decides a message is a pure function of the folders, the `ldconfig -p` text
// and the file lists it is given, so the tests drive it without a GPU or CUDA.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';

// ---------------------------------------------------------------------------------------------
// ELF: just enough to list DT_NEEDED of a 64-bit little-endian shared library.

export class ElfError extends Error {}

const PT_LOAD = 1;
const PT_DYNAMIC = 2;
const SHT_DYNAMIC = 6;
const DT_NULL = 0;
const DT_NEEDED = 1;
const DT_STRTAB = 5;
const DT_STRSZ = 10;
const DT_SONAME = 14;
const DT_RPATH = 15;
const DT_RUNPATH = 29;
const EM_X86_64 = 62;

/**
 * Reads `file`'s dynamic section: { machine, needed, soname, runpath, rpath }. Reads only the
 * headers and the dynamic tables (the CUDA provider is 272 MB). Throws one ElfError, naming the
 * file, for anything that is not a whole 64-bit little-endian ELF with a dynamic section.
 */
export function readElfDynamic(file) {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const read = (offset, length, what) => {
      if (offset < 0 || length < 0 || offset + length > size) {
        throw new ElfError(`${file}: truncated ELF file (its ${what} lies past the end, at ${offset}+${length} of ${size} bytes)`);
      }
      const buf = Buffer.alloc(length);
      fs.readSync(fd, buf, 0, length, offset);
      return buf;
    };
    if (size < 64) throw new ElfError(`${file}: not an ELF file (${size} bytes)`);
    const h = read(0, 64, 'header');
    if (h.readUInt32BE(0) !== 0x7f454c46) throw new ElfError(`${file}: not an ELF file (no \\x7fELF magic)`);
    if (h[4] !== 2 || h[5] !== 1) throw new ElfError(`${file}: not a 64-bit little-endian ELF file`);
    const u64 = (b, o) => Number(b.readBigUInt64LE(o));
    const machine = h.readUInt16LE(18);
    const phoff = u64(h, 0x20);
    const shoff = u64(h, 0x28);
    const phentsize = h.readUInt16LE(0x36);
    const phnum = h.readUInt16LE(0x38);
    const shentsize = h.readUInt16LE(0x3a);
    const shnum = h.readUInt16LE(0x3c);

    // Where the dynamic entries and their string table lie in the file. Section headers say it
    // directly (.dynamic and the .dynstr its sh_link names); a library stripped of them still
    // has the program headers the loader itself uses, where DT_STRTAB is an address to map back.
    let dyn; // { offset, size, strtab?: { offset, size } }
    if (shoff && shnum) {
      const sh = read(shoff, shnum * shentsize, 'section header table');
      for (let i = 0; i < shnum; i++) {
        const o = i * shentsize;
        if (sh.readUInt32LE(o + 4) !== SHT_DYNAMIC) continue;
        const link = sh.readUInt32LE(o + 40);
        const lo = link * shentsize;
        if (link >= shnum) throw new ElfError(`${file}: corrupt ELF file (.dynamic links to section ${link} of ${shnum})`);
        dyn = { offset: u64(sh, o + 24), size: u64(sh, o + 32), strtab: { offset: u64(sh, lo + 24), size: u64(sh, lo + 32) } };
        break;
      }
    }
    const loads = [];
    if (!dyn && phoff && phnum) {
      const ph = read(phoff, phnum * phentsize, 'program header table');
      for (let i = 0; i < phnum; i++) {
        const o = i * phentsize;
        const type = ph.readUInt32LE(o);
        const seg = { offset: u64(ph, o + 8), vaddr: u64(ph, o + 16), filesz: u64(ph, o + 32) };
        if (type === PT_LOAD) loads.push(seg);
        if (type === PT_DYNAMIC) dyn = { offset: seg.offset, size: seg.filesz };
      }
    }
    if (!dyn) throw new ElfError(`${file}: no dynamic section (a static executable, or not a shared library)`);

    const d = read(dyn.offset, dyn.size, 'dynamic section');
    const entries = [];
    let strtabAddr;
    let strsz;
    for (let o = 0; o + 16 <= d.length; o += 16) {
      const tag = Number(d.readBigInt64LE(o));
      const val = u64(d, o + 8);
      if (tag === DT_NULL) break;
      if (tag === DT_STRTAB) strtabAddr = val;
      else if (tag === DT_STRSZ) strsz = val;
      else entries.push([tag, val]);
    }
    let strtab = dyn.strtab;
    if (!strtab) {
      const seg = loads.find((s) => strtabAddr >= s.vaddr && strtabAddr < s.vaddr + s.filesz);
      if (strtabAddr === undefined || !seg) throw new ElfError(`${file}: corrupt ELF file (DT_STRTAB not in any loaded segment)`);
      strtab = { offset: strtabAddr - seg.vaddr + seg.offset, size: strsz ?? seg.vaddr + seg.filesz - strtabAddr };
    }
    const strings = read(strtab.offset, strtab.size, 'dynamic string table');
    const str = (i) => {
      const end = strings.indexOf(0, i);
      if (i >= strings.length || end < 0) throw new ElfError(`${file}: corrupt ELF file (string ${i} outside its string table)`);
      return strings.toString('utf8', i, end);
    };
    const out = { machine: machine === EM_X86_64 ? 'x86-64' : `e_machine ${machine}`, needed: [], soname: null, runpath: null, rpath: null };
    for (const [tag, val] of entries) {
      if (tag === DT_NEEDED) out.needed.push(str(val));
      else if (tag === DT_SONAME) out.soname = str(val);
      else if (tag === DT_RUNPATH) out.runpath = str(val);
      else if (tag === DT_RPATH) out.rpath = str(val);
    }
    return out;
  } finally {
    fs.closeSync(fd);
  }
}

// ---------------------------------------------------------------------------------------------
// What the provider needs.

/**
 * The cuDNN major of ONNX Runtime's GPU packages, by ONNX Runtime version (first match wins).
 * Not read from the provider: cuDNN is not a DT_NEEDED of it but dlopen()ed at run time, by a
 * name ("libcudnn.so" in its strings) that does not carry the major. ONNX Runtime's release
 * notes give it: 1.19 moved the CUDA 12 packages to cuDNN 9; 1.30's are CUDA 13 + cuDNN 9.
 */
export const CUDNN_MAJOR_BY_ORT = [
  { from: [1, 19], cudnn: 9 },
  { from: [1, 0], cudnn: 8 },
];

export function cudnnMajorFor(ortVersion) {
  const [major, minor] = ortVersion.split('.').map(Number);
  const row = CUDNN_MAJOR_BY_ORT.find(({ from }) => major > from[0] || (major === from[0] && minor >= from[1]));
  return row ? row.cudnn : null;
}

// Libraries every glibc Linux has, and the provider's own companion (loaded by ONNX Runtime
// itself, from its own folder): not worth a search, and a fake test folder would lack them.
const BASE_LIBS = /^(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux-x86-64|libonnxruntime[\w]*)\.so/;
const DRIVER = 'libcuda.so.1';

/** The sonames to look for: the provider's non-base DT_NEEDED, plus cuDNN, and the majors. */
export function requiredLibs(needed, ortVersion) {
  const runtime = needed.filter((n) => !BASE_LIBS.test(n) && n !== DRIVER);
  // libcudart first: it is the one that says which CUDA the rest belong to.
  runtime.sort((a, b) => Number(b.startsWith('libcudart.')) - Number(a.startsWith('libcudart.')));
  const cudart = runtime.find((n) => n.startsWith('libcudart.so.'));
  const cudnnMajor = cudnnMajorFor(ortVersion);
  return {
    runtime,
    cudaMajor: cudart ? Number(cudart.split('.so.')[1].split('.')[0]) : null,
    cudnn: cudnnMajor ? `libcudnn.so.${cudnnMajor}` : null,
    cudnnMajor,
    driver: needed.includes(DRIVER) ? DRIVER : null,
  };
}

// ---------------------------------------------------------------------------------------------
// Where the loader looks, and where CUDA libraries often are without it looking there.

/** `ldconfig -p` text → Map soname → [full paths] (x86-64 entries only). */
export function parseLdconfig(text) {
  const map = new Map();
  for (const line of (text ?? '').split('\n')) {
    const m = /^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(.+?)\s*$/.exec(line);
    if (!m || !m[2].includes('x86-64')) continue;
    if (!map.has(m[1])) map.set(m[1], []);
    map.get(m[1]).push(m[3]);
  }
  return map;
}

/**
 * Finds each soname in `names`: `loader` is where the dynamic loader would find it (the first
 * of `loaderDirs`, i.e. LD_LIBRARY_PATH then the default folders, or the ldconfig cache);
 * `elsewhere` lists `offPathDirs` holding it that the loader does not search.
 */
export function searchLibs(names, { loaderDirs = [], ldconfigText = '', offPathDirs = [] }) {
  const cache = parseLdconfig(ldconfigText);
  const has = (dir, name) => fs.existsSync(path.join(dir, name));
  const loaderSet = new Set([...loaderDirs, ...[...cache.values()].flat().map((p) => path.dirname(p))].map((d) => path.resolve(d)));
  return names.map((name) => {
    let loader = loaderDirs.find((dir) => has(dir, name));
    if (!loader && cache.has(name)) loader = path.dirname(cache.get(name)[0]);
    const elsewhere = loader ? [] : offPathDirs.filter((dir) => !loaderSet.has(path.resolve(dir)) && has(dir, name));
    return { name, loader: loader ?? null, elsewhere };
  });
}

/**
 * The CUDA runtimes and cuDNNs present in `dirs` (and the ldconfig cache), whatever their
 * major: [{ what: 'CUDA'|'cuDNN', version: '12.4'|'12', soname, dir }], for "found …".
 */
export function installedCuda(dirs, ldconfigText = '') {
  const found = [];
  const seen = new Set();
  const cached = [...parseLdconfig(ldconfigText).values()].flat().map((p) => path.dirname(p));
  for (const dir of [...dirs, ...cached]) {
    let files;
    try {
      files = fs.readdirSync(dir);
    } catch {
      continue;
    }
    for (const [what, base] of [['CUDA', 'libcudart.so.'], ['cuDNN', 'libcudnn.so.']]) {
      // The soname (libcudart.so.12; CUDA 11's is libcudart.so.11.0) gives the major; the real
      // file beside it (libcudart.so.12.4.127) or a folder named cuda-12.4 gives the minor too.
      for (const soname of files.filter((f) => f.startsWith(base) && /^\d+(\.0)?$/.test(f.slice(base.length)))) {
        const major = soname.slice(base.length).split('.')[0];
        const key = `${what} ${major} ${path.resolve(dir)}`;
        if (seen.has(key)) continue;
        seen.add(key);
        const full = files.map((f) => new RegExp(`^${base.replace(/\./g, '\\.')}(${major}\\.\\d+)`).exec(f)).find(Boolean);
        const folder = what === 'CUDA' ? new RegExp(`cuda-(${major}\\.\\d+)`).exec(dir) : null;
        found.push({ what, version: full?.[1] ?? folder?.[1] ?? major, soname, dir });
      }
    }
  }
  return found;
}

/** Quotes a word for a POSIX shell only when it needs it. */
const shellWord = (s) => (/^[\w@%+=:,./-]*$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/**
 * The link check's verdict, as one line: { ok, line, exportLine? }. `ok` means every library is
 * where the loader finds it (the CUDA session check comes next). Pure: everything it looks at
 * is in its argument (folders are listed, nothing else of the machine is read).
 *   ortVersion, needed (the provider's DT_NEEDED), loaderDirs, ldconfigText, offPathDirs,
 *   ldLibraryPath (the current value, kept at the end of the printed export line)
 */
export function linkReport({ ortVersion, needed, loaderDirs = [], ldconfigText = '', offPathDirs = [], ldLibraryPath = '' }) {
  const req = requiredLibs(needed, ortVersion);
  const wanted = [...req.runtime, ...(req.cudnn ? [req.cudnn] : [])];
  const results = searchLibs([...wanted, ...(req.driver ? [req.driver] : [])], { loaderDirs, ldconfigText, offPathDirs });
  const byName = new Map(results.map((r) => [r.name, r]));
  const missing = wanted.filter((n) => !byName.get(n).loader && !byName.get(n).elsewhere.length);
  const offPath = results.filter((r) => !r.loader && r.elsewhere.length);
  const driver = req.driver ? byName.get(req.driver) : null;
  const driverMissing = driver && !driver.loader && !driver.elsewhere.length;

  const cudaPart = req.runtime.length ? `${req.runtime.join(', ')}${req.cudaMajor ? ` (CUDA ${req.cudaMajor})` : ''}` : '';
  const cudnnPart = req.cudnn ? `${req.cudnn} (cuDNN ${req.cudnnMajor})` : '';
  const needs = `the CUDA provider of onnxruntime-node ${ortVersion} needs ${[cudaPart, cudnnPart].filter(Boolean).join(' and ')}`;
  const noDriver = 'the NVIDIA driver is missing (no libcuda.so.1 where the loader looks)';

  if (missing.length) {
    const present = installedCuda([...loaderDirs, ...offPathDirs], ldconfigText);
    const show = (what) => {
      const rows = present.filter((p) => p.what === what);
      return rows.length ? rows.map((p) => `${what} ${p.version} (${p.soname} in ${p.dir})`).join(', ') : `no ${what === 'CUDA' ? 'CUDA runtime' : 'cuDNN'}`;
    };
    const notFound = missing.length < wanted.length ? `; not found: ${missing.join(', ')}` : '';
    const line = `${driverMissing ? `${noDriver}, and ` : ''}${needs}${notFound}; found ${show('CUDA')}, ${show('cuDNN')}`;
    return { ok: false, line };
  }
  if (offPath.length) {
    // One folder per library, preferring folders already chosen (nvidia/cu13/lib holds them all).
    const dirs = [];
    for (const r of offPath) if (!r.elsewhere.some((d) => dirs.includes(d))) dirs.push(r.elsewhere[0]);
    const exportLine = `export LD_LIBRARY_PATH=${shellWord([...dirs, ...(ldLibraryPath ? [ldLibraryPath] : [])].join(':'))}`;
    const where = offPath.map((r) => `${r.name} in ${r.elsewhere.find((d) => dirs.includes(d))}`).join(', ');
    const line = `${driverMissing ? `${noDriver}; also, ` : ''}${needs}, which are here but not where the loader looks (${where}); run: ${exportLine}`;
    return { ok: false, line, exportLine };
  }
  if (driverMissing) return { ok: false, line: `${noDriver}; the CUDA and cuDNN libraries the provider needs are all found` };
  return { ok: true, line: `${needs}: all found where the loader looks` };
}

// ---------------------------------------------------------------------------------------------
// This machine's folders (the impure part).

/** Expands `*` within path segments (no `**`); only existing folders come back. */
export function expandDirs(pattern) {
  const parts = pattern.split('/').filter(Boolean);
  let dirs = ['/'];
  for (const part of parts) {
    const next = [];
    for (const dir of dirs) {
      if (!part.includes('*')) {
        next.push(path.join(dir, part));
        continue;
      }
      const re = new RegExp(`^${part.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);
      let names = [];
      try {
        names = fs.readdirSync(dir).filter((n) => re.test(n)).sort();
      } catch {
        // unreadable or absent: nothing there
      }
      for (const n of names) next.push(path.join(dir, n));
    }
    dirs = next;
  }
  return dirs.filter((d) => {
    try {
      return fs.statSync(d).isDirectory();
    } catch {
      return false;
    }
  });
}

function run(cmd, args) {
  try {
    const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 20_000 });
    return r.status === 0 ? r.stdout : null;
  } catch {
    return null;
  }
}

/** Python's site-packages folders: its own answer, and the usual places if there is no python3. */
function sitePackages() {
  const out = run('python3', ['-c', 'import site, json; print(json.dumps(site.getsitepackages() + [site.getusersitepackages()]))']);
  let dirs = [];
  try {
    dirs = JSON.parse(out ?? '[]');
  } catch {
    // an odd python3: the usual places below still count
  }
  const home = os.homedir();
  for (const p of ['/usr/lib/python3/dist-packages', '/usr/local/lib/python3*/site-packages', '/usr/local/lib/python3*/dist-packages',
    `${home}/.local/lib/python3*/site-packages`, '/opt/conda/lib/python3*/site-packages', `${process.env.VIRTUAL_ENV ?? '/nonexistent'}/lib/python3*/site-packages`,
    `${process.env.CONDA_PREFIX ?? '/nonexistent'}/lib/python3*/site-packages`]) dirs.push(...expandDirs(p));
  return [...new Set(dirs.map((d) => path.resolve(d)))];
}

/** What `linkReport` needs, from this machine: its loader folders, ldconfig cache and the rest. */
export function machineSearchPlaces(env = process.env) {
  const ldLibraryPath = env.LD_LIBRARY_PATH ?? '';
  let ldconfigText = null;
  for (const cmd of ['ldconfig', '/sbin/ldconfig', '/usr/sbin/ldconfig']) {
    ldconfigText = run(cmd, ['-p']);
    if (ldconfigText !== null) break;
  }
  const cudaDirs = (glob) => [...expandDirs(`${glob}/lib64`), ...expandDirs(`${glob}/targets/x86_64-linux/lib`)];
  // The loader searches LD_LIBRARY_PATH, then its cache (what `ldconfig -p` prints), then the
  // trusted system folders. /usr/local/cuda*/lib64 is searched only when ld.so.conf lists it
  // (NVIDIA's packages add it), which the cache then shows; without ldconfig to ask, count
  // /usr/local/cuda/lib64 as searched, as those packages set it up.
  const loaderDirs = [
    ...ldLibraryPath.split(':').filter(Boolean),
    '/lib/x86_64-linux-gnu', '/usr/lib/x86_64-linux-gnu', '/lib64', '/usr/lib64', '/lib', '/usr/lib',
    ...(ldconfigText === null ? cudaDirs('/usr/local/cuda') : []),
  ];
  const offPathDirs = [
    ...sitePackages().flatMap((sp) => expandDirs(`${sp}/nvidia/*/lib`)),
    ...cudaDirs('/usr/local/cuda'),
    ...cudaDirs('/usr/local/cuda-*'),
  ];
  return { loaderDirs, ldconfigText: ldconfigText ?? '', offPathDirs, ldLibraryPath };
}
