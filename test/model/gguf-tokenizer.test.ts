// The tokenizer a GGUF's metadata describes (src-main/model/gguf/tokenizer-json.ts through
// ChatTokenizer.load): real Qwen2.5, Llama 3 and Mistral Nemo vocabularies stored as llama.cpp's converter
// stores them (tokens, token types, merges, tokenizer.ggml.pre) encode like their own
// tokenizer.json; a hand-made SentencePiece vocabulary with scores merges by score and falls
// back to bytes; the chat template, BOS/EOS and add-BOS come from the metadata.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { bool, str, u32, writeGguf, type MetaValue } from './gguf-writer.js';
import { realChatTemplate, realTokenizerFile, writeRealTokenizer, type RealTokenizer } from '../../tools/real-tokenizers.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-gguf-tok-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const TEXTS = [
  'Hello world! The year 2024 had 366 days; 1234567 is a number.',
  "I'm sure they'll say DON'T, we've    spaced   out.\n\n\tTabbed\r\nline",
  'Caf\u00e9 and Cafe\u0301 (composed and decomposed), 日本語のテキスト, emoji 🎉👍🏽',
  '<|im_start|>user\nhi<|im_end|>',
  '  leading spaces and trailing   ',
  'def f(x):\n    return x ** 2  # code\n',
];

/** The metadata llama.cpp's converter writes for a byte-level BPE tokenizer.json. */
function gpt2Metadata(name: RealTokenizer, pre: string, bos: string | undefined, eos: string, eot?: string): Record<string, MetaValue> {
  const tok = JSON.parse(fs.readFileSync(realTokenizerFile(name, 'tokenizer.json'), 'utf8')) as {
    model: { vocab: Record<string, number>; merges: (string | [string, string])[] };
    added_tokens: { id: number; content: string; special: boolean }[];
  };
  const size = [...Object.values(tok.model.vocab), ...tok.added_tokens.map((a) => a.id)].reduce((a, b) => Math.max(a, b), 0) + 1;
  const tokens: string[] = Array.from({ length: size }, (_, i) => `[PAD${i}]`);
  const types: number[] = new Array(size).fill(5);
  for (const [t, id] of Object.entries(tok.model.vocab)) { tokens[id] = t; types[id] = 1; }
  for (const a of tok.added_tokens) { tokens[a.id] = a.content; types[a.id] = a.special ? 3 : 4; }
  const id = (t: string) => tokens.indexOf(t);
  return {
    'general.architecture': str('qwen2'),
    'tokenizer.ggml.model': str('gpt2'),
    'tokenizer.ggml.pre': str(pre),
    'tokenizer.ggml.tokens': { type: 'array', elem: 'string', value: tokens },
    'tokenizer.ggml.token_type': { type: 'array', elem: 'i32', value: types },
    'tokenizer.ggml.merges': { type: 'array', elem: 'string', value: tok.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m)) },
    ...(bos ? { 'tokenizer.ggml.bos_token_id': u32(id(bos)) } : {}),
    'tokenizer.ggml.eos_token_id': u32(id(eos)),
    ...(eot ? { 'tokenizer.ggml.eot_token_id': u32(id(eot)) } : {}),
    'tokenizer.ggml.add_bos_token': bool(false),
    'tokenizer.chat_template': str(realChatTemplate(name)),
  };
}

describe.each([
  { name: 'qwen2.5' as const, pre: 'qwen2', bos: undefined, eos: '<|im_end|>', eot: '<|endoftext|>' },
  { name: 'llama3' as const, pre: 'llama-bpe', bos: '<|begin_of_text|>', eos: '<|end_of_text|>', eot: '<|eot_id|>' },
  { name: 'mistral-nemo' as const, pre: 'tekken', bos: '<s>', eos: '</s>', eot: undefined },
])('a $name vocabulary (gpt2, pre $pre) from GGUF metadata', ({ name, pre, bos, eos, eot }) => {
  const file = path.join(tmp, `${name}.gguf`);
  writeGguf(file, gpt2Metadata(name, pre, bos, eos, eot));
  const fromGguf = ChatTokenizer.load(file);
  const fromFolder = ChatTokenizer.load(writeRealTokenizer(path.join(tmp, name), name));

  it('encodes and decodes as the model\'s own tokenizer.json', () => {
    for (const text of TEXTS) {
      const ids = fromFolder.encode(text);
      expect(fromGguf.encode(text), text).toEqual(ids);
      expect(fromGguf.decode(ids, false)).toBe(fromFolder.decode(ids, false));
    }
  });

  it('renders the chat template and ends on EOS and EOT', () => {
    const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }];
    expect(fromGguf.chatTemplateSource).toBe('model');
    expect(fromGguf.encodeChat(messages)).toEqual(fromFolder.encodeChat(messages));
    expect(fromGguf.eosTokenIds.sort()).toEqual([eos, eot].filter((t) => t !== undefined).map((t) => fromGguf.tokenToId(t)!).sort());
    expect(fromGguf.bosTokenId).toBe(bos ? fromGguf.tokenToId(bos) : undefined);
  });
});

