// App-wide state: what the back end can do (AppInfo), the counts, and the toasts. Views
// re-read their data when the back end says the workspace changed.
import { defineStore } from 'pinia';
import type { AppInfo, Stats } from '../../../src-shared/contract.js';
import { api, errorMessage } from '../api/client';

export interface Toast {
  id: number;
  kind: 'info' | 'error' | 'success';
  text: string;
}

let nextToast = 1;

export const useAppStore = defineStore('app', {
  state: () => ({
    info: null as AppInfo | null,
    stats: null as Stats | null,
    loadError: null as string | null,
    toasts: [] as Toast[],
    /** Bumped on every workspace change, so views can watch one number. */
    revision: 0,
  }),
  getters: {
    isEmpty: (state) => state.stats !== null && state.stats.sessions === 0,
  },
  actions: {
    async load() {
      try {
        [this.info, this.stats] = await Promise.all([api.appInfo(), api.stats()]);
        this.loadError = null;
      } catch (err) {
        this.loadError = errorMessage(err);
      }
    },
    async refreshStats() {
      this.stats = await api.stats();
    },
    listen() {
      api.on('workspace.changed', async ({ reason }) => {
        if (reason === 'database' || reason === 'settings') this.info = await api.appInfo();
        await this.refreshStats();
        this.revision++;
      });
    },
    toast(kind: Toast['kind'], text: string, ms = kind === 'error' ? 9000 : 4000) {
      const id = nextToast++;
      this.toasts.push({ id, kind, text });
      setTimeout(() => this.dismiss(id), ms);
    },
    dismiss(id: number) {
      this.toasts = this.toasts.filter((t) => t.id !== id);
    },
  },
});
