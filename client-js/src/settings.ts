/**
 * The Reporter's options, checked once into `Settings` (client/settings.py), and where an
 * install's state lives in Node (client/install.py).
 */

import { hex, sha256, utf8 } from "./hash.js";
import type { LdptelError } from "./errors.js";

export interface ReporterOptions {
  /** Node: the install's directory (default: the user data dir's ldptel-js/installs/<hash
   * of the token>); null: state in memory only. Ignored in browsers (IndexedDB). */
  stateDir?: string | null;
  /** The user's privacy level, for campaigns that declare levels. */
  level?: string | null;
  batchSize?: number;
  /** A batch goes out once its oldest report is this old (ms). */
  maxBatchAgeMs?: number;
  /** Each HTTP request's deadline (ms). */
  timeoutMs?: number;
  backoffBaseMs?: number;
  backoffCapMs?: number;
  configRefreshMs?: number;
  maxSpoolRows?: number;
  /** Campaigns to fetch at start (so the first report needs no request). */
  campaigns?: string[];
  enabled?: boolean;
  onError?: (error: LdptelError) => void;
  /** How long reports the collector refused the token for wait for a fixed token before
   * they become dead letters (ms; default a week). */
  authWaitMs?: number;
  /** Deliver the spool on page hide (fetch keepalive) and at Node's exit. */
  deliverOnExit?: boolean;
  /** Replaces the global fetch (tests, custom agents). */
  fetch?: typeof fetch;
}

/** The options in seconds, checked. */
export interface Settings {
  level: string | null;
  batchSize: number;
  maxBatchAge: number;
  timeout: number;
  backoffBase: number;
  backoffCap: number;
  configRefresh: number;
  maxSpoolRows: number;
  enabled: boolean;
  deliverOnExit: boolean;
  authWait: number;
}

const LEVEL_NAME = /^[a-z0-9_-]{1,32}$/;

export const isBrowser = (): boolean => typeof indexedDB !== "undefined" && typeof window !== "undefined";

function positiveOption(value: number | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !(value > 0) || !Number.isFinite(value)) {
    throw new RangeError(`ldptel: ${name} must be a positive number`);
  }
  return value;
}

export function checkLevel(level: string | null): string | null {
  if (level !== null && (typeof level !== "string" || !LEVEL_NAME.test(level))) {
    throw new RangeError("ldptel: level must match [a-z0-9_-]{1,32}");
  }
  return level;
}

/** The options checked (throws RangeError), times in seconds. */
export function settingsOf(options: ReporterOptions): Settings {
  const batchSize = positiveOption(options.batchSize, "batchSize", 500);
  if (!Number.isInteger(batchSize)) throw new RangeError("ldptel: batchSize must be an integer");
  return {
    level: checkLevel(options.level ?? null),
    batchSize,
    maxBatchAge: positiveOption(options.maxBatchAgeMs, "maxBatchAgeMs", 30_000) / 1000,
    timeout: positiveOption(options.timeoutMs, "timeoutMs", 10_000) / 1000,
    backoffBase: positiveOption(options.backoffBaseMs, "backoffBaseMs", 500) / 1000,
    backoffCap: positiveOption(options.backoffCapMs, "backoffCapMs", 300_000) / 1000,
    configRefresh: positiveOption(options.configRefreshMs, "configRefreshMs", 300_000) / 1000,
    maxSpoolRows: positiveOption(options.maxSpoolRows, "maxSpoolRows", 100_000),
    enabled: options.enabled ?? true,
    deliverOnExit: options.deliverOnExit ?? true,
    authWait: positiveOption(options.authWaitMs, "authWaitMs", 7 * 86_400_000) / 1000,
  };
}

/** Node: the user data dir's ldptel-js/installs/<hash of the token>. */
export async function defaultStateDir(token: string): Promise<string> {
  const os = await import("node:os");
  const path = await import("node:path");
  const home = os.homedir();
  const base =
    process.platform === "win32"
      ? (process.env["LOCALAPPDATA"] ?? path.join(home, "AppData", "Local"))
      : process.platform === "darwin"
        ? path.join(home, "Library", "Application Support")
        : (process.env["XDG_DATA_HOME"] ?? path.join(home, ".local", "share"));
  return path.join(base, "ldptel-js", "installs", hex(sha256(utf8(token))).slice(0, 16));
}
