// simulate() from code: the report as a plain object (docs/simulate.md, "From code").
import { jsonFieldMap, loadDomainConfigs, readAccessLog, readMappingFile, simulate } from 'tollgate/simulate';

const log = readAccessLog('examples/simulate/access.log', { jsonFields: jsonFieldMap() });
const report = await simulate({
  rules: await loadDomainConfigs('examples/simulate/rules.yaml'),
  entries: log.entries,
  mapping: readMappingFile('examples/simulate/map.yaml'),
  algorithms: ['fixed-window', 'sliding-window'],
  compareTo: 'sliding-log',
});
for (const run of report.runs) {
  for (const rule of run.rules) {
    const { allowedOnlyHere, allowedOnlyByReference } = rule.difference;
    console.log(`${run.algorithm} ${rule.rule}: ${rule.allowed} allowed, ${rule.throttled} throttled; vs sliding-log +${allowedOnlyHere} -${allowedOnlyByReference}`);
  }
}
