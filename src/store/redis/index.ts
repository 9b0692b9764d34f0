export { redisStore, RedisStore } from './store.js';
export type { RedisStoreOptions } from './store.js';
