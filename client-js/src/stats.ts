/**
 * What the Reporter counts and tells (client/stats.py): `Outcomes`, the report() calls that
 * spooled nothing (counted, logged once per kind, passed to onError), and `readStats`.
 */

import { type LdptelError, type ReportStatus, asError } from "./errors.js";
import type { Settings } from "./settings.js";
import { type BatchRow, type Meta, readMeta } from "./spool.js";
import type { State } from "./state.js";

export interface Stats {
  spooled: number;
  pendingBatches: number;
  delivered: number;
  deadLettered: number;
  dropped: number;
  lastError: string | null;
  notSpooled: Partial<Record<ReportStatus, number>>;
  /** Spooled reports the collector refused the token for, and the Unix time (s) the first
   * of them becomes a dead letter unless a fixed token delivers it (null: none waits). */
  awaitingToken: number;
  awaitingTokenUntil: number | null;
}

export class Outcomes {
  readonly notSpooled: Partial<Record<ReportStatus, number>> = {};
  private readonly logged = new Set<string>();

  constructor(private readonly onError: ((error: LdptelError) => void) | undefined) {}

  count(status: ReportStatus): ReportStatus {
    this.notSpooled[status] = (this.notSpooled[status] ?? 0) + 1;
    return status;
  }

  /** A report() that raised: counted under its status, logged, passed to onError. */
  refused(raw: unknown, what: string): ReportStatus {
    const error = asError(raw);
    // A delivery error met by a first config fetch: no config, so nothing was spooled.
    const status = error.status === "delivery" ? "campaign_unavailable" : error.status;
    this.count(status);
    this.log(status, `ldptel: ${what}: ${error.message}`, status === "budget_exhausted" ? "info" : "warn");
    this.callOnError(error);
    return status;
  }

  callOnError(error: LdptelError): void {
    if (!this.onError) return;
    try {
      this.onError(error);
    } catch {
      this.log("on_error", "ldptel: the onError callback threw", "warn");
    }
  }

  /** Once per kind at warn, then silent: messages name campaigns and fields, never values. */
  log(kind: string, message: string, level: "warn" | "info"): void {
    if (this.logged.has(kind)) return;
    this.logged.add(kind);
    if (level === "warn") console.warn(message);
  }
}

/** Spool and delivery counters (persisted; 0 when the state cannot be read), and this
 * session's report() calls that spooled nothing, by status. */
export async function readStats(state: State, settings: Settings, outcomes: Outcomes, lastError: () => string | null): Promise<Stats> {
  let meta: Meta = { seq: 0, spooled: 0, delivered: 0, deadLettered: 0, dropped: 0 };
  let pendingBatches = 0;
  let awaitingToken = 0;
  let firstRefused = Infinity;
  try {
    const store = settings.enabled ? await state.open() : null;
    if (store) {
      const batches = await store.transact(async (tx) => {
        meta = await readMeta(tx);
        return tx.entries<BatchRow>("batch/");
      });
      pendingBatches = batches.length;
      for (const [, batch] of batches) {
        if (batch.refusedAt === undefined) continue;
        awaitingToken += batch.rows.length;
        firstRefused = Math.min(firstRefused, batch.refusedAt);
      }
    }
  } catch {
    // the counters on disk read 0 when the state cannot be read
  }
  return {
    spooled: meta.spooled,
    pendingBatches,
    delivered: meta.delivered,
    deadLettered: meta.deadLettered,
    dropped: meta.dropped,
    lastError: lastError(),
    notSpooled: { ...outcomes.notSpooled },
    awaitingToken,
    awaitingTokenUntil: Number.isFinite(firstRefused) ? firstRefused + settings.authWait : null,
  };
}
