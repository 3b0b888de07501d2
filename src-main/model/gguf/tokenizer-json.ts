/**
 * A GGUF's tokenizer as the tokenizer.json (and tokenizer_config.json) a Hugging Face folder
 * would carry, for @huggingface/tokenizers to run (../tokenizer.ts).
 *
 *   `tokenizer.ggml.model` `gpt2`: byte-level BPE from `tokens` and `merges`; the split rule
 *       before it is the one `tokenizer.ggml.pre` names (llama.cpp's names: gpt-2/default,
 *       llama-bpe, qwen2 and its kin, smollm, tekken), each as the model's own tokenizer.json writes it.
 *   `llama`: SentencePiece BPE from `tokens` and `scores`: a piece's merge ranks by its score
 *       (the merges transformers derives for SentencePiece models), byte fallback to the
 *       `<0xNN>` tokens, `▁` for spaces with one prepended unless `add_space_prefix` is false.
 *
 * Token types (llama.cpp's): control tokens (3) become special added tokens, user-defined
 * ones (4) added tokens that are not special. BOS is prepended when `add_bos_token` says so
 * (the default for `llama`, not for `gpt2`). Anything else is one line naming it.
 */
import { UserError } from '../../../src-shared/types.js';
import type { GgufFile, GgufValue } from './reader.js';
import type { ChatTemplates } from '../chat-templates.js';

const CONTROL = 3, USER_DEFINED = 4;

/** Token texts llama.cpp ends generation at in any GGUF (those of the families Hindsight runs). */
const END_OF_GENERATION_TEXTS: ReadonlySet<string> = new Set(['<|eot_id|>', '<|eom_id|>', '<|im_end|>', '<|end|>', '<end_of_turn>', '<|endoftext|>', '<|end_of_text|>']);

