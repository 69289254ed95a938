/**
 * @module bench/lib/launcher-child
 * Child-process entry of launcher-process.ts: imports the bench module whose
 * URL it is given, and answers a command line with that module's `measure()`.
 * Usage: node launcher-child.js <bench module URL>; exits when stdin ends.
 */
import { announce, serveCommands } from './child.js';
import type { MeasuredInChild } from './launcher-process.js';

const target = process.argv[2];
if (target === undefined) throw new Error('usage: launcher-child.js <bench module URL>');
const mod = (await import(target)) as MeasuredInChild;
announce({ ready: true });
serveCommands(async () => ({ report: await mod.measure() }));
