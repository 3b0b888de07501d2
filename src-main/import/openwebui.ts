/**
 * Open WebUI chat export (Settings → Chats → Export): an array of
 * `{id, title, created_at, chat:{history:{messages:{id → {parentId, childrenIds, role, content,
 * timestamp, files}}, currentId}, messages:[…]}}`.
 *
 * The active branch is `currentId` walked up through `parentId` (cycles and dangling parents
 * cut it, with a warning); without a history, the flat `chat.messages` list is used. As for
 * ChatGPT, an assistant message off the branch whose parent is on it (a regenerated reply) is
 * kept as a branch alternative of the kept reply. Open WebUI writes reasoning into the content
 * as `<details type="reasoning">…</details>`: it is moved to `reasoning`.
 */
import type { Attachment, BranchAlternative, ImportedTurn, Role } from '../../src-shared/types.js';
import {
  compact,
  conversationConverter,
  hasContent,
  idOf,
  isObject,
  MalformedConversation,
  readMessageRole,
  str,
  toUnixSeconds,
  WarningTally,
  type JsonObject,
  type RoleField,
} from './common.js';

const ROLE: RoleField<Role> = { key: 'role', roles: { system: 'system', user: 'user', assistant: 'assistant', tool: 'tool' }, unknown: 'with an unknown role' };
const REASONING_BLOCK = /<details\s+type="reasoning"[^>]*>([\s\S]*?)<\/details>\s*/g;

export const convertOpenWebUi = conversationConverter((raw) => {
  const chat = raw.chat;
  const externalId = idOf(raw.id) ?? (isObject(chat) ? idOf(chat.id) : undefined);
  const title = str(raw.title) ?? (isObject(chat) ? str(chat.title) : undefined);
  if (!isObject(chat)) throw new MalformedConversation('it has no "chat" object');

  const tally = new WarningTally();
  const notes: string[] = [];
  const history = isObject(chat.history) && isObject(chat.history.messages) ? chat.history : undefined;
  let turns: ImportedTurn[];
  let alternatives: BranchAlternative[] = [];
  if (history) {
    const messages = history.messages as JsonObject;
    const path = activeBranch(messages, idOf(history.currentId), notes);
    const turnOf = new Map<string, number>();
    turns = [];
    for (const id of path) {
      const turn = toTurn(messages[id], id, tally);
      if (!turn) continue;
      turnOf.set(id, turns.length);
      turns.push(turn);
    }
    alternatives = siblingsOffBranch(messages, path, turnOf, tally);
  } else if (Array.isArray(chat.messages)) {
    turns = chat.messages.flatMap((m, i) => toTurn(m, idOf(isObject(m) ? m.id : undefined) ?? String(i), tally) ?? []);
  } else {
    throw new MalformedConversation('its "chat" has neither a "history" nor a "messages" list');
  }

  const metadata: Record<string, unknown> = {};
  if (Array.isArray(chat.models)) metadata.models = chat.models;
  if (raw.updated_at !== undefined) metadata.updated_at = raw.updated_at;
  return { externalId, title, createdAt: toUnixSeconds(raw.created_at ?? chat.timestamp), turns, alternatives, metadata, tally, notes };
});

function parentOf(messages: JsonObject, id: string): string | undefined {
  const message = messages[id];
  return isObject(message) ? idOf(message.parentId) : undefined;
}

function activeBranch(messages: JsonObject, currentId: string | undefined, notes: string[]): string[] {
  let leaf = currentId;
  if (leaf === undefined || !isObject(messages[leaf])) {
    if (leaf !== undefined) notes.push(`currentId ${leaf} is not among the messages; using the newest message`);
    leaf = newestMessage(messages);
  }
  const path: string[] = [];
  const seen = new Set<string>();
  for (let id = leaf; id !== undefined; id = parentOf(messages, id)) {
    if (seen.has(id)) {
      notes.push(`the message tree has a cycle at message ${id}; the branch starts after it`);
      break;
    }
    if (!isObject(messages[id])) {
      notes.push(`message ${path[path.length - 1]} points to a missing parent ${id}; the branch starts after it`);
      break;
    }
    seen.add(id);
    path.push(id);
  }
  return path.reverse();
}

function newestMessage(messages: JsonObject): string | undefined {
  let best: string | undefined;
  let bestTime = -Infinity;
  for (const [id, message] of Object.entries(messages)) {
    const time = isObject(message) ? (toUnixSeconds(message.timestamp) ?? 0) : -Infinity;
    if (time >= bestTime) [best, bestTime] = [id, time];
  }
  return best;
}

function toTurn(item: unknown, id: string, tally: WarningTally): ImportedTurn | undefined {
  const known = readMessageRole(item, ROLE, tally);
  if (!known) return undefined;
  const { message, role } = known;
  let text = str(message.content) ?? '';
  const reasoning: string[] = [];
  text = text.replace(REASONING_BLOCK, (_block, inner: string) => {
    const body = inner.replace(/<summary>[\s\S]*?<\/summary>/, '').replace(/^\s*> ?/gm, '').trim();
    if (body) reasoning.push(body);
    return '';
  });
  const attachments: Attachment[] = (Array.isArray(message.files) ? message.files.filter(isObject) : []).map((f) => {
    const file = isObject(f.file) ? f.file : {};
    const name = str(f.name) ?? str(file.filename);
    return compact<Attachment>({ kind: str(f.type) === 'image' ? 'image' : 'file', name, mimeType: str(isObject(file.meta) ? file.meta.content_type : undefined) });
  });
  const turn = compact<ImportedTurn>({
    role,
    text: text.trim(),
    reasoning: reasoning.join('\n\n') || undefined,
    attachments,
    timestamp: toUnixSeconds(message.timestamp),
    externalId: idOf(message.id) ?? id,
    status: message.done === false ? 'in_progress' : undefined,
  });
  if (!hasContent(turn)) {
    tally.add('that {are} empty skipped');
    return undefined;
  }
  return turn;
}

function siblingsOffBranch(messages: JsonObject, path: string[], turnOf: Map<string, number>, tally: WarningTally): BranchAlternative[] {
  const onPath = new Set(path);
  const alternatives: BranchAlternative[] = [];
  for (const id of path) {
    const atTurn = turnOf.get(id);
    const parent = parentOf(messages, id);
    if (atTurn === undefined || parent === undefined || !onPath.has(parent)) continue;
    if ((messages[id] as JsonObject).role !== 'assistant') continue;
    for (const [siblingId, sibling] of Object.entries(messages)) {
      if (onPath.has(siblingId) || !isObject(sibling) || idOf(sibling.parentId) !== parent || sibling.role !== 'assistant') continue;
      const turn = toTurn(sibling, siblingId, tally);
      if (turn) alternatives.push({ atTurn, turn });
    }
  }
  return alternatives;
}
