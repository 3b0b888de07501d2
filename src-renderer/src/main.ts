// The renderer's entry: Vue 3 + Pinia, one client for the API (IPC or HTTP, see api/client).
import { createPinia } from 'pinia';
import { createApp } from 'vue';
import App from './App.vue';
import './styles.css';
import './sessions.css';
import './narrow.css';

createApp(App).use(createPinia()).mount('#app');
