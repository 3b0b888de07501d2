/**
 * ChatGPT data export (`conversations.json`): one conversation is a tree of messages in
 * `mapping` (node id → {message, parent, children}); `current_node` is the leaf the user last saw.
 *
 * Choices of our own (docs/design.md §Imports):
 * - The active branch is `current_node` → parents → root, reversed. Without a usable
 *   `current_node`, the newest leaf (by create_time) is taken. A cycle or a dangling parent
 *   cuts the branch there, with a warning.
 * - Custom instructions (`user_editable_context`, `model_editable_context`) become hidden system
 *   turns, even though ChatGPT flags them visually hidden; every other visually hidden message
 *   is skipped.
 * - Reasoning (`thoughts`, `reasoning_recap`, channel "analysis") is no turn of its own: it goes
 *   to the next assistant turn, which is the tool call it led to or the reply. Reasoning with no
 *   assistant turn after it goes to the assistant turn just before, else it is dropped (warned).
 * - An assistant message addressed to a tool (recipient ≠ "all", any content type) is an
 *   assistant turn carrying a tool call; messages from role `tool` (execution_output, browsing,
 *   quotes …) are tool turns.
 * - Branch alternatives: an assistant node off the active branch whose parent is on it, next to
 *   an assistant node on it. Its first assistant turn (reasoning folded in, following its newest
 *   children) competes with the kept node's first assistant turn. Interrupted replies
 *   (`status: in_progress`) qualify too and keep that status: a reply the user stopped and then
 *   regenerated is a clear rejected example. Abandoned branches under an edited user message
 *   have no kept sibling and give no alternative.
 */
import type { BranchAlternative, ImportedTurn, Role, ToolCall } from '../../src-shared/types.js';
import {
  compact,
  conversationConverter,
  hasContent,
  idOf,
  isObject,
  MalformedConversation,
  str,
  stripCitations,
  toUnixSeconds,
  WarningTally,
  type JsonObject,
} from './common.js';
import {
  citationLookup,
  contextText,
  fileAttachments,
  multimodalBody,
  partsText,
  quoteText,
  reasoningText,
  statusOf,
  type MessageBody,
} from './chatgpt-content.js';

interface TreeNode {
  id: string;
  message: JsonObject | null;
  parent?: string;
  children: string[];
}

const REASONING_TYPES = new Set(['thoughts', 'reasoning_recap']);
const CONTEXT_TYPES = new Set(['user_editable_context', 'model_editable_context']);
const ROLES = new Set<Role>(['system', 'user', 'assistant', 'tool']);

export const convertChatGpt = conversationConverter((raw) => {
  if (raw.mapping === undefined) throw new MalformedConversation('it has no "mapping" (the message tree)');
  if (!isObject(raw.mapping)) throw new MalformedConversation('its "mapping" is not an object');

  const notes: string[] = [];
  const tally = new WarningTally();
  const nodes = readTree(raw.mapping, tally);
  const leaf = pickLeaf(raw.current_node, nodes, notes);
  if (leaf === undefined) throw new MalformedConversation('its "mapping" holds no messages');
  const path = activeBranch(leaf, nodes, notes);

  const builder = new TurnBuilder(tally);
  const firstTurnOfNode = new Map<string, number>();
  for (const id of path) {
    firstTurnOfNode.set(id, builder.turns.length);
    builder.add(nodes.get(id)!);
  }
  builder.finish(notes);
  const alternatives = findAlternatives(path, nodes, firstTurnOfNode, builder.turns, tally);

  return {
    externalId: idOf(raw.conversation_id) ?? idOf(raw.id),
    title: str(raw.title),
    createdAt: toUnixSeconds(raw.create_time),
    turns: builder.turns,
    alternatives,
    metadata: pickMetadata(raw),
    tally,
    notes,
  };
});

function readTree(mapping: JsonObject, tally: WarningTally): Map<string, TreeNode> {
  const nodes = new Map<string, TreeNode>();
  for (const [key, value] of Object.entries(mapping)) {
    if (!isObject(value)) {
      tally.add('in "mapping" that {are} not objects skipped');
      continue;
    }
    const id = idOf(value.id) ?? key;
    nodes.set(id, { id, message: isObject(value.message) ? value.message : null, parent: idOf(value.parent), children: [] });
  }
  // Children come from the parent links (the `children` arrays can disagree after edits);
  // mapping order is creation order in real exports.
  for (const node of nodes.values()) {
    if (node.parent !== undefined) nodes.get(node.parent)?.children.push(node.id);
  }
  return nodes;
}

