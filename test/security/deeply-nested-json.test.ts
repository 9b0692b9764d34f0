/**
 * Issue 27, item 3: a 1 MiB body of `[[[[…` cost JSON.parse ~750 ms of the event loop, every other
 * request waiting. The body reader now scans the bytes for bracket depth before parsing and refuses
 * anything nested deeper than MAX_JSON_DEPTH (32; envoy's deepest message needs 5) with a 400 that
 * names the limit, on every JSON route of the service (and so of the gateway's admin listener).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH } from '../../src/service/http/body.js';
import { serviceForSuite, type ServiceProcess } from '../support/service.js';

const TOKEN = 'deep-json-admin-token-0123456789';
/** Just under the 1 MiB body limit. */
const DEEP_BODY = '['.repeat(1_048_000);
const DEEP_OBJECTS = '{"a":'.repeat(200_000);

interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

async function send(service: ServiceProcess, method: string, url: string, body: string): Promise<Answer> {
  const response = await fetch(url, { method, headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` }, body });
  const text = await response.text();
  return { status: response.status, body: (text.startsWith('{') ? JSON.parse(text) : { text }) as Record<string, unknown> };
}

/**
 * CPU time the service process has used, in ms (/proc/<pid>/stat: utime + stime, in clock ticks of
 * 10 ms). What a body costs the service's event loop, unlike a round trip's wall time, which
 * on a loaded machine is mostly waiting to be scheduled.
 */
function cpuMs(service: ServiceProcess): number {
  const fields = readFileSync(`/proc/${service.child.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** The service's CPU ms for `times` sends of `body`, and their answers. */
async function cost(service: ServiceProcess, method: string, url: string, body: string, times = 3): Promise<{ cpuMs: number; answers: Answer[] }> {
  const before = cpuMs(service);
  const answers: Answer[] = [];
  for (let i = 0; i < times; i++) answers.push(await send(service, method, url, body));
  return { cpuMs: cpuMs(service) - before, answers };
}

describe('a deeply nested JSON body sent to tollgate serve', () => {
  const service = serviceForSuite(['--config', 'examples/rules', '--admin-token', TOKEN]);
  const routes = (s: ServiceProcess): ReadonlyArray<readonly [string, string, string]> => [
    ['POST /json', 'POST', s.url('/json')],
    ['POST /v1/check', 'POST', s.url('/v1/check')],
    ['POST /v1/limit', 'POST', s.url('/v1/limit')],
    ['POST /v1/keys/block (admin)', 'POST', s.admin('/v1/keys/block')],
  ];

  it('is refused before parsing, fast, with a 400 naming the limit, on every JSON route', async () => {
    for (const [name, method, url] of routes(service())) {
      for (const body of [DEEP_BODY, DEEP_OBJECTS]) {
        const { cpuMs: spent, answers } = await cost(service(), method, url, body);
        for (const answer of answers) {
          expect(answer.status, name).toBe(400);
          expect(answer.body, name).toMatchObject({ code: 'ERR_TOLLGATE_INVALID_JSON' });
          expect(String(answer.body.message), name).toContain(`at most ${MAX_JSON_DEPTH} levels`);
        }
        // Parsing 1 MiB of `[` cost the service 1,130 ms of CPU for 3 bodies (530 to 1,130 ms of wall
        // time a body); refused unparsed, 20 to 150 ms for 3, receiving them included.
        expect(spent, `${name}: the service's CPU ms for 3 bodies of ${body.length} bytes`).toBeLessThan(300);
      }
    }
  });

  it('PUT /v1/rules of deep flow YAML (JSON is YAML) is refused at the loader\'s depth bound, fast', async () => {
    const { cpuMs: spent, answers } = await cost(service(), 'PUT', service().admin('/v1/rules'), DEEP_BODY);
    for (const answer of answers) {
      expect(answer.status).toBe(400);
      expect(String(answer.body.message)).toContain('YAML nested deeper than 256 levels');
    }
    expect(spent, "the service's CPU ms for 3 bodies").toBeLessThan(300);
  });

  it('a normal envoy request still passes, and depth up to the limit is parsed (then judged on its fields)', async () => {
    const envoy = { domain: 'classic', descriptors: [{ entries: [{ key: 'action', value: 'login' }, { key: 'user', value: 'deep-json' }] }], hitsAddend: 1 };
    const ok = await send(service(), 'POST', service().url('/json'), JSON.stringify(envoy));
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ overallCode: 'OK' });
    // Brackets inside strings are not nesting.
    const bracketsInStrings = await send(service(), 'POST', service().url('/json'), JSON.stringify({ ...envoy, descriptors: [{ entries: [{ key: 'action', value: 'login' }, { key: 'user', value: '[{'.repeat(5_000) }] }] }));
    expect(bracketsInStrings.status).toBe(200);
    const atLimit = `${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}`;
    const parsed = await send(service(), 'POST', service().url('/json'), atLimit);
    expect(parsed.status).toBe(400);
    expect(String(parsed.body.message)).not.toContain('levels');
    const past = await send(service(), 'POST', service().url('/json'), `[${atLimit}]`);
    expect(String(past.body.message)).toContain(`at most ${MAX_JSON_DEPTH} levels`);
  });
});
