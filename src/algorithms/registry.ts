/** The fixed-size-state algorithms by name (sliding-log keeps a variable log instead). */
import type { AlgorithmName } from './catalog.js';
import { fixedWindow } from './fixed-window.js';
import { gcra } from './gcra.js';
import { leakyBucket } from './leaky-bucket.js';
import { slidingWindow } from './sliding-window.js';
import { tokenBucket } from './token-bucket.js';
import type { SlotAlgorithm } from './types.js';

export const slotAlgorithms: Readonly<Record<Exclude<AlgorithmName, 'sliding-log'>, SlotAlgorithm>> = {
  'token-bucket': tokenBucket,
  'leaky-bucket': leakyBucket,
  'fixed-window': fixedWindow,
  'sliding-window': slidingWindow,
  gcra,
};