function createTime(node: TreeNode | undefined): number {
  return toUnixSeconds(node?.message?.create_time) ?? -Infinity;
}

function pickLeaf(currentNode: unknown, nodes: Map<string, TreeNode>, notes: string[]): string | undefined {
  const current = idOf(currentNode);
  if (current !== undefined && nodes.has(current)) return current;
  if (current !== undefined) notes.push(`current_node ${current} is not in the mapping; using the newest leaf`);
  let best: TreeNode | undefined;
  for (const node of nodes.values()) {
    if (node.children.length > 0) continue;
    if (!best || createTime(node) >= createTime(best)) best = node;
  }
  // Every node has a child only when the tree is a cycle; start from the newest message then.
  if (!best) for (const node of nodes.values()) if (!best || createTime(node) >= createTime(best)) best = node;
  return best?.id;
}

/** Root-to-leaf ids of the branch that ends at `leaf`. */
function activeBranch(leaf: string, nodes: Map<string, TreeNode>, notes: string[]): string[] {
  const path: string[] = [];
  const seen = new Set<string>();
  let id: string | undefined = leaf;
  while (id !== undefined) {
    if (seen.has(id)) {
      notes.push(`the message tree has a cycle at node ${id}; the branch starts after it`);
      break;
    }
    const node = nodes.get(id);
    if (!node) {
      notes.push(`node ${path[path.length - 1]} points to a missing parent ${id}; the branch starts after it`);
      break;
    }
    seen.add(id);
    path.push(id);
    id = node.parent;
  }
  return path.reverse();
}

/** Converts active-branch messages to turns, carrying reasoning forward to the next reply. */
class TurnBuilder {
  readonly turns: ImportedTurn[] = [];
  private pendingReasoning: string[] = [];
  private lastToolCallId: string | undefined;

  constructor(private readonly tally: WarningTally) {}

  add(node: TreeNode): void {
    const message = node.message;
    if (!message) return; // the root, or a node whose message was removed
    const content = isObject(message.content) ? message.content : undefined;
    if (!content) {
      this.tally.add('without content skipped');
      return;
    }
    const type = str(content.content_type) ?? '(none)';
    const metadata = isObject(message.metadata) ? message.metadata : {};
    const role = str(isObject(message.author) ? message.author.role : undefined) as Role | undefined;
    const base = {
      timestamp: toUnixSeconds(message.create_time),
      externalId: idOf(message.id) ?? node.id,
      status: statusOf(message),
    };

    if (CONTEXT_TYPES.has(type)) {
      const text = contextText(content);
      if (text) this.push({ role: 'system', text, hidden: true, ...base });
      return;
    }
    if (metadata.is_visually_hidden_from_conversation === true) return;
    if (!role || !ROLES.has(role)) {
      this.tally.add(`from an unknown author role "${String(role)}" skipped`);
      return;
    }
    const isReasoning = REASONING_TYPES.has(type) || message.channel === 'analysis' || metadata.channel === 'analysis';
    if (isReasoning && role === 'assistant') {
      const reasoning = reasoningText(content);
      if (reasoning) this.pendingReasoning.push(reasoning);
      return;
    }
    const body = this.body(type, content, metadata);
    if (body === undefined) return;
    const cleaned = stripCitations(body.text.trim(), citationLookup(body.text, metadata));
    const recipient = str(message.recipient) ?? 'all';

    if (role === 'assistant' && recipient !== 'all') {
      const call: ToolCall = { id: base.externalId, name: recipient, arguments: body.text };
      this.lastToolCallId = call.id;
      this.push({ role: 'assistant', text: '', toolCalls: [call], ...base });
      return;
    }
    const turn: ImportedTurn = { role, text: cleaned.text, attachments: body.attachments, citations: cleaned.citations, ...base };
    if (!hasContent(turn)) return; // an empty placeholder
    if (role === 'tool') {
      turn.toolName = str(isObject(message.author) ? message.author.name : undefined);
      turn.toolCallId = this.lastToolCallId;
    }
    this.push(turn);
  }

