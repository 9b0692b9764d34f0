// Build step: tsc does not copy non-TypeScript files; the Redis store reads its Lua at run time.
import { cpSync } from 'node:fs';

cpSync(new URL('../src/store/redis/scripts/', import.meta.url), new URL('../dist/store/redis/scripts/', import.meta.url), {
  recursive: true,
  filter: (source) => !source.includes('.') || source.endsWith('.lua') || source.endsWith('/'),
});
