// The Sessions screen's state: the filter, the page of results and the per-source counts.
import { defineStore } from 'pinia';
import type { SessionSummary } from '../../../src-shared/contract.js';
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
        offset,
        limit: PAGE,
      };
    },
    async load() {
      const newest = nextLoad();
      this.loading = true;
      try {
        const [page, counts] = await Promise.all([api.listSessions(this.filter(0)), api.sourceCounts()]);
        if (!newest()) return;
        this.sessions = page.sessions;
        this.total = page.total;
        this.sourceCounts = counts;
        this.error = null;
      } catch (err) {
        if (newest()) this.error = errorMessage(err);
      } finally {
        if (newest()) this.loading = false;
      }
    },
    async loadMore() {
      const page = await api.listSessions(this.filter(this.sessions.length));
      this.sessions.push(...page.sessions);
      this.total = page.total;
    },
  },
});
