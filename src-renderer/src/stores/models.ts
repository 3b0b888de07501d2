// The models on this machine (the back end's `listModels`: Ollama, LM Studio, the Hugging Face
// cache, the user's folders), read once per launch and shared by every model picker; a picker
// may ask again (the list changes when the user pulls a model).
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