// The split rules, as the models' tokenizer.json files write them.
const LLAMA3_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Mistral Nemo's Tekken: letters split at case changes, every digit alone.
const TEKKEN_REGEX = "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const byteLevel = (useRegex: boolean) => ({ type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: useRegex });
const split = (regex: string) => ({ type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated', invert: false });

const PRE_TOKENIZERS: Record<string, { pre: unknown; normalizer?: unknown; ignoreMerges?: boolean; noBos?: boolean }> = {
  default: { pre: byteLevel(true) },
  'gpt-2': { pre: byteLevel(true) },
  'llama-bpe': { pre: { type: 'Sequence', pretokenizers: [split(LLAMA3_REGEX), byteLevel(false)] }, ignoreMerges: true },
  qwen2: { pre: { type: 'Sequence', pretokenizers: [split(QWEN2_REGEX), byteLevel(false)] }, normalizer: { type: 'NFC' } },
  smollm: { pre: { type: 'Sequence', pretokenizers: [{ type: 'Digits', individual_digits: true }, byteLevel(true)] } },
  tekken: { pre: { type: 'Sequence', pretokenizers: [split(TEKKEN_REGEX), byteLevel(false)] }, ignoreMerges: true },
  // GLM-4: Llama 3's split with its merges applied; llama.cpp adds no BOS (the template writes [gMASK]<sop>).
  glm4: { pre: { type: 'Sequence', pretokenizers: [split(LLAMA3_REGEX), byteLevel(false)] }, noBos: true },
};
PRE_TOKENIZERS['chatglm-bpe'] = PRE_TOKENIZERS['glm4']!;
PRE_TOKENIZERS['llama3'] = PRE_TOKENIZERS['llama-v3'] = PRE_TOKENIZERS['llama-bpe']!;
for (const name of ['deepseek-r1-qwen', 'qwen35']) PRE_TOKENIZERS[name] = PRE_TOKENIZERS['qwen2']!;
/** The `tokenizer.ggml.pre` names a `gpt2` tokenizer may give (its absence is `default`). */
export const GGUF_PRE_TOKENIZERS: readonly string[] = Object.keys(PRE_TOKENIZERS);

export interface GgufTokenizer {
  /** tokenizer.json's content. */
  json: Record<string, unknown>;
  /** tokenizer_config.json's: bos/eos tokens, add_bos_token, chat_template. */
  config: Record<string, unknown>;
  chatTemplate?: string;
  /** The default and the `tool_use` template (`tokenizer.chat_template.tool_use`, Hermes 3's files). */
  chatTemplates: ChatTemplates;
  /** Ids that end generation: EOS, EOT and EOM where the file names them. */
  eosTokenIds: number[];
}

export function ggufTokenizer(g: GgufFile): GgufTokenizer {
  const meta = g.metadata;
  const fail = (what: string): never => {
    throw new UserError(`${g.file}: ${what}`);
  };
  const model = meta.get('tokenizer.ggml.model');
  const tokens = meta.get('tokenizer.ggml.tokens');
  if (typeof model !== 'string') fail('has no tokenizer (tokenizer.ggml.model is missing)');
  if (!Array.isArray(tokens) || !tokens.every((t) => typeof t === 'string')) fail('tokenizer.ggml.tokens is missing or not a list of strings');
  const list = tokens as string[];
  const types = numbers(meta.get('tokenizer.ggml.token_type'), list.length);
  const id = (key: string): number | undefined => {
    const v = meta.get(`tokenizer.ggml.${key}`);
    return typeof v === 'number' && v >= 0 && v < list.length ? v : undefined;
  };
  const flag = (key: string, fallback: boolean): boolean => {
    const v = meta.get(`tokenizer.ggml.${key}`);
    return typeof v === 'boolean' ? v : fallback;
  };

  const vocab: Record<string, number> = Object.create(null); // token texts such as 'constructor' are keys too
  list.forEach((t, i) => {
    if (!(t in vocab)) vocab[t] = i;
  });
  // llama.cpp (llama_vocab::load) gives a model named Phi-3 the right-strip its tokenizer.json's
  // role and end tokens have ("<|user|>\n" is one token): every special token but these three.
  const name = String(meta.get('general.name') ?? '').toLowerCase();
  const rstrips = (content: string) => (name.includes('phi-3') || name.includes('phi3')) && !['<unk>', '<s>', '<|endoftext|>'].includes(content);
  const added = list.flatMap((content, i) => (types[i] === CONTROL || types[i] === USER_DEFINED
    ? [{ id: i, content, single_word: false, lstrip: false, rstrip: rstrips(content), normalized: false, special: types[i] === CONTROL }]
    : []));
  // A gpt2 vocabulary's split rule (checked below, where it is needed).
  const preName = String(meta.get('tokenizer.ggml.pre') ?? 'default');
  const pre = model === 'gpt2' ? PRE_TOKENIZERS[preName] : undefined;
  const bos = id('bos_token_id');
  const addBos = flag('add_bos_token', model === 'llama') && bos !== undefined && !pre?.noBos;
  const bosProcessor = addBos ? [{
    type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: list[bos!], type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
    pair: [{ SpecialToken: { id: list[bos!], type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: list[bos!], type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
    special_tokens: { [list[bos!]!]: { id: list[bos!], ids: [bos], tokens: [list[bos!]] } },
  }] : [];

  let json: Record<string, unknown>;
  if (model === 'gpt2') {
    if (!pre) fail(`the pre-tokenizer '${preName}' (tokenizer.ggml.pre) is not supported (supported: ${Object.keys(PRE_TOKENIZERS).join(', ')})`);
    const merges = meta.get('tokenizer.ggml.merges');
    if (!Array.isArray(merges) || !merges.every((m) => typeof m === 'string')) fail('tokenizer.ggml.merges is missing or not a list of strings');
    json = {
      version: '1.0', truncation: null, padding: null, added_tokens: added,
      normalizer: pre!.normalizer ?? null,
      pre_tokenizer: pre!.pre,
      post_processor: { type: 'Sequence', processors: [byteLevel(false), ...bosProcessor] },
      decoder: byteLevel(false),
      model: {
        type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
        fuse_unk: false, byte_fallback: false, ignore_merges: pre!.ignoreMerges ?? false, vocab, merges,
      },
    };
  } else if (model === 'llama') {
    const scores = numbers(meta.get('tokenizer.ggml.scores'), list.length);
    const unk = id('unknown_token_id');
    const prefix = flag('add_space_prefix', true);
    json = {
      version: '1.0', truncation: null, padding: null, added_tokens: added,
      normalizer: { type: 'Sequence', normalizers: [...(prefix ? [{ type: 'Prepend', prepend: '▁' }] : []), { type: 'Replace', pattern: { String: ' ' }, content: '▁' }] },
      pre_tokenizer: null,
      post_processor: bosProcessor[0] ?? null,
      decoder: {
        type: 'Sequence',
        decoders: [{ type: 'Replace', pattern: { String: '▁' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' }, ...(prefix ? [{ type: 'Strip', content: ' ', start: 1, stop: 0 }] : [])],
      },
      model: {
        type: 'BPE', dropout: null, unk_token: unk !== undefined ? list[unk] : null, continuing_subword_prefix: null, end_of_word_suffix: null,
        fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab, merges: sentencePieceMerges(list, scores, types, vocab),
      },
    };
  } else {
    fail(`tokenizer.ggml.model '${model}' is not supported (supported: gpt2, llama)`);
  }
  const eos = id('eos_token_id');
  const template = meta.get('tokenizer.chat_template');
  const chatTemplate = typeof template === 'string' ? template : undefined;
  const config: Record<string, unknown> = {
    add_bos_token: addBos,
    ...(bos !== undefined ? { bos_token: list[bos] } : {}),
    ...(eos !== undefined ? { eos_token: list[eos] } : {}),
    ...(chatTemplate ? { chat_template: chatTemplate } : {}),
  };
  // As llama.cpp's loader (llama-vocab.cpp): also the tokens whose text ends a turn, wherever the
  // metadata names none (a Gemma 3 file's eos is <eos>, its turns end with <end_of_turn>), and
  // Ollama's list of them.
  const byText = list.flatMap((t, i) => (END_OF_GENERATION_TEXTS.has(t) ? [i] : []));
  const ollamaList = meta.get('tokenizer.ggml.eos_token_ids');
  const listed = Array.isArray(ollamaList) ? ollamaList.filter((x): x is number => typeof x === 'number' && x >= 0 && x < list.length) : [];
  const eosTokenIds = [...new Set([eos, id('eot_token_id'), id('eom_token_id'), ...listed, ...byText].filter((x): x is number => x !== undefined))];
  const toolUse = meta.get('tokenizer.chat_template.tool_use');
  const chatTemplates = { ...(chatTemplate ? { main: chatTemplate } : {}), ...(typeof toolUse === 'string' ? { toolUse } : {}) };
  return { json: json!, config, chatTemplate, chatTemplates, eosTokenIds };
}

function numbers(v: GgufValue | undefined, length: number): number[] {
  if (!Array.isArray(v)) return new Array(length).fill(1);
  return v.map((x) => (typeof x === 'number' ? x : 0));
}

/**
 * SentencePiece BPE's merges from its pieces and scores, as transformers derives them: every
 * split of a normal piece into two pieces of the vocabulary is a merge, ranked by the piece's
 * score (highest first), ties by the ids of the two halves.
 */
export function sentencePieceMerges(tokens: string[], scores: number[], types: number[], vocab: Record<string, number>): [string, string][] {
  const merges: { l: string; r: string; score: number; li: number; ri: number }[] = [];
  tokens.forEach((piece, i) => {
    // Normal and user-defined pieces (Gemma's runs of spaces and newlines, score 0, so first), as
    // llama.cpp's SentencePiece tokenizer merges any piece of the vocabulary by its score; not
    // control, byte or unused ones.
    if (types[i] !== 1 && types[i] !== USER_DEFINED) return;
    const chars = Array.from(piece);
    for (let k = 1; k < chars.length; k++) {
      const l = chars.slice(0, k).join(''), r = chars.slice(k).join('');
      const li = vocab[l], ri = vocab[r];
      if (li !== undefined && ri !== undefined) merges.push({ l, r, score: scores[i]!, li, ri });
    }
  });
  merges.sort((a, b) => b.score - a.score || a.li - b.li || a.ri - b.ri);
  return merges.map((m) => [m.l, m.r]);
}
