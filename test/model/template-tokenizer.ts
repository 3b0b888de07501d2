// The tiny byte-level tokenizer of a tiny Qwen3 model, with a chat template of the test's choice
// and special tokens added after its vocabulary: what the tool-call dialect tests read families'
// templates with (their markers single tokens where added, several byte tokens where not).
import fs from 'node:fs';
import path from 'node:path';
import { ChatTokenizer } from '../../src-main/model/tokenizer.js';
import { writeTinyModel } from '../../tools/tiny-models.js';

/** The tokenizer in `root/name` with `template`, `specials` added and `without` (its own) taken out. */
export function tokenizerWith(root: string, name: string, template: string, specials: string[] = [], without: string[] = []): ChatTokenizer {
  const dir = writeTinyModel(path.join(root, name), { family: 'qwen3', numLayers: 1 }).dir;
  const tokFile = path.join(dir, 'tokenizer.json');
  const json = JSON.parse(fs.readFileSync(tokFile, 'utf8'));
  json.added_tokens = json.added_tokens.filter((t: { content: string }) => !without.includes(t.content));
  let next = Math.max(...json.added_tokens.map((t: { id: number }) => t.id)) + 1;
  for (const content of specials) json.added_tokens.push({ id: next++, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  fs.writeFileSync(tokFile, JSON.stringify(json));
  const configFile = path.join(dir, 'tokenizer_config.json');
  fs.writeFileSync(configFile, JSON.stringify({ ...JSON.parse(fs.readFileSync(configFile, 'utf8')), chat_template: template }));
  return ChatTokenizer.load(dir);
}
