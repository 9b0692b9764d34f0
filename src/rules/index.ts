/**
 * `tollgate/rules`: the rules toolkit beyond `loadRules` (which is in `tollgate`): a holder whose
 * rules reloads swap, the file watcher and the Redis push that swap them, per-tenant overrides
 * (`holder.putOverride`, shared through Redis by `OverridesSync`), and the parser and
 * compiler for rules already in memory (docs/rules.md). Re-exports only.
 */
export { RulesHolder, compileRules } from './ruleset.js';
export type { RuleSet, RuleSource, CompiledRule } from './ruleset.js';
export { parseRules } from './parse/index.js';
export type { DomainConfig, DescriptorConfig, RateLimitConfig, RuleUnit, SourceLocation } from './types.js';
export { watchRules } from './watch.js';
export type { WatchRulesOptions, RulesWatcher, RulesWatchStatus } from './watch.js';
export { RulesSync } from './shared/sync.js';
export type { RulesSyncOptions, RulesSyncStatus, RulesPushResult, SkippedDomain } from './shared/sync.js';
export { OverridesSync } from './shared/override-sync.js';
export type { OverridesSyncOptions } from './shared/override-sync.js';
export { MAX_OVERRIDES } from './overrides.js';
export type { OverrideInput, OverrideEntry, ListedOverride } from './overrides.js';
export type { RulesHolderOptions } from './ruleset.js';
