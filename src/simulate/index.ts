/** `tollgate/simulate`: replay access logs against rules offline (docs/simulate.md). */
export { simulate } from './simulate.js';
export type { SimulateOptions } from './simulate.js';
export type { RunVariant } from './rules-for-run.js';
export { readAccessLog, detectFormat, LOG_FORMATS } from './log-read.js';
export type { AccessLog, LogFormat, LogStats, ReadLogOptions } from './log-read.js';
export { jsonFieldMap } from './log-json.js';
export type { JsonFieldMap } from './log-json.js';
export { mappingFromFlags, parseMapping, readMappingFile, checkMapping } from './mapping.js';
export type { LogMapping, MappedRequest, MappedEntry } from './mapping.js';
export { renderText } from './render-text.js';
export type { LogSummary } from './render-text.js';
export { renderHtml } from './render-html.js';
export { loadDomainConfigs } from '../rules/files.js';
export { InvalidLogError } from '../errors.js';
export type { LogEntry, SimulationReport, SimulationRun, RuleReport, RuleDifference, TopKey, TimeBucket } from './types.js';
