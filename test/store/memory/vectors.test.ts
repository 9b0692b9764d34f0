import { memoryStore } from '../../../src/index.js';
import { describeGroupVectors } from '../../support/group-vectors.js';
import { describeReservationVectors } from '../../support/reservation-vectors.js';
import { describeShareVectors } from '../../support/share-vectors.js';
import { BLOCK_VECTOR_DIR, describeVectors, loadVectors } from '../../support/vectors.js';
import { describe, expect, it } from 'vitest';

describeVectors('memory', () => memoryStore({ sweepIntervalMs: 0 }));
// Through the over-limit cache: every answer it gives must be the store's own.
describeVectors('memory, over-limit cache', () => memoryStore({ sweepIntervalMs: 0 }), 0, { overLimitCache: true });

describe('conformance vectors', () => {
  it('cover all six algorithms', () => {
    const algorithms = new Set(loadVectors().map(({ vectors }) => vectors.algorithm));
    expect([...algorithms].sort()).toEqual(
      ['fixed-window', 'gcra', 'leaky-bucket', 'sliding-log', 'sliding-window', 'token-bucket'].sort(),
    );
  });
});

describeGroupVectors('memory', () => memoryStore({ sweepIntervalMs: 0 }));

// Penalties (blockDuration), directly and through the over-limit cache, which answers a block's denials itself.
describeVectors('memory, blocks', () => memoryStore({ sweepIntervalMs: 0 }), 0, {}, BLOCK_VECTOR_DIR);
describeVectors('memory, blocks, over-limit cache', () => memoryStore({ sweepIntervalMs: 0 }), 0, { overLimitCache: true }, BLOCK_VECTOR_DIR);
describeReservationVectors('memory', () => memoryStore({ sweepIntervalMs: 0 }));
// Fair shares (share): the tenants of a group, directly and through the over-limit cache.
describeShareVectors('memory', () => memoryStore({ sweepIntervalMs: 0 }));
describeShareVectors('memory, over-limit cache', () => memoryStore({ sweepIntervalMs: 0 }), { overLimitCache: true });
