// The timeline annotator's state: the open session, the selected sample, and an undo stack
// of label changes. Every change is a manual label (docs/design.md §Judges: manual wins); undo writes the
// previous values back, also as a manual label.
import { defineStore } from 'pinia';
import type { LabelView, SessionDetail } from '../../../src-shared/contract.js';
import type { Reward } from '../../../src-shared/types.js';
import { api, errorMessage } from '../api/client';

type LabelFields = Pick<LabelView, 'reward' | 'hint' | 'repair' | 'notes'>;
type Patch = Partial<LabelFields>;

interface UndoEntry {
  sessionId: string;
  responseTurn: number;
  before: Patch;
}

/** Keys 1/2/3 → reward (documented in the keyboard help). */
export const REWARD_KEYS: Record<string, Reward> = { '1': 1, '2': -1, '3': 0 };

export const useAnnotatorStore = defineStore('annotator', {
  state: () => ({
    session: null as SessionDetail | null,
    selected: 0,
    loading: false,
    error: null as string | null,
    undoStack: [] as UndoEntry[],
    /** Turn indexes whose reasoning / tool calls are expanded (kept across virtual scrolling). */
    expanded: new Set<string>(),
    saving: false,
  }),
  getters: {
    samples: (state) => state.session?.samples ?? [],
    current(): SessionDetail['samples'][number] | null {
      return this.samples[this.selected] ?? null;
    },
    sampleByResponse(): Map<number, number> {
      return new Map(this.samples.map((s, i) => [s.responseTurn, i]));
    },
    sampleByFeedback(): Map<number, number> {
      const map = new Map<number, number>();
      this.samples.forEach((s, i) => s.feedbackTurn !== null && map.set(s.feedbackTurn, i));
      return map;
    },
  },
  actions: {
    async open(id: string) {
      if (this.session?.id !== id) {
        this.session = null;
        this.selected = 0;
        this.undoStack = [];
        this.expanded = new Set();
      }
      this.loading = true;
      try {
        this.session = await api.getSession({ id });
        this.selected = Math.min(this.selected, Math.max(0, this.session.samples.length - 1));
        this.error = null;
      } catch (err) {
        this.error = errorMessage(err);
      } finally {
        this.loading = false;
      }
    },
    select(index: number) {
      if (this.samples.length === 0) return;
      this.selected = Math.max(0, Math.min(this.samples.length - 1, index));
    },
    move(delta: number) {
      this.select(this.selected + delta);
    },
    /** Writes a manual label; remembers the previous values for undo unless undoing. */
    async label(patch: Patch, sampleIndex?: number, recordUndo = true) {
      const sample = this.samples[sampleIndex ?? this.selected];
      if (!sample || !this.session) return;
      const before: Patch = {};
      for (const key of Object.keys(patch) as (keyof LabelFields)[]) (before as Record<string, unknown>)[key] = sample.label[key];
      this.saving = true;
      try {
        sample.label = await api.setLabel({ sessionId: sample.sessionId, responseTurn: sample.responseTurn, patch });
        if (recordUndo) this.undoStack.push({ sessionId: sample.sessionId, responseTurn: sample.responseTurn, before });
      } finally {
        this.saving = false;
      }
    },
    async setReward(reward: Reward | null) {
      await this.label({ reward });
    },
    /** Undoes the last change made in this session view; returns what it undid, for a toast. */
    async undo(): Promise<string | null> {
      const entry = this.undoStack.pop();
      if (!entry || !this.session || entry.sessionId !== this.session.id) return null;
      const index = this.samples.findIndex((s) => s.responseTurn === entry.responseTurn);
      if (index < 0) return null;
      this.selected = index;
      await this.label(entry.before, index, false);
      return `Undid the change to reply #${entry.responseTurn} (${Object.keys(entry.before).join(', ')})`;
    },
    toggle(key: string) {
      const next = new Set(this.expanded);
      if (next.has(key)) next.delete(key);
      else next.add(key);
      this.expanded = next;
    },
  },
});
