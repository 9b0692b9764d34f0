// Build step: tsc does not copy non-TypeScript files. The Redis store reads its Lua at run time,
// and the gRPC service loads its .proto files at run time.
import { cpSync, statSync } from 'node:fs';

const copy = (from, to, extension) =>
  cpSync(new URL(from, import.meta.url), new URL(to, import.meta.url), {
    recursive: true,
    filter: (source) => source.endsWith(extension) || statSync(source).isDirectory(),
  });

copy('../src/store/redis/scripts/', '../dist/store/redis/scripts/', '.lua');
copy('../src/service/proto/', '../dist/service/proto/', '.proto');