  /** Text and placeholders per content type; undefined when the message gives no turn. */
  private body(type: string, content: JsonObject, metadata: JsonObject): MessageBody | undefined {
    switch (type) {
      case 'text':
        return { text: partsText(content.parts), attachments: fileAttachments(metadata, new Set()) };
      case 'multimodal_text':
        return multimodalBody(content.parts, metadata);
      case 'code':
      case 'execution_output':
        return { text: str(content.text) ?? '', attachments: [] };
      case 'tether_browsing_display':
        return { text: str(content.result) || str(content.summary) || '', attachments: [] };
      case 'tether_quote':
        return { text: quoteText(content), attachments: [] };
      case 'system_error':
        return { text: [str(content.name), str(content.text)].filter(Boolean).join(': '), attachments: [] };
      default: {
        const text = str(content.text) ?? partsText(content.parts);
        if (text.trim()) return { text, attachments: [] };
        this.tally.add(`of unknown content type "${type}" with no text skipped`);
        return undefined;
      }
    }
  }

  private push(turn: ImportedTurn): void {
    if (turn.role === 'user') this.flushReasoningBackwards();
    if (turn.role === 'assistant' && this.pendingReasoning.length) {
      turn.reasoning = this.pendingReasoning.join('\n\n');
      this.pendingReasoning = [];
    }
    this.turns.push(compact(turn));
  }

  /** Reasoning with no assistant turn after it: attach it to the reply right before, if any. */
  private flushReasoningBackwards(notes?: string[]): void {
    if (!this.pendingReasoning.length) return;
    const last = this.turns[this.turns.length - 1];
    if (last?.role === 'assistant') {
      last.reasoning = [last.reasoning, ...this.pendingReasoning].filter(Boolean).join('\n\n');
    } else if (notes) {
      notes.push('reasoning with no assistant reply around it was dropped');
    } else {
      this.tally.add('of reasoning with no assistant reply around them dropped');
    }
    this.pendingReasoning = [];
  }

  finish(notes: string[]): void {
    this.flushReasoningBackwards(notes);
  }

  /** The first assistant turn this builder produced, for branch alternatives. */
  firstAssistantTurn(): ImportedTurn | undefined {
    return this.turns.find((t) => t.role === 'assistant');
  }
}

/**
 * Assistant siblings off the active branch whose parent is on it. The competing turns are the
 * first assistant turns produced from each sibling (kept one: on the branch; abandoned one:
 * down its own newest children until a user message).
 */
function findAlternatives(
  path: string[],
  nodes: Map<string, TreeNode>,
  firstTurnOfNode: Map<string, number>,
  turns: ImportedTurn[],
  tally: WarningTally,
): BranchAlternative[] {
  const onPath = new Set(path);
  const alternatives: BranchAlternative[] = [];
  for (const id of path) {
    const node = nodes.get(id)!;
    if (node.parent === undefined || !onPath.has(node.parent) || authorRole(node) !== 'assistant') continue;
    const atTurn = keptAssistantTurn(firstTurnOfNode.get(id)!, turns);
    if (atTurn === undefined) continue;
    for (const siblingId of nodes.get(node.parent)!.children) {
      const sibling = nodes.get(siblingId)!;
      if (onPath.has(siblingId) || authorRole(sibling) !== 'assistant') continue;
      const turn = abandonedReply(sibling, nodes, tally);
      if (turn) alternatives.push({ atTurn, turn });
    }
  }
  return alternatives;
}

function authorRole(node: TreeNode): string | undefined {
  const author = node.message?.author;
  return isObject(author) ? str(author.role) : undefined;
}

/** Index of the first assistant turn at or after `from`, before the next user turn. */
function keptAssistantTurn(from: number, turns: ImportedTurn[]): number | undefined {
  for (let i = from; i < turns.length; i++) {
    if (turns[i]!.role === 'assistant') return i;
    if (turns[i]!.role === 'user') return undefined;
  }
  return undefined;
}

function abandonedReply(start: TreeNode, nodes: Map<string, TreeNode>, tally: WarningTally): ImportedTurn | undefined {
  const builder = new TurnBuilder(tally);
  const seen = new Set<string>();
  let node: TreeNode | undefined = start;
  while (node && !seen.has(node.id) && authorRole(node) !== 'user') {
    seen.add(node.id);
    builder.add(node);
    const reply = builder.firstAssistantTurn();
    if (reply) return reply;
    const newest: string | undefined = [...node.children].sort((a, b) => createTime(nodes.get(a)) - createTime(nodes.get(b))).pop();
    node = newest === undefined ? undefined : nodes.get(newest);
  }
  return undefined;
}

function pickMetadata(raw: JsonObject): Record<string, unknown> {
  const keys = ['update_time', 'default_model_slug', 'gizmo_id', 'conversation_template_id', 'is_archived', 'current_node'];
  const metadata: Record<string, unknown> = {};
  for (const key of keys) if (raw[key] !== undefined && raw[key] !== null) metadata[key] = raw[key];
  return metadata;
}
