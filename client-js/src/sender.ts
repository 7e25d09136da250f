/**
 * Delivery (client/sender.py): the sender's timer, one batch posted per step under its
 * idempotency key, each answer settled (delivered, retried with backoff, refused for good
 * into dead letters, halved on 413, or waiting authWait for a fixed token), the delivery
 * errors told to onError, `flush`, and the page-hide posts with fetch keepalive.
 */

import { type Batches, KEEPALIVE_BYTES } from "./batches.js";
import type { ServerClock } from "./clock.js";
import type { ConfigCache } from "./config_cache.js";
import { DeliveryError } from "./errors.js";
import type { Link } from "./link.js";
import type { Randomness } from "./random.js";
import type { Settings } from "./settings.js";
import { type BatchRow, type SpoolRow, now, readMeta } from "./spool.js";
import type { State } from "./state.js";
import type { Outcomes } from "./stats.js";
import type { Store, Tx } from "./store.js";
import { type Answer, type Outcome, type Problem, type Verdict, classify, networkReason } from "./transport.js";

const MAX_RETRY_AFTER = 3600;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** What a settled answer came to once the stored batch was looked at. */
interface Settled {
  verdict: Verdict;
  problem: Problem | null;
}

export class Sender {
  lastError: string | null = null;
  /** The last delivery error told to onError (told again only when it changes). */
  private told: string | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private timerAt = 0;
  /** A wake-up came while the sender ran: run it once more after. */
  private again = false;
  private running: Promise<void> | null = null;
  private failures = 0;
  private holdUntil = 0;
  private unsent = 0;

  constructor(
    private readonly state: State,
    private readonly cache: ConfigCache,
    private readonly batches: Batches,
    private readonly link: Link,
    private readonly settings: Settings,
    private readonly clock: ServerClock,
    private readonly rng: Randomness,
    private readonly outcomes: Outcomes,
  ) {}

  /** A report was spooled: the sender runs now for the first one or a full batch, else by
   * the time the batch is old enough. */
  spooled(): void {
    this.unsent += 1;
    if (this.unsent === 1 || this.unsent >= this.batches.limit) this.wake(0);
    else this.wake(this.settings.maxBatchAge * 1000);
  }