/**
 * Gemma 3's vocabulary stored as llama.cpp's converter stores a SentencePiece model: its pieces with
 * scores (here −id, the order of Gemma's BPE pieces), its runs of spaces, newlines and tabs as
 * user-defined pieces of score 0, control tokens, `<0xNN>` bytes, no space prefix.
 */
function gemmaMetadata(): Record<string, MetaValue> {
  const tok = JSON.parse(fs.readFileSync(realTokenizerFile('gemma3', 'tokenizer.json'), 'utf8')) as {
    model: { vocab: Record<string, number> }; added_tokens: { id: number; content: string; special: boolean }[];
  };
  const size = [...tok.added_tokens.map((a) => a.id), ...Object.values(tok.model.vocab)].reduce((a, b) => Math.max(a, b), 0) + 1;
  const tokens: string[] = new Array(size).fill('');
  const types: number[] = new Array(size).fill(1);
  const scores: number[] = new Array(size).fill(0);
  for (const [t, id] of Object.entries(tok.model.vocab)) [tokens[id], scores[id], types[id]] = [t, -id, /^<0x[0-9A-F]{2}>$/.test(t) ? 6 : 1];
  for (const a of tok.added_tokens) [tokens[a.id], scores[a.id], types[a.id]] = [a.content, 0, a.special ? 3 : 4];
  return {
    'general.architecture': str('gemma3'),
    'tokenizer.ggml.model': str('llama'),
    'tokenizer.ggml.tokens': { type: 'array', elem: 'string', value: tokens },
    'tokenizer.ggml.scores': { type: 'array', elem: 'f32', value: scores },
    'tokenizer.ggml.token_type': { type: 'array', elem: 'i32', value: types },
    'tokenizer.ggml.bos_token_id': u32(2),
    'tokenizer.ggml.eos_token_id': u32(1),
    'tokenizer.ggml.unknown_token_id': u32(3),
    'tokenizer.ggml.add_space_prefix': bool(false),
    'tokenizer.chat_template': str(realChatTemplate('gemma3')),
  };
}

describe('a Gemma 3 vocabulary (SentencePiece, user-defined runs of whitespace) from GGUF metadata', () => {
  const file = path.join(tmp, 'gemma3.gguf');
  writeGguf(file, gemmaMetadata());
  const fromGguf = ChatTokenizer.load(file);
  const fromFolder = ChatTokenizer.load(writeRealTokenizer(path.join(tmp, 'gemma3'), 'gemma3'));

  it("encodes as its tokenizer.json: the runs of spaces and newlines merge first, as llama.cpp merges user-defined pieces by their score", () => {
    for (const text of TEXTS) expect(fromGguf.encode(text), text).toEqual(fromFolder.encode(text));
    expect(fromGguf.encode('a    b').map((id) => fromGguf.idToToken(id))).toEqual(['a', '▁▁▁▁', 'b']);
  });

  it('renders the chat template after <bos> and ends generation at <end_of_turn> as at <eos>', () => {
    const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }];
    expect(fromGguf.encodeChat(messages)).toEqual(fromFolder.encodeChat(messages));
    expect(fromGguf.eosTokenIds.map((id) => fromGguf.idToToken(id)).sort()).toEqual(['<end_of_turn>', '<eos>']);
  });
}, 120_000);

