/**
 * Import benchmark (`npm run bench:import [-- --mb 200 --keep]`).
 *
 * (`npm run bench:import -- --long-only` for the long-conversation table alone.)
 * 1. Generates a synthetic ChatGPT `conversations.json` of at least `--mb` MB (default 200) in
 *    a temp directory, with varied content: regenerated and edited branches, hidden and custom-
 *    instruction messages, code tool calls and outputs, browsing quotes, images, reasoning,
 *    citation markers, long and non-ASCII texts. A seeded generator makes it reproducible.
 * 2. Measures, each in its own child process so that peak RSS is the child's alone:
 *    - stream: `openExport` + iterating every conversation (sha256, detection, parsing and
 *      conversion into turns), as `hindsight import` does before the store;
 *    - JSON.parse: `readFileSync` + `JSON.parse` of the same file, the naive reference.
 * 3. Prints both and the ratios.
 * 4. One long conversation of 1k, 8k, 16k and 32k turns, imported into a fresh database, each
 *    size in its own child: time, peak RSS and database size, which must all grow linearly
 *    with the turns (a sample keeps a span over its turns, never a copy of its context).
 *    `--long-only` runs just this table.
 * Not part of `npm test`.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface Measure {
  ms: number;
  maxRssMiB: number;
  conversations: number;
  turns?: number;
  alternatives?: number;
  warnings?: number;
}

const thisFile = fileURLToPath(import.meta.url);

// ---- the child side ----------------------------------------------------------------------

/** Imports `file` into a new database beside it, as `hindsight import` does; prints time, peak RSS and size. */
async function importChild(file: string): Promise<void> {
  const { Workspace } = await import('../src-main/workspace/workspace.js');
  const dbPath = `${file}.db`;
  const start = performance.now();
  const ws = await Workspace.open(dbPath);
  const summary = await ws.importFiles([file]);
  ws.close();
  const ms = performance.now() - start;
  const usage = process.resourceUsage();
  const cpuMs = (usage.userCPUTime + usage.systemCPUTime) / 1000;
  const measure = { ms, cpuMs, maxRssMiB: usage.maxRSS / 1024, dbBytes: statSync(dbPath).size, turns: summary.turns, samples: summary.samples };
  process.stdout.write(JSON.stringify(measure) + '\n');
}

async function child(mode: string, file: string): Promise<void> {
  if (mode === 'import') return importChild(file);
  const start = performance.now();
  let result: Omit<Measure, 'ms' | 'maxRssMiB'>;
  if (mode === 'stream') {
    const { openExport } = await import('../src-main/import/importer.js');
    const opened = await openExport(file);
    let conversations = 0;
    let turns = 0;
    let alternatives = 0;
    for await (const c of opened.conversations()) {
      conversations++;
      turns += c.turns.length;
      alternatives += c.alternatives.length;
    }
    result = { conversations, turns, alternatives, warnings: opened.warnings.length };
  } else {
    const data = JSON.parse(readFileSync(file, 'utf8')) as unknown[];
    result = { conversations: data.length };
  }
  const ms = performance.now() - start;
  // resourceUsage().maxRSS is in KiB on Linux and macOS.
  const measure: Measure = { ms, maxRssMiB: process.resourceUsage().maxRSS / 1024, ...result };
  process.stdout.write(JSON.stringify(measure) + '\n');
}

// ---- the synthetic export ----------------------------------------------------------------

/** mulberry32: a tiny seeded PRNG, so every run benchmarks the same file. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = (
  'the a model reply user python list sort function error because however therefore data file import stream memory ' +
  'branch tree node parent child answer question thanks please again wrong instead exactly test value result async ' +
  'await promise buffer token parser json array object string number boolean null undefined config option default ' +
  'café naïve résumé 東京 データ 🙂 🚀 Ελληνικά русский'
).split(' ');

class Generator {
  readonly random = rng(42);
  private nextId = 0;

  pick<T>(list: readonly T[]): T {
    return list[Math.floor(this.random() * list.length)]!;
  }

  chance(p: number): boolean {
    return this.random() < p;
  }

  id(): string {
    return `n${(this.nextId++).toString(36)}-${Math.floor(this.random() * 1e9).toString(36)}`;
  }

  words(n: number): string {
    const out: string[] = [];
    for (let i = 0; i < n; i++) out.push(this.pick(WORDS));
    return out.join(' ');
  }

  /** Mostly short paragraphs, sometimes a long essay (up to ~40 KB). */
  text(): string {
    const paragraphs = this.chance(0.05) ? 40 + Math.floor(this.random() * 60) : 1 + Math.floor(this.random() * 6);
    const out: string[] = [];
    for (let i = 0; i < paragraphs; i++) out.push(this.words(20 + Math.floor(this.random() * 100)) + '.');
    return out.join('\n\n');
  }
}

interface Msg {
  role: string;
  content: Record<string, unknown>;
  recipient?: string;
  name?: string;
  metadata?: Record<string, unknown>;
  status?: string;
  channel?: string;
}

