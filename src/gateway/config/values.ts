/** Scalar values the gateway configuration shares between its readers: durations and byte sizes. */
import { isScalar } from 'yaml';
import { parseDuration } from '../../duration.js';
import type { DocumentReader, Entry } from '../../rules/parse/fields.js';

/**
 * A duration written with its unit (`15s`, `250ms`), in ms; reported at the entry when it is not
 * one. A bare number is refused, not read as ms: `timeout: 15` meant 15 s to whoever wrote it, and
 * read as 15 ms it made every request a 504.
 */
export function readDuration(reader: DocumentReader, entry: Entry | undefined): number | undefined {
  if (entry?.value === undefined) return undefined;
  const raw = isScalar(entry.value) ? entry.value.value : undefined;
  if (typeof raw === 'number') {
    reader.report(entry.value, entry.path, `${entry.name} ${raw} has no unit: write it with one, "${raw}s" for seconds or "${raw}ms" for milliseconds`);
    return undefined;
  }
  const ms = parseDuration(typeof raw === 'string' ? raw : undefined);
  if (typeof ms === 'number') return ms;
  reader.report(entry.value, entry.path, `${entry.name} ${ms}`);
  return undefined;
}

const SIZE_UNITS: Readonly<Record<string, number>> = { '': 1, b: 1, kb: 1_000, kib: 1_024, mb: 1_000_000, mib: 1_048_576 };

/** A size in bytes: a whole number, or one with a unit (`64KiB`, `1MiB`, `500kB`), in `[0, max]`. */
export function readSize(reader: DocumentReader, entry: Entry | undefined, max: number): number | undefined {
  if (entry?.value === undefined) return undefined;
  const raw = isScalar(entry.value) ? entry.value.value : undefined;
  const match = /^\s*(\d+)\s*([a-z]*)\s*$/i.exec(String(raw));
  const unit = match === null ? undefined : SIZE_UNITS[match[2]!.toLowerCase()];
  const bytes = match === null || unit === undefined ? undefined : Number(match[1]) * unit;
  if (bytes !== undefined && (typeof raw === 'number' || typeof raw === 'string') && bytes <= max) return bytes;
  reader.report(entry.value, entry.path, `${entry.name} must be a size from 0 to ${max} bytes, like 1048576, 64KiB or 1MiB, got ${JSON.stringify(raw ?? null)}`);
  return undefined;
}
