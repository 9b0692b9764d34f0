/**
 * A pushed catch-all that denies everything: `requests_per_unit: 0` on a descriptor that names no
 * value matches every request carrying its key, and `PUT /v1/rules` accepted it without a word.
 * The push is now answered with a `warnings` list naming each such limit (file:line:col) and the
 * warning is logged; a limit of 0 on one value (a block) stays quiet.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceOptions } from '../../src/service/options.js';
import { startService, type RunningService } from '../../src/service/server.js';
import { capturedLogger } from '../support/logs.js';

const TOKEN = 'deny-all-test-admin-token-012345';
const DENY_ALL = 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 0 }\n';
const BLOCK_ONE = 'domain: api\ndescriptors:\n  - key: user\n    value: mallory\n    rate_limit: { unit: minute, requests_per_unit: 0 }\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 10 }\n';

describe('pushing rules that deny every request of a key', () => {
  let service: RunningService;
  const { logger, logs } = capturedLogger();

  beforeAll(async () => {
    service = await startService(resolveServiceOptions({ port: '0', 'admin-port': '0', host: '127.0.0.1', 'admin-token': TOKEN }, {}), logger, { grpc: false });
  }, 20_000);
  afterAll(async () => service?.close());

  const push = async (yaml: string): Promise<{ status: number; body: Record<string, unknown> }> => {
    const response = await fetch(`http://127.0.0.1:${service.adminPort}/v1/rules`, { method: 'PUT', headers: { authorization: `Bearer ${TOKEN}` }, body: yaml });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  it('is answered with a warning naming the limit, and logged', async () => {
    const { status, body } = await push(DENY_ALL);
    expect(status).toBe(200);
    expect(body.warnings).toEqual(['api: user (PUT /v1/rules:4:5) has requests_per_unit: 0 and no value: it denies every request with user']);
    expect(logs).toContainEqual(expect.objectContaining({ level: 40, warnings: body.warnings, msg: expect.stringMatching(/^pushed rules deny every request of a key: api: user/) }));
  });

  it('stays quiet for a limit of 0 on one value (a block)', async () => {
    const { status, body } = await push(BLOCK_ONE);
    expect(status).toBe(200);
    expect(body.warnings).toBeUndefined();
  });
});
