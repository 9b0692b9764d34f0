// Build step: tsc does not copy non-TypeScript files. The Redis store reads its Lua at run time,
// the gRPC service loads its .proto files, and the dashboard page inlines its script and style.
import { cpSync, statSync } from 'node:fs';

const copy = (from, to, extensions) =>
  cpSync(new URL(from, import.meta.url), new URL(to, import.meta.url), {
    recursive: true,
    filter: (source) => extensions.some((extension) => source.endsWith(extension)) || statSync(source).isDirectory(),
  });

copy('../src/store/redis/scripts/', '../dist/store/redis/scripts/', ['.lua']);
copy('../src/service/grpc/proto/', '../dist/service/grpc/proto/', ['.proto']);
copy('../src/service/observe/assets/', '../dist/service/observe/assets/', ['.js', '.css']);
copy('../src/store/region/scripts/', '../dist/store/region/scripts/', ['.lua']);
