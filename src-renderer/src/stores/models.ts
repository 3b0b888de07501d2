// The models on this machine (the back end's `listModels`: Ollama, LM Studio, the Hugging Face
// cache, the user's folders), shared by every model picker; a page's picker reads it again when
// the page opens (the list changes when the user pulls a model), one read at a time.
import { defineStore } from 'pinia';
import type { ModelCatalog } from '../../../src-shared/models-api.js';
import { api, errorMessage } from '../api/client';

export const useModelsStore = defineStore('models', {
  state: () => ({
    catalog: null as ModelCatalog | null,
    loading: false,
    error: null as string | null,
  }),
  actions: {
    async load(again = false) {
      if (this.loading || (this.catalog && !again)) return;
      this.loading = true;
      try {
        this.catalog = await api.listModels();
        this.error = null;
      } catch (err) {
        this.error = errorMessage(err);
      } finally {
        this.loading = false;
      }
    },
  },
});
