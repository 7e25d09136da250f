/**
 * What goes into which batch, inside one transaction (the batching half of client/sender.py):
 * the next batch due (a formed one being retried, or a new one from the spool: one campaign,
 * config and level, in spool order), its reports moved into the window it is posted in, and,
 * in browsers, this session's open batches that reports join as they are spooled.
 */

import type { ServerClock } from "./clock.js";
import { hex } from "./hash.js";
import { prune } from "./ledger.js";
import type { Randomness } from "./random.js";
import type { Settings } from "./settings.js";
import { type BatchRow, type SpoolRow, batchKeyAt, now } from "./spool.js";
import type { Tx } from "./store.js";
import type { Rule, Windows } from "./windows.js";

const CLAIM_SECONDS = 120;
/** Longest nap of the sender while anything is spooled (client/sender.py's MAX_NAP). */
const MAX_NAP = 5;
/** fetch keepalive bodies share 64 KiB in flight per page (Fetch standard). */
export const KEEPALIVE_BYTES = 60_000;

/** This session's batches in memory, so that a page being hidden can post them at once
 * (fetch keepalive must start before the page is gone; IndexedDB is too slow then). */
export interface Prepared {
  batch: BatchRow;
  reports: string[];
  bytes: number;
  sealed: boolean;
  inflight: boolean;
}

/** A report that joined an open batch: the batch's key, the batch, the wire report. */
export type Joined = [string, BatchRow, string];

export class Batches {
  /** The most reports a batch takes (halved by a 413). */
  limit: number;
  /** flush() calls under way: every batch is due. */
  flushing = 0;
  readonly prepared = new Map<string, Prepared>();
  private prunedAt = 0;

  constructor(
    private readonly settings: Settings,
    private readonly windows: Windows,
    private readonly clock: ServerClock,
    private readonly rng: Randomness,
    /** This sender's claim on the batches it posts (tabs sharing IndexedDB). */
    private readonly claim: string,
    private readonly wake: (delayMs: number) => void,
  ) {
    this.limit = settings.batchSize;
  }

  /** The next batch to post, claimed; null if none is due (the sender is woken by when one
   * may be). */
  async next(tx: Tx): Promise<[string, BatchRow] | null> {
    const t = now();
    if (t - this.prunedAt > 3600) {
      this.prunedAt = t;
      await prune(tx, this.clock.now());
    }
    // Whatever is left waits for a condition (a time, the clock, a config, another tab's
    // claim): the sender looks again by then, and at least every MAX_NAP seconds.
    let soonest = t + MAX_NAP;
    const later = (at: number): void => {
      soonest = Math.min(soonest, at);
    };
    const formed = await this.dueFormed(tx, t, later);
    if (formed) return formed;
    const { rows, batch } = await this.fromSpool(tx, t, later);
    if (batch) return batch;
    if (rows || soonest < t + MAX_NAP) this.wake(Math.max(0, (soonest - t) * 1000));
    return null;
  }

  /** A batch already formed (a retry), due and not claimed by another tab. */
  private async dueFormed(tx: Tx, t: number, later: (at: number) => void): Promise<[string, BatchRow] | null> {
    for (const [key, batch] of await tx.entries<BatchRow>("batch/")) {
      const full = batch.open && batch.rows.length >= this.limit;
      if (batch.nextAt > t && !(batch.open && (this.flushing > 0 || full))) {
        later(batch.nextAt);
        continue;
      }
      if (batch.claim && batch.claim !== this.claim && (batch.claimedUntil ?? 0) > t) continue;
      const rule = this.windows.rule(batch.c, batch.l);
      if (rule === null) continue;
      if (rule !== "refused") {
        const moved = await this.settleBatchWindow(tx, batch, rule);
        if (!moved) {
          tx.put(key, { ...batch, nextAt: Math.max(batch.nextAt, t + rule.nextIn) });
          continue;
        }
      }
      const claimed = { ...batch, claim: this.claim, claimedUntil: t + CLAIM_SECONDS, open: false };
      tx.put(key, claimed);
      const known = this.prepared.get(key);
      if (known) known.sealed = known.inflight = true;
      return [key, claimed];
    }
    return null;
  }

