/**
 * The rows of the spool and its batches in the store (client/spool.py): a spooled report,
 * a formed batch under its idempotency key, the counters (`meta`), and the cap on the spool.
 */

import { hex } from "./hash.js";
import type { Randomness } from "./random.js";
import type { Tx } from "./store.js";

export interface SpoolRow {
  c: string; // campaign
  id: string; // config id
  l: string; // level ("" = none)
  w: number; // window charged to (collector's clock)
  r: string; // the wire report, JSON
  t: number; // made at (device seconds): batch age
  b?: string; // the batch it is in
}

export interface BatchRow {
  key: string; // Idempotency-Key
  c: string;
  id: string;
  l: string;
  rows: string[];
  nextAt: number; // device seconds
  claim?: string;
  claimedUntil?: number;
  /** When the collector first refused the token for it (s): it waits authWait from then. */
  refusedAt?: number;
  /** Browsers: a batch reports are still added to (this session's), sealed when posted. */
  open?: boolean;
}

export interface Meta {
  seq: number;
  spooled: number;
  delivered: number;
  deadLettered: number;
  dropped: number;
}

export const now = (): number => Date.now() / 1000;
export const pad = (n: number): string => String(n).padStart(12, "0");

/** A new batch's store key (ordered by time made) at device time `t`. */
export const batchKeyAt = (t: number, rng: Randomness): string => `batch/${pad(Math.floor(t * 1000))}-${hex(rng.bytes(4))}`;

export async function readMeta(tx: Tx): Promise<Meta> {
  return (await tx.get<Meta>("meta")) ?? { seq: 0, spooled: 0, delivered: 0, deadLettered: 0, dropped: 0 };
}

/** Beyond maxSpoolRows the oldest unbatched reports are dropped (counted). */
export async function dropOldest(tx: Tx, meta: Meta, maxSpoolRows: number): Promise<void> {
  for (const [key, row] of await tx.entries<SpoolRow>("spool/")) {
    if (meta.spooled <= maxSpoolRows) return;
    if (row.b) continue;
    tx.delete(key);
    meta.spooled -= 1;
    meta.dropped += 1;
  }
}