describe('a SentencePiece (llama) vocabulary with scores', () => {
  // Pieces and scores: a merge's rank is its piece's score (higher first).
  const bytes = Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
  const pieces: [string, number, number][] = [
    ['<unk>', 0, 2], ['<s>', 0, 3], ['</s>', 0, 3], ...bytes.map((b): [string, number, number] => [b, 0, 6]),
    ['▁', -1, 1], ['a', -2, 1], ['b', -3, 1], ['c', -4, 1], ['ab', -5, 1], ['▁ab', -6, 1], ['bc', -0.5, 1], ['▁a', -7, 1], ['abc', -8, 1],
    ['<|user|>', 0, 4],
  ];
  const meta = (extra: Record<string, MetaValue> = {}): Record<string, MetaValue> => ({
    'general.architecture': str('llama'),
    'tokenizer.ggml.model': str('llama'),
    'tokenizer.ggml.tokens': { type: 'array', elem: 'string', value: pieces.map((p) => p[0]) },
    'tokenizer.ggml.scores': { type: 'array', elem: 'f32', value: pieces.map((p) => p[1]) },
    'tokenizer.ggml.token_type': { type: 'array', elem: 'i32', value: pieces.map((p) => p[2]) },
    'tokenizer.ggml.bos_token_id': u32(1),
    'tokenizer.ggml.eos_token_id': u32(2),
    'tokenizer.ggml.unknown_token_id': u32(0),
    ...extra,
  });
  const id = (piece: string) => pieces.findIndex((p) => p[0] === piece);
  const file = path.join(tmp, 'spm.gguf');
  writeGguf(file, meta());
  const tok = ChatTokenizer.load(file);

  it('merges by score: "bc" (−0.5) before "ab" (−5), a space prefix, bytes for the unknown', () => {
    // "abc": b+c merges first (score −0.5 beats ab's −5), then a + bc has no piece, so ▁a + bc.
    expect(tok.encode('abc')).toEqual([id('▁a'), id('bc')]);
    // "ab ab": ▁ab twice (▁ + a → ▁a (−7) loses to a + b → ab (−5), then ▁ + ab → ▁ab).
    expect(tok.encode('ab ab')).toEqual([id('▁ab'), id('▁ab')]);
    // é is not a piece: its UTF-8 bytes C3 A9.
    expect(tok.encode('é')).toEqual([id('▁'), id('<0xC3>'), id('<0xA9>')]);
    expect(tok.decode(tok.encode('ab é abc'))).toBe('ab é abc');
  });

  it('adds BOS by default (add_bos_token unset, as llama.cpp does for llama), not when it is false', () => {
    expect(tok.encode('ab', true)).toEqual([1, id('▁ab')]);
    expect(tok.bosTokenId).toBe(1);
    expect(tok.eosTokenIds).toEqual([2]);
    const off = path.join(tmp, 'spm-nobos.gguf');
    writeGguf(off, meta({ 'tokenizer.ggml.add_bos_token': bool(false), 'tokenizer.ggml.add_space_prefix': bool(false) }));
    expect(ChatTokenizer.load(off).encode('ab', true)).toEqual([id('ab')]);
  });

  it('keeps user-defined tokens whole, and falls back to the plain template without one', () => {
    expect(tok.encode('<|user|>ab')).toEqual([id('<|user|>'), id('▁ab')]);
    expect(tok.chatTemplateSource).toBe('fallback');
  });

  it("a model named Phi-3: special tokens take the whitespace after them, as llama.cpp and Phi-3's tokenizer.json have it", () => {
    expect(tok.encode('<|user|>\nab')).toEqual([id('<|user|>'), id('▁'), id('<0x0A>'), id('ab')]);
    const phi3 = path.join(tmp, 'spm-phi3.gguf');
    writeGguf(phi3, meta({ 'general.name': str('Phi3 Mini 4k Instruct') }));
    const named = ChatTokenizer.load(phi3);
    expect(named.encode('<|user|>\nab')).toEqual([id('<|user|>'), id('▁ab')]);
    expect(named.encode('<s>\nab')).toEqual([id('<s>'), id('▁'), id('<0x0A>'), id('ab')]); // <unk>, <s> and <|endoftext|> keep it
  });
});

describe('tokenizers Hindsight cannot build', () => {
  const open = (name: string, meta: Record<string, MetaValue>) => {
    const p = path.join(tmp, name);
    writeGguf(p, { 'general.architecture': str('llama'), 'tokenizer.ggml.tokens': { type: 'array', elem: 'string', value: ['a'] }, ...meta });
    return () => ChatTokenizer.load(p);
  };

  it('names the tokenizer model or pre-tokenizer', () => {
    expect(open('bert.gguf', { 'tokenizer.ggml.model': str('bert') })).toThrow(/bert\.gguf: tokenizer\.ggml\.model 'bert' is not supported \(supported: gpt2, llama\)/);
    expect(open('pre.gguf', { 'tokenizer.ggml.model': str('gpt2'), 'tokenizer.ggml.pre': str('viking'), 'tokenizer.ggml.merges': { type: 'array', elem: 'string', value: [] } }))
      .toThrow(/the pre-tokenizer 'viking' \(tokenizer\.ggml\.pre\) is not supported/);
    expect(open('none.gguf', {})).toThrow(/has no tokenizer \(tokenizer\.ggml\.model is missing\)/);
  });
});

it("a GGUF's tokenizer.chat_template.tool_use renders the prompts that offer tools, as transformers' tool_use template does", () => {
  const file = path.join(tmp, 'tool-use.gguf');
  const hermesToolUse = fs.readFileSync(path.join(import.meta.dirname, 'fixtures/templates/hermes-3-tool-use.jinja'), 'utf8');
  writeGguf(file, { ...gpt2Metadata('qwen2.5', 'qwen2', undefined, '<|im_end|>', '<|endoftext|>'), 'tokenizer.chat_template.tool_use': str(hermesToolUse) });
  const tok = ChatTokenizer.load(file);
  const asked = [{ role: 'user', content: 'Weather in Paris?' }];
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  expect(tok.applyChatTemplate(asked, { tools, addGenerationPrompt: true })).toContain('<tools>');
  expect(tok.applyChatTemplate(asked, { addGenerationPrompt: true })).not.toContain('<tools>');
});