  /** A new batch from the spool if one is due: one campaign, config and level, in spool
   * order; `rows`: the spool holds any row. */
  private async fromSpool(tx: Tx, t: number, later: (at: number) => void): Promise<{ rows: number; batch: [string, BatchRow] | null }> {
    const rows = await tx.entries<SpoolRow>("spool/");
    let pending = 0;
    let oldest = Infinity;
    let group: { c: string; id: string; l: string } | null = null;
    const chosen: string[] = [];
    for (const [key, row] of rows) {
      if (row.b) continue;
      const rule = this.windows.rule(row.c, row.l);
      if (rule === null || (rule !== "refused" && !rule.postable)) continue;
      if (rule !== "refused" && row.w !== rule.window) {
        if (!(await this.windows.move(tx, row.c, row.l, rule.window, 1, rule.config))) continue; // held
        row.w = rule.window;
        tx.put(key, row);
      }
      pending += 1;
      oldest = Math.min(oldest, row.t);
      group ??= { c: row.c, id: row.id, l: row.l };
      if (chosen.length < this.limit && row.c === group.c && row.id === group.id && row.l === group.l) {
        chosen.push(key);
      }
    }
    const due = this.flushing > 0 || pending >= this.limit || t - oldest >= this.settings.maxBatchAge;
    if (!group || !chosen.length || !due) {
      if (Number.isFinite(oldest)) later(oldest + this.settings.maxBatchAge);
      return { rows: rows.length, batch: null };
    }
    return { rows: rows.length, batch: await this.form(tx, t, group, chosen) };
  }

  private async form(tx: Tx, t: number, group: { c: string; id: string; l: string }, chosen: string[]): Promise<[string, BatchRow]> {
    const batchKey = batchKeyAt(t, this.rng);
    const batch: BatchRow = {
      key: hex(this.rng.bytes(16)),
      ...group,
      rows: chosen,
      nextAt: t,
      claim: this.claim,
      claimedUntil: t + CLAIM_SECONDS,
    };
    for (const key of chosen) {
      const row = (await tx.get<SpoolRow>(key)) as SpoolRow;
      tx.put(key, { ...row, b: batchKey });
    }
    tx.put(batchKey, batch);
    return [batchKey, batch];
  }

  /** A formed batch is posted only in the window its reports are charged to: moved into
   * the current one if it has room (all or none), else it waits for the next. */
  private async settleBatchWindow(tx: Tx, batch: BatchRow, rule: Rule): Promise<boolean> {
    if (!rule.postable) return false;
    const rows: [string, SpoolRow][] = [];
    for (const key of batch.rows) {
      const row = await tx.get<SpoolRow>(key);
      if (row && row.w !== rule.window) rows.push([key, row]);
    }
    if (!rows.length) return true;
    if (!(await this.windows.move(tx, batch.c, batch.l, rule.window, rows.length, rule.config))) return false;
    for (const [key, row] of rows) tx.put(key, { ...row, w: rule.window });
    return true;
  }

  /** Browsers: add a postable report to this session's open batch of its group (a new one
   * when there is none, or it would pass the keepalive size or the batch size). */
  async joinOpen(tx: Tx, rowKey: string, row: SpoolRow): Promise<Joined | null> {
    const rule = this.windows.rule(row.c, row.l);
    if (rule === null || rule === "refused" || !rule.postable || rule.window !== row.w) return null;
    const t = now();
    for (const [key, known] of this.prepared) {
      const b = known.batch;
      if (known.sealed || b.c !== row.c || b.id !== row.id || b.l !== row.l) continue;
      if (b.rows.length >= this.limit || known.bytes + row.r.length + 1 > KEEPALIVE_BYTES) continue;
      const stored = await tx.get<BatchRow>(key);
      if (!stored?.open) continue;
      const batch = { ...stored, rows: [...stored.rows, rowKey] };
      tx.put(key, batch);
      row.b = key;
      return [key, batch, row.r];
    }
    const key = batchKeyAt(t, this.rng);
    const batch: BatchRow = { key: hex(this.rng.bytes(16)), c: row.c, id: row.id, l: row.l, rows: [rowKey], nextAt: t + this.settings.maxBatchAge, open: true };
    tx.put(key, batch);
    row.b = key;
    return [key, batch, row.r];
  }

  /** After its transaction: the joined open batch as this session holds it in memory. */
  remember([batchKey, batch, wire]: Joined): void {
    const known = this.prepared.get(batchKey);
    if (known) {
      known.batch = batch;
      known.reports.push(wire);
      known.bytes += wire.length + 1;
    } else {
      this.prepared.set(batchKey, { batch, reports: [wire], bytes: wire.length + 200, sealed: false, inflight: false });
    }
  }
}