/** One conversation as the ChatGPT export writes it; returns its JSON text. */
function conversation(g: Generator, index: number): string {
  const mapping: Record<string, unknown> = {};
  let time = 1_700_000_000 + index * 3600;
  const add = (parent: string | null, msg: Msg | null): string => {
    const id = g.id();
    mapping[id] = {
      id,
      message: msg && {
        id,
        author: { role: msg.role, name: msg.name ?? null, metadata: {} },
        create_time: (time += 7.25),
        update_time: null,
        content: msg.content,
        status: msg.status ?? 'finished_successfully',
        end_turn: true,
        weight: 1,
        metadata: msg.metadata ?? {},
        recipient: msg.recipient ?? 'all',
        channel: msg.channel ?? null,
      },
      parent,
      children: [],
    };
    if (parent) (mapping[parent] as { children: string[] }).children.push(id);
    return id;
  };
  const text = (t: string) => ({ content_type: 'text', parts: [t] });

  const root = add(null, null);
  let tip = add(root, { role: 'system', content: text(''), metadata: { is_visually_hidden_from_conversation: true } });
  if (g.chance(0.3)) {
    tip = add(tip, {
      role: 'user',
      content: { content_type: 'user_editable_context', user_profile: g.words(30), user_instructions: g.words(30) },
      metadata: { is_visually_hidden_from_conversation: true },
    });
  }
  const exchanges = 2 + Math.floor(g.random() * 12);
  for (let i = 0; i < exchanges; i++) {
    const user: Msg = g.chance(0.1)
      ? {
          role: 'user',
          content: {
            content_type: 'multimodal_text',
            parts: [{ content_type: 'image_asset_pointer', asset_pointer: `file-service://file-${g.id()}`, size_bytes: 123456, width: 800, height: 600 }, g.text()],
          },
        }
      : { role: 'user', content: text(g.text()) };
    // An edited question leaves an abandoned branch behind.
    if (g.chance(0.1)) {
      const abandoned = add(tip, { role: 'user', content: text(g.text()) });
      add(abandoned, { role: 'assistant', content: text(g.text()), status: g.chance(0.5) ? 'in_progress' : 'finished_successfully' });
    }
    tip = add(tip, user);
    if (g.chance(0.15)) {
      const call = add(tip, { role: 'assistant', content: { content_type: 'code', language: 'python', text: g.words(40) }, recipient: 'python' });
      tip = add(call, { role: 'tool', name: 'python', content: { content_type: 'execution_output', text: g.words(60) } });
    }
    if (g.chance(0.1)) {
      const call = add(tip, { role: 'assistant', content: text(`search("${g.words(4)}")`), recipient: 'browser' });
      tip = add(call, { role: 'tool', name: 'browser', content: { content_type: 'tether_quote', url: 'https://example.com/a', domain: 'example.com', title: g.words(5), text: g.text() } });
    }
    if (g.chance(0.2)) {
      tip = add(tip, { role: 'assistant', content: { content_type: 'thoughts', thoughts: [{ summary: g.words(5), content: g.text() }] } });
      tip = add(tip, { role: 'assistant', content: { content_type: 'reasoning_recap', content: 'Thought for 9 seconds' } });
    }
    // A regenerated reply: an abandoned sibling of the kept one.
    if (g.chance(0.15)) add(tip, { role: 'assistant', content: text(g.text()) });
    const marker = '\ue200cite\ue202turn0search1\ue201';
    const cited = g.chance(0.2);
    tip = add(tip, {
      role: 'assistant',
      content: text(cited ? `${g.text()} ${marker}. More 【3†source】.` : g.text()),
      metadata: cited ? { content_references: [{ matched_text: marker, items: [{ url: 'https://example.com', title: 'Example' }] }] } : {},
    });
  }
  if (g.chance(0.02)) (mapping[tip] as { message: Msg }).message.content = { content_type: 'some_future_type', blob: 1 };
  const id = `conv-${index}`;
  return JSON.stringify({
    title: g.words(4),
    create_time: 1_700_000_000 + index * 3600,
    update_time: time,
    mapping,
    moderation_results: [],
    current_node: g.chance(0.02) ? undefined : tip,
    conversation_id: id,
    id,
    default_model_slug: 'gpt-4o',
  });
}

/** One ChatGPT conversation of `turns` alternating user and assistant messages (~200 bytes each). */
function longConversation(turns: number): string {
  const g = new Generator();
  const mapping: Record<string, unknown> = {};
  let parent: string | null = null;
  for (let i = 0; i <= turns; i++) {
    const id = `m${i}`;
    const role = i % 2 === 1 ? 'user' : 'assistant';
    mapping[id] = {
      id,
      message: i === 0 ? null : { id, author: { role, metadata: {} }, create_time: 1_700_000_000 + i, content: { content_type: 'text', parts: [g.words(25)] }, status: 'finished_successfully', metadata: {}, recipient: 'all' },
      parent,
      children: i < turns ? [`m${i + 1}`] : [],
    };
    parent = id;
  }
  return JSON.stringify([{ title: 'one long conversation', create_time: 1_700_000_000, mapping, current_node: parent, conversation_id: `long-${turns}`, id: `long-${turns}` }]);
}

