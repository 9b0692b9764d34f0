export { memcachedStore, MemcachedStore, type MemcachedStoreOptions } from './store.js';
