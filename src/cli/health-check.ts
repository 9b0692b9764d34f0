#!/usr/bin/env node
/**
 * `tollgate health` as a program of its own, for the image's HEALTHCHECK: `node
 * dist/cli/health-check.js` loads only health.ts, where `tollgate health` loads the whole command
 * line first. A check every 10 s then costs a bare Node start, not the CLI's.
 */
import { runHealthCommand } from './health.js';

process.exitCode = await runHealthCommand(process.argv.slice(2), process.env, { stdout: (text) => process.stdout.write(text), stderr: (text) => process.stderr.write(text) });