interface ImportMeasure {
  ms: number;
  /** CPU time of the whole child (start-up included): steadier than wall time on a busy machine. */
  cpuMs: number;
  maxRssMiB: number;
  dbBytes: number;
  turns: number;
  samples: number;
}

/** The long-conversation table: each size imported in its own child process. */
function longConversationTable(dir: string): void {
  console.log('\none long conversation (ChatGPT export) imported into a new database:');
  console.log('| turns | file | time | CPU time | peak RSS | database |');
  console.log('|---:|---:|---:|---:|---:|---:|');
  for (const turns of [1_000, 8_000, 16_000, 32_000]) {
    const file = path.join(dir, `long-${turns}.json`);
    writeFileSync(file, longConversation(turns));
    const m = measure('import', file);
    if (typeof m === 'string') throw new Error(m);
    const { ms, cpuMs, maxRssMiB, dbBytes } = m as unknown as ImportMeasure;
    const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
    console.log(`| ${turns.toLocaleString('en')} | ${mib(statSync(file).size)} | ${(ms / 1000).toFixed(2)} s | ${(cpuMs / 1000).toFixed(2)} s | ${maxRssMiB.toFixed(0)} MiB | ${mib(dbBytes)} |`);
  }
}

function generate(file: string, targetBytes: number): { bytes: number; conversations: number } {
  const g = new Generator();
  const fd = openSync(file, 'w');
  let bytes = 0;
  let count = 0;
  const write = (s: string) => {
    bytes += writeSync(fd, s);
  };
  write('[');
  while (bytes < targetBytes) {
    write((count ? ',\n' : '\n') + conversation(g, count));
    count++;
  }
  write('\n]\n');
  closeSync(fd);
  return { bytes, conversations: count };
}

// ---- the parent side ---------------------------------------------------------------------

/** Runs one measurement in a child; a failure (JSON.parse cannot take a string over ~512 MiB) is returned as its message. */
function measure(mode: string, file: string): Measure | string {
  const run = spawnSync(process.execPath, ['--import', 'tsx', thisFile, '--child', mode, file], {
    encoding: 'utf8',
    maxBuffer: 1 << 20,
  });
  if (run.status !== 0) {
    const reason = run.stderr.split('\n').find((line) => /Error/.test(line)) ?? `exit status ${run.status}`;
    return `${mode} failed: ${reason.trim()}`;
  }
  return JSON.parse(run.stdout.trim().split('\n').pop()!) as Measure;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === '--child') return child(args[1]!, args[2]!);
  const mbIndex = args.indexOf('--mb');
  const targetMb = mbIndex >= 0 ? Number(args[mbIndex + 1]) : 200;
  const keep = args.includes('--keep');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hindsight-bench-import-'));
  const file = path.join(dir, 'conversations.json');
  try {
    if (args.includes('--long-only')) return longConversationTable(dir);
    const t = performance.now();
    const generated = generate(file, targetMb * 1024 * 1024);
    const mib = statSync(file).size / 1024 / 1024;
    console.log(`generated ${file}: ${mib.toFixed(1)} MiB, ${generated.conversations} conversations in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    const stream = measure('stream', file);
    if (typeof stream === 'string') throw new Error(stream);
    const parse = measure('parse', file);
    const row = (name: string, m: Measure) =>
      `${name.padEnd(28)} ${(m.ms / 1000).toFixed(2).padStart(7)} s ${(mib / (m.ms / 1000)).toFixed(1).padStart(7)} MiB/s  peak RSS ${m.maxRssMiB.toFixed(0).padStart(5)} MiB`;
    console.log(row('stream (openExport+convert)', stream));
    console.log(
      `streamed ${stream.conversations} conversations, ${stream.turns} turns, ${stream.alternatives} branch alternatives, ${stream.warnings} warnings`,
    );
    if (typeof parse === 'string') {
      console.log(`JSON.parse (readFileSync)    ${parse}`);
      longConversationTable(dir);
      return;
    }
    console.log(row('JSON.parse (readFileSync)', parse));
    if (stream.conversations !== parse.conversations) {
      throw new Error(`streamed ${stream.conversations} conversations but JSON.parse saw ${parse.conversations}`);
    }
    console.log(`time ratio stream / JSON.parse: ${(stream.ms / parse.ms).toFixed(2)}x`);
    console.log(`peak RSS ratio stream / JSON.parse: ${(stream.maxRssMiB / parse.maxRssMiB).toFixed(2)}x`);
    longConversationTable(dir);
  } finally {
    if (keep) console.log(`kept ${file}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

await main();
