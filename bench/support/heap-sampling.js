// Preload for a server under load: V8's sampling heap profiler, counting the objects the garbage
// collections freed too (includeObjectsCollectedByMajorGC/MinorGC), so a profile shows every byte
// allocated, by function, not only what survived. The first SIGUSR2 starts sampling, the second
// writes the profile to $HEAP_OUT (then prints "sampling written" on stderr).
//
//   HEAP_OUT=/tmp/x.heapprofile HEAP_INTERVAL=2048 node --import ./bench/support/heap-sampling.js dist/cli/main.js serve ...
//   kill -USR2 <pid>; wrk ...; kill -USR2 <pid>; node bench/heap-top.js /tmp/x.heapprofile <requests>
//
// `--no-turbo-inlining` beside it attributes bytes to the inlined functions themselves (escape
// analysis then keeps fewer objects off the heap: a guide, not the production figure).
import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';
const session = new Session();
session.connect();
const post = (m, p) => new Promise((res, rej) => session.post(m, p, (e, r) => (e ? rej(e) : res(r))));
let state = 0;
process.on('SIGUSR2', async () => {
  if (state === 0) {
    state = 1;
    await post('HeapProfiler.enable');
    await post('HeapProfiler.startSampling', { samplingInterval: Number(process.env.HEAP_INTERVAL ?? 512), includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    console.error('sampling started');
  } else {
    const { profile } = await post('HeapProfiler.stopSampling');
    writeFileSync(process.env.HEAP_OUT, JSON.stringify(profile));
    console.error('sampling written');
    state = 0;
  }
});
