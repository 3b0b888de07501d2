// The Sessions screen's state: the filter, the sort, the page of results, the per-source counts,
// and the sessions selected for a bulk action (only ever ones on screen: a reload drops the rest).
import { defineStore } from 'pinia';
import type { SessionSortKey, SessionSummary, SortOrder } from '../../../src-shared/contract.js';
import type { SourceFormat } from '../../../src-shared/types.js';
import { api, errorMessage } from '../api/client';
import { newestCall } from '../api/newest-call';

export type LabelStatus = '' | 'labeled' | 'unlabeled' | 'partial';
export type HasSamples = '' | 'yes' | 'no';

const PAGE = 200;
const nextLoad = newestCall();

export const useSessionsStore = defineStore('sessions', {
  state: () => ({
    search: '',
    source: '' as SourceFormat | '',
    labelStatus: '' as LabelStatus,
    hasSamples: '' as HasSamples,
    sort: 'created' as SessionSortKey,
    order: 'desc' as SortOrder,
    selected: [] as string[],
    /** The sort of the rows on screen ("title:asc"), set once they arrive: the table says it for tests and scripts. */
    shownSort: '',
    sessions: [] as SessionSummary[],
    total: 0,
    sourceCounts: {} as Partial<Record<SourceFormat, number>>,
    loading: false,
    error: null as string | null,
  }),
  actions: {
    filter(offset: number) {
      return {
        search: this.search.trim() || undefined,
        source: this.source || undefined,
        labelStatus: this.labelStatus || undefined,
        hasSamples: this.hasSamples === '' ? undefined : this.hasSamples === 'yes',
        sort: this.sort,
        order: this.order,
        offset,
        limit: PAGE,
      };
    },
    async load() {
      const newest = nextLoad();
      const sort = `${this.sort}:${this.order}`;
      this.loading = true;
      try {
        const [page, counts] = await Promise.all([api.listSessions(this.filter(0)), api.sourceCounts()]);
        if (!newest()) return;
        this.sessions = page.sessions;
        this.total = page.total;
        this.shownSort = sort;
        const shown = new Set(page.sessions.map((x) => x.id));
        this.selected = this.selected.filter((id) => shown.has(id));
        this.sourceCounts = counts;
        this.error = null;
      } catch (err) {
        if (newest()) this.error = errorMessage(err);
      } finally {
        if (newest()) this.loading = false;
      }
    },
    /** A column's header clicked: sorts by it, or turns its direction round. Text sorts A→Z first, dates and counts largest first. */
    sortBy(key: SessionSortKey) {
      if (this.sort === key) this.order = this.order === 'asc' ? 'desc' : 'asc';
      else {
        this.sort = key;
        this.order = key === 'title' || key === 'source' ? 'asc' : 'desc';
      }
      void this.load();
    },
    toggleSelected(id: string) {
      this.selected = this.selected.includes(id) ? this.selected.filter((x) => x !== id) : [...this.selected, id];
    },
    /** Selects every session shown, or none when they all are. */
    toggleAllShown() {
      const all = this.sessions.map((x) => x.id);
      this.selected = all.every((id) => this.selected.includes(id)) ? [] : all;
    },
    async loadMore() {
      const page = await api.listSessions(this.filter(this.sessions.length));
      this.sessions.push(...page.sessions);
      this.total = page.total;
    },
  },
});
