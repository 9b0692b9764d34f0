export { regionStore, RegionStore } from './store.js';
export type { RegionStoreOptions } from './store.js';
export { startReplicator } from './replicate.js';
export type { PeerRegion, PeerStats, Replicator, ReplicatorOptions, ReplicatorStats, SourceReset } from './replicate.js';
export type { RegionConnection } from './shared.js';
