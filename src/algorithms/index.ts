export { tokenBucket } from './token-bucket.js';
export { leakyBucket } from './leaky-bucket.js';
export { fixedWindow } from './fixed-window.js';
export { slidingWindow } from './sliding-window.js';
export { gcra } from './gcra.js';
export { SlidingLog, decideSlidingLog } from './sliding-log.js';
export { slotAlgorithms } from './registry.js';
export type { SlotAlgorithm } from './types.js';
