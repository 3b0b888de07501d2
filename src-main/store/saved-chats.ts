// The Chat page's saved chats (migration 7, docs/design.md §Chat page): one row per chat, its
// turns and settings as JSON. Saved with the database's coalesced save (a chat turn does not
// rewrite the whole file at once; a crash loses at most the last ~2 s, as label edits).
import type { SavedChat, SavedChatSummary } from '../../src-shared/chat-api.js';
import type { Store } from './database.js';

interface ChatRow {
  id: string;
  title: string;
  created_at: number;
  updated_at: number;
  data: string;
}

/** What the JSON column holds: the chat less the columns. */
type ChatData = Omit<SavedChat, 'id' | 'title' | 'createdAt' | 'updatedAt' | 'turns'>;

function toChat(row: ChatRow): SavedChat {
  const data = JSON.parse(row.data) as ChatData;
  return { ...data, id: row.id, title: row.title, createdAt: row.created_at, updatedAt: row.updated_at, turns: data.chatTurns.length };
}

export class SavedChats {
  constructor(private readonly store: Store) {}

  /** Newest first, without their turns. */
  list(): SavedChatSummary[] {
    return this.store
      .all<ChatRow>('SELECT id, title, created_at, updated_at, data FROM chats ORDER BY updated_at DESC, id')
      .map((row) => {
        const { id, title, createdAt, updatedAt, turns, adapter } = toChat(row);
        return { id, title, createdAt, updatedAt, turns, adapter };
      });
  }

  get(id: string): SavedChat | null {
    const row = this.store.get<ChatRow>('SELECT id, title, created_at, updated_at, data FROM chats WHERE id = ?', [id]);
    return row ? toChat(row) : null;
  }

  /** Writes the chat whole (a new one, or its next turn). */
  put(chat: SavedChat): void {
    const { id, title, createdAt, updatedAt, turns: _turns, ...data } = chat;
    this.store.run('INSERT OR REPLACE INTO chats (id, title, created_at, updated_at, data) VALUES (?, ?, ?, ?, ?)', [id, title, createdAt, updatedAt, JSON.stringify(data)]);
    this.store.markDirty();
  }

  delete(id: string): boolean {
    const had = this.store.get<{ n: number }>('SELECT COUNT(*) AS n FROM chats WHERE id = ?', [id])!.n > 0;
    if (had) {
      this.store.run('DELETE FROM chats WHERE id = ?', [id]);
      this.store.markDirty();
    }
    return had;
  }
}