  /** Run the sender in `delayMs` (or sooner if already due sooner; never before the
   * backoff ends). */
  wake(delayMs: number): void {
    if (this.state.closed && !this.batches.flushing) return;
    const at = Date.now() + Math.max(delayMs, (this.holdUntil - now()) * 1000, 0);
    if (this.timer !== null) {
      if (this.timerAt <= at) return; // already due by then
      clearTimeout(this.timer);
    }
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.running) this.again = true;
      else void this.run();
    }, at - Date.now());
    (this.timer as { unref?: () => void }).unref?.();
  }

  private run(): Promise<void> {
    this.running ??= (async () => {
      try {
        while (await this.step()) {
          // one batch per step, until nothing is due
        }
      } catch (error) {
        this.lastError = `internal: ${String(error)}`.slice(0, 300);
      } finally {
        this.running = null;
        if (this.again) {
          this.again = false;
          this.wake(0);
        }
      }
    })();
    return this.running;
  }

  /** One round: settle windows, form or pick a due batch, post it; true if more may be
   * due now. */
  private async step(): Promise<boolean> {
    const store = this.state.store;
    if (!store || now() < this.holdUntil) {
      if (store) this.wake(0);
      return false;
    }
    if (!this.clock.synced) await this.syncClock(store);
    if (!this.clock.synced) return false;
    const batch = await store.transact((tx) => this.batches.next(tx));
    if (!batch) {
      this.unsent = 0;
      return false;
    }
    const [key, row] = batch;
    const reports = await store.transact(async (tx) => {
      const out: string[] = [];
      for (const id of row.rows) {
        const spooled = await tx.get<SpoolRow>(id);
        if (spooled) out.push(spooled.r);
      }
      return out;
    });
    await store.sync();
    const outcome = await this.post(row, reports, false);
    await this.settle(store, key, row, outcome);
    return outcome.verdict === "delivered" || outcome.verdict === "too_large" || outcome.verdict === "reject";
  }

  /** Before any post, an answer of the collector must set its clock in this process. */
  private async syncClock(store: Store): Promise<void> {
    const first = await store.transact(async (tx) => (await tx.entries<SpoolRow>("spool/"))[0]?.[1]);
    if (!first) return;
    await this.cache.refresh(first.c);
    if (!this.cache.active.has(first.c) && !this.cache.retired.has(first.c)) {
      await this.cache.campaign(first.c).catch(() => undefined);
    }
  }

  private async post(batch: BatchRow, reports: string[], keepalive: boolean): Promise<Outcome> {
    const envelope: Record<string, string> = { campaign: batch.c, config_id: batch.id };
    if (batch.l) envelope["level"] = batch.l;
    const head = JSON.stringify(envelope);
    const text = `${head.slice(0, -1)},"reports":[${reports.join(",")}]}`;
    const headers: Record<string, string> = {
      ...this.link.headers(),
      "Content-Type": "application/json",
      "Idempotency-Key": batch.key,
    };
    let body: BodyInit = text;
    if (typeof CompressionStream !== "undefined" && !keepalive) {
      const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
      body = new Uint8Array(await new Response(stream).arrayBuffer());
      headers["Content-Encoding"] = "gzip";
    }
    let answer: Answer | Problem;
    try {
      // The fetch starts synchronously for a keepalive post (nothing is awaited before it).
      answer = await this.link.exchange("/v1/reports", { method: "POST", headers, body, keepalive });
    } catch (error) {
      return { verdict: "retry", status: null, reason: networkReason(error, this.settings.timeout), retryAfter: null, problem: null };
    }
    if ("kind" in answer) return { verdict: "retry", status: answer.httpStatus, reason: answer.reason, retryAfter: null, problem: answer };
    return classify(answer, reports.length);
  }

  private async settle(store: Store, key: string, batch: BatchRow, outcome: Outcome): Promise<void> {
    const settled = await store.transact((tx) => this.settleStored(tx, key, batch, outcome));
    const known = this.batches.prepared.get(key);
    if (known) known.inflight = false;
    if (settled.verdict !== "retry") this.batches.prepared.delete(key);
    if (settled.verdict === "delivered") {
      this.failures = 0;
      this.lastError = null;
      this.told = null;
      return;
    }
    this.lastError = `HTTP ${outcome.status ?? "-"}: ${outcome.reason}`;
    if (settled.verdict === "too_large") this.batches.limit = Math.max(1, Math.floor(batch.rows.length / 2));
    let problem = settled.problem;
    if (settled.verdict === "reject") {
      problem ??= {
        kind: "reports_refused",
        field: "reports",
        reason: `the collector refused reports of campaign ${batch.c} for good (${this.lastError}); they are kept as dead letters`,
        httpStatus: outcome.status,
      };
      this.outcomes.log(`rejected-${outcome.status}`, `ldptel: a batch of ${batch.c} was refused: ${this.lastError}`, "warn");
      if (outcome.status === 409) this.cache.forget(batch.c);
    }
    if (problem) this.tell(new DeliveryError(problem));
    if (settled.verdict === "retry") this.wake(0);
  }

  /** The answer applied to the stored batch, in its transaction: kept for a retry (with
   * the sender's backoff), or its reports delivered, dead-lettered or unbatched (413). */
  private async settleStored(tx: Tx, key: string, batch: BatchRow, outcome: Outcome): Promise<Settled> {
    const t = now();
    const meta = await readMeta(tx);
    const current = await tx.get<BatchRow>(key);
    if (!current) return { verdict: "delivered", problem: null }; // another tab settled it: nothing to tell
    let settled: Settled = { verdict: outcome.verdict, problem: outcome.problem };
    if (settled.verdict === "token") {
      // A fixed token could deliver it: retried for authWait from its first refusal.
      const since = current.refusedAt ?? t;
      current.refusedAt = since;
      if (t - since < this.settings.authWait) {
        settled = { ...settled, verdict: "retry" };
      } else {
        const reason = `${outcome.reason}; reports of campaign ${batch.c} were dead-lettered after waiting authWait = ${this.settings.authWait} s for a fixed token`;
        settled = { verdict: "reject", problem: { ...(settled.problem as Problem), reason } };
      }
    }
    if (settled.verdict === "retry") {
      this.backoff(t, outcome.retryAfter);
      tx.put(key, { ...current, claim: undefined });
    } else {
      for (const id of current.rows) {
        const row = await tx.get<SpoolRow>(id);
        if (!row) continue;
        if (settled.verdict === "too_large") {
          const { b: _batch, ...rest } = row;
          tx.put(id, rest);
          continue;
        }
        tx.delete(id);
        meta.spooled -= 1;
        if (settled.verdict === "delivered") meta.delivered += 1;
        else meta.deadLettered += 1;
      }
      tx.delete(key);
      if (settled.verdict === "reject") tx.put(`dead/${key.slice(6)}`, { c: batch.c, status: outcome.status, reason: outcome.reason, reports: current.rows.length });
      tx.put("meta", meta);
    }
    tx.put("clock", this.clock.save());
    return settled;
  }

  /** One backoff for the whole sender, in memory (a new process asks at once): full
   * jitter under the capped exponential, at least the Retry-After asked for. */
  private backoff(t: number, retryAfter: number | null): void {
    this.failures += 1;
    const cap = Math.min(this.settings.backoffCap, this.settings.backoffBase * 2 ** Math.min(this.failures, 62));
    let delay = (this.rng.below(2 ** 32) / 2 ** 32) * cap;
    if (retryAfter !== null) delay = Math.max(delay, Math.min(retryAfter, MAX_RETRY_AFTER));
    this.holdUntil = t + delay;
  }

  /** A delivery error to onError (and the console, once per kind), once until it changes or
   * a batch is delivered: a retry of the same answer tells nothing new. */
  private tell(error: DeliveryError): void {
    if (error.message === this.told) return;
    this.told = error.message;
    if (error.kind !== "reports_refused") this.outcomes.log(error.kind, `ldptel: reports wait in the spool: ${error.message}`, "warn");
    this.outcomes.callOnError(error);
  }

  /** Send everything spooled now (batch size and age ignored); true once none of it is
   * left in the spool (delivered, dead-lettered or dropped), false if `timeoutMs` passes
   * first (the rest stays spooled). */
  async flush(timeoutMs: number): Promise<boolean> {
    const deadline = now() + timeoutMs / 1000;
    let store: Store;
    try {
      store = await this.state.open();
    } catch {
      return false;
    }
    const waiting = new Set((await store.transact((tx) => tx.entries<SpoolRow>("spool/"))).map(([k]) => k));
    this.batches.flushing += 1;
    try {
      for (;;) {
        await this.run();
        const left = await store.transact(async (tx) => {
          let n = 0;
          for (const key of waiting) if (await tx.get(key)) n++;
          return n;
        });
        if (left === 0) return true;
        const remaining = deadline - now();
        if (remaining <= 0) return false;
        await sleep(Math.min(remaining, Math.max(0.05, this.holdUntil - now(), 0.05)) * 1000);
      }
    } finally {
      this.batches.flushing -= 1;
    }
  }

  /** The timer stopped and the run under way finished (close). */
  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running?.catch(() => undefined);
  }

  /** The page is being hidden (maybe unloaded): post this session's batches now with
   * fetch keepalive (each within its size limit; not compressed: CompressionStream might
   * not finish). Their keys are durable, so one the page never hears back from is resent,
   * under the same key, on the next visit. Reports not in a batch wait for that visit. */
  deliverOnHide(): void {
    const store = this.state.store;
    if (this.state.closed || !store) return;
    for (const [key, known] of this.batches.prepared) {
      if (known.inflight || known.bytes > KEEPALIVE_BYTES) continue;
      known.sealed = known.inflight = true;
      const batch = { ...known.batch, open: false };
      const posting = this.post(batch, known.reports, true); // fetch starts synchronously
      void store.transact(async (tx) => {
        const stored = await tx.get<BatchRow>(key);
        if (stored) tx.put(key, { ...stored, open: false });
      }).catch(() => undefined);
      void posting.then((outcome) => this.settle(store, key, batch, outcome)).catch(() => undefined);
    }
  }
}
