/**
 * The Reporter (docs/client-js.md): `report()` validates a value, charges the privacy
 * ledger, randomizes on the device and spools the report in one transaction; a sender in
 * the background batches the spool, posts it under an idempotency key, retries with
 * backoff, and never raises into the app. The same promises and ledger decisions as the
 * Python SDK (docs/client.md), in the platform's idiom: promises, IndexedDB or files.
 */

import { ServerClock } from "./clock.js";
import { CampaignConfig, LevelError } from "./config.js";
import { fromHex, hex, sha256, utf8 } from "./hash.js";
import { BudgetExhausted, type Guarantee, type Spent, charge, chargedWindow, guarantee, prune, spent } from "./ledger.js";
import { ConfigError } from "./oracles.js";
import { SecureRandom } from "./random.js";
import { type Value, spend } from "./randomize.js";
import { FileStore, IndexedDbStore, MemoryStore, type Store, StoreError, type Tx } from "./store.js";
import { type Answer, type DeliveryKind, type Outcome, type Problem, classify, exchange, networkReason, problemOf, reasonOf } from "./transport.js";
import { openValue } from "./wire.js";

export type ReportStatus =
  | "spooled"
  | "retired"
  | "level_not_collected"
  | "disabled"
  | "budget_exhausted"
  | "unknown_campaign"
  | "campaign_unavailable"
  | "invalid_value"
  | "invalid_level"
  | "disk_full"
  | "state_error"
  | "closed"
  | "internal_error";

/** Every error the app sees (through `onError`): the status it caused, the field at fault
 * and why. Never thrown into the app by `report()`. */
export class LdptelError extends Error {
  constructor(
    readonly status: ReportStatus | "delivery",
    readonly field: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`${field}: ${reason}`, options);
    this.name = "LdptelError";
  }
}

/** An answer retrying alone will not get past (docs/client-js.md, "What the app sees"):
 * the reports wait for a change of configuration (the token, the collector's URL, a proxy
 * before it), or, kind "reports_refused", were refused for good. Passed to `onError` by the
 * sender, once until it changes or a batch is delivered; never contains the token.
 * `report()` resolves to "campaign_unavailable" when a first config fetch meets one. */
export class DeliveryError extends LdptelError {
  readonly kind: DeliveryKind;
  readonly httpStatus: number | null;
  constructor(problem: Problem) {
    super("delivery", problem.field, problem.reason);
    this.name = "DeliveryError";
    this.kind = problem.kind;
    this.httpStatus = problem.httpStatus;
  }
}

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

interface Settings {
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

interface SpoolRow {
  c: string; // campaign
  id: string; // config id
  l: string; // level ("" = none)
  w: number; // window charged to (collector's clock)
  r: string; // the wire report, JSON
  t: number; // made at (device seconds): batch age
  b?: string; // the batch it is in
}

interface BatchRow {
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

/** This session's batches in memory, so that a page being hidden can post them at once
 * (fetch keepalive must start before the page is gone; IndexedDB is too slow then). */
interface Prepared {
  batch: BatchRow;
  reports: string[];
  bytes: number;
  sealed: boolean;
  inflight: boolean;
}

interface Meta {
  seq: number;
  spooled: number;
  delivered: number;
  deadLettered: number;
  dropped: number;
}

interface CachedConfig {
  status: "active" | "retired";
  answer: unknown;
  fetchedAt: number;
}

/** A batch is not posted in the last timeout + this many seconds of its window. */
const WINDOW_MARGIN_EXTRA = 2;
const UNKNOWN_CAMPAIGN_SECONDS = 60;
const STATE_RETRY_SECONDS = 30;
const CLAIM_SECONDS = 120;
/** Longest nap of the sender while anything is spooled (client/sender.py's MAX_NAP). */
const MAX_NAP = 5;
const MAX_RETRY_AFTER = 3600;
/** fetch keepalive bodies share 64 KiB in flight per page (Fetch standard). */
const KEEPALIVE_BYTES = 60_000;
const NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const LEVEL_NAME = /^[a-z0-9_-]{1,32}$/;

const now = (): number => Date.now() / 1000;
const pad = (n: number): string => String(n).padStart(12, "0");
const isBrowser = (): boolean => typeof indexedDB !== "undefined" && typeof window !== "undefined";
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function positiveOption(value: number | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !(value > 0) || !Number.isFinite(value)) {
    throw new RangeError(`ldptel: ${name} must be a positive number`);
  }
  return value;
}

async function defaultStateDir(token: string): Promise<string> {
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

export class Reporter {
  readonly collectorUrl: string;
  private readonly token: string;
  private readonly settings: Settings;
  private readonly onError: ((error: LdptelError) => void) | undefined;
  private readonly fetcher: typeof fetch;
  private readonly stateDir: string | null | undefined;
  private readonly rng = new SecureRandom();
  private readonly clock = new ServerClock();
  private readonly claim = hex(new SecureRandom().bytes(8));
  private store: Store | null = null;
  private opening: Promise<Store | null> | null = null;
  private stateFailedAt = -Infinity;
  private memoSecret: Uint8Array | null = null;
  private readonly active = new Map<string, { config: CampaignConfig; fetchedAt: number }>();
  private readonly retired = new Set<string>();
  private readonly unknown = new Map<string, number>();
  private readonly unavailable = new Map<string, { retryAt: number; failures: number; reason: string }>();
  private readonly refreshing = new Set<string>();
  private readonly notSpooled: Partial<Record<ReportStatus, number>> = {};
  private readonly logged = new Set<string>();
  private closed = false;
  private lastError: string | null = null;
  /** The last delivery error told to onError (told again only when it changes). */
  private told: string | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private timerAt = 0;
  /** A wake-up came while the sender ran: run it once more after. */
  private again = false;
  private running: Promise<void> | null = null;
  private failures = 0;
  private holdUntil = 0;
  private batchLimit: number;
  private flushing = 0;
  private unsent = 0;
  private prunedAt = 0;
  private readonly detach: (() => void)[] = [];
  private readonly prepared = new Map<string, Prepared>();
  /** Browsers: reports join an open batch in their own transaction (its idempotency key is
   * durable before any keepalive post of it). */
  private readonly eager = isBrowser();

  constructor(collectorUrl: string, token: string, options: ReporterOptions = {}) {
    if (typeof collectorUrl !== "string" || !/^https?:\/\//.test(collectorUrl)) {
      throw new TypeError("ldptel: collectorUrl must be an http(s) URL");
    }
    if (typeof token !== "string" || !token) throw new TypeError("ldptel: token must be a non-empty string");
    this.collectorUrl = collectorUrl.replace(/\/+$/, "");
    this.token = token;
    const batchSize = positiveOption(options.batchSize, "batchSize", 500);
    if (!Number.isInteger(batchSize)) throw new RangeError("ldptel: batchSize must be an integer");
    this.settings = {
      level: Reporter.checkLevel(options.level ?? null),
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
    this.batchLimit = batchSize;
    this.onError = options.onError;
    this.stateDir = options.stateDir;
    const platformFetch = options.fetch ?? globalThis.fetch;
    this.fetcher = (input, init) => platformFetch(input, init);
    if (!this.settings.enabled) return;
    this.attachExitHooks();
    for (const name of options.campaigns ?? []) void this.campaign(name).catch(() => undefined);
  }

  private static checkLevel(level: string | null): string | null {
    if (level !== null && (typeof level !== "string" || !LEVEL_NAME.test(level))) {
      throw new RangeError("ldptel: level must match [a-z0-9_-]{1,32}");
    }
    return level;
  }

  /** The default privacy level (campaigns without levels ignore it). */
  get level(): string | null {
    return this.settings.level;
  }
  set level(level: string | null) {
    this.settings.level = Reporter.checkLevel(level);
  }

  // -- state ---------------------------------------------------------------------------------
  private async openStore(): Promise<Store> {
    if (this.store) return this.store;
    if (now() - this.stateFailedAt < STATE_RETRY_SECONDS && !this.opening) {
      throw new LdptelError("state_error", "state", "the state cannot be opened (retrying every 30 s)");
    }
    this.opening ??= (async () => {
      try {
        let store: Store;
        if (isBrowser()) store = await IndexedDbStore.open(`ldptel-${hex(sha256(utf8(this.token))).slice(0, 16)}`);
        else if (this.stateDir === null) store = new MemoryStore();
        else store = await FileStore.open(this.stateDir ?? (await defaultStateDir(this.token)));
        await store.transact(async (tx) => {
          let identity = await tx.get<{ memoSecret: string }>("identity");
          if (!identity) {
            identity = { memoSecret: hex(this.rng.bytes(32)) };
            tx.put("identity", identity);
          }
          this.memoSecret = fromHex(identity.memoSecret);
          this.clock.load(await tx.get("clock"));
          // A file store has one process (its lock file): every claim left is of a process
          // gone. Tabs sharing IndexedDB keep each other's claims until they expire.
          const exclusive = !(store instanceof IndexedDbStore);
          for (const [key, batch] of await tx.entries<BatchRow>("batch/")) {
            if (batch.claim && (exclusive || (batch.claimedUntil ?? 0) < now())) tx.put(key, { ...batch, claim: undefined });
          }
        });
        this.store = store;
        return store;
      } catch (error) {
        this.stateFailedAt = now();
        return null;
      } finally {
        this.opening = null;
      }
    })();
    const store = await this.opening;
    if (!store) throw new LdptelError("state_error", "state", "the state cannot be opened (stateDir unusable, or IndexedDB unavailable)");
    return store;
  }

  // -- report --------------------------------------------------------------------------------
  /** Randomize `value` on the device and spool it for sending: a label of the campaign's
   * domain, any text of at most `max_length` UTF-8 bytes (open domains), or a number
   * (clipped into the range). Never rejects: resolves to "spooled" once the report is in
   * the spool, else to why not (docs/client-js.md, "What the app sees"). */
  async report(campaign: string, value: string | number, options: { level?: string } = {}): Promise<ReportStatus> {
    if (!this.settings.enabled) return this.count("disabled");
    try {
      return await this.reportOnce(campaign, value, options.level);
    } catch (error) {
      return this.refused(error, `report to ${JSON.stringify(String(campaign)).slice(0, 80)}`);
    }
  }

  private async reportOnce(campaign: string, value: string | number, explicit: string | undefined): Promise<ReportStatus> {
    if (this.closed) throw new LdptelError("closed", "reporter", "closed; create a new Reporter");
    const store = await this.openStore();
    const config = await this.campaign(campaign);
    if (config === null) return this.count("retired");
    const level = this.levelOf(config, explicit);
    if (config.reportingEpsilon(level) === null) return this.count("level_not_collected");
    const checked = this.valueOf(config, value);
    const window = this.chargedWindow(config);
    const budget = config.budget(level);
    const memoSecret = this.memoSecret as Uint8Array;
    const joined: { batch: [string, BatchRow, string] | null } = { batch: null };
    await store.transact(async (tx) => {
      const { wire, cost } = await spend(tx, config, level, checked, memoSecret, this.rng, window);
      await charge(tx, campaign, window, config.windowSeconds, cost, budget);
      const meta = await this.meta(tx);
      meta.seq += 1;
      meta.spooled += 1;
      const row: SpoolRow = { c: campaign, id: config.configId, l: level, w: window, r: wire, t: now() };
      const rowKey = `spool/${pad(meta.seq)}`;
      if (this.eager) joined.batch = await this.joinOpenBatch(tx, rowKey, row);
      tx.put(rowKey, row);
      if (meta.spooled > this.settings.maxSpoolRows) await this.dropOldest(tx, meta);
      tx.put("meta", meta);
    });
    if (joined.batch) {
      const [batchKey, batch, wire] = joined.batch;
      const known = this.prepared.get(batchKey);
      if (known) {
        known.batch = batch;
        known.reports.push(wire);
        known.bytes += wire.length + 1;
      } else {
        this.prepared.set(batchKey, { batch, reports: [wire], bytes: wire.length + 200, sealed: false, inflight: false });
      }
    }
    this.unsent += 1;
    if (this.unsent === 1 || this.unsent >= this.batchLimit) this.wake(0);
    else this.wake(this.settings.maxBatchAge * 1000);
    return "spooled";
  }

  /** Browsers: add a postable report to this session's open batch of its group (a new one
   * when there is none, or it would pass the keepalive size or the batch size). */
  private async joinOpenBatch(tx: Tx, rowKey: string, row: SpoolRow): Promise<[string, BatchRow, string] | null> {
    const rule = this.rule(row.c, row.l);
    if (rule === null || rule === "refused" || !rule.postable || rule.window !== row.w) return null;
    const t = now();
    for (const [key, known] of this.prepared) {
      const b = known.batch;
      if (known.sealed || b.c !== row.c || b.id !== row.id || b.l !== row.l) continue;
      if (b.rows.length >= this.batchLimit || known.bytes + row.r.length + 1 > KEEPALIVE_BYTES) continue;
      const stored = await tx.get<BatchRow>(key);
      if (!stored?.open) continue;
      const batch = { ...stored, rows: [...stored.rows, rowKey] };
      tx.put(key, batch);
      row.b = key;
      return [key, batch, row.r];
    }
    const key = `batch/${pad(Math.floor(t * 1000))}-${hex(this.rng.bytes(4))}`;
    const batch: BatchRow = { key: hex(this.rng.bytes(16)), c: row.c, id: row.id, l: row.l, rows: [rowKey], nextAt: t + this.settings.maxBatchAge, open: true };
    tx.put(key, batch);
    row.b = key;
    return [key, batch, row.r];
  }

  private async meta(tx: Tx): Promise<Meta> {
    return (await tx.get<Meta>("meta")) ?? { seq: 0, spooled: 0, delivered: 0, deadLettered: 0, dropped: 0 };
  }

  /** Beyond maxSpoolRows the oldest unbatched reports are dropped (counted). */
  private async dropOldest(tx: Tx, meta: Meta): Promise<void> {
    for (const [key, row] of await tx.entries<SpoolRow>("spool/")) {
      if (meta.spooled <= this.settings.maxSpoolRows) return;
      if (row.b) continue;
      tx.delete(key);
      meta.spooled -= 1;
      meta.dropped += 1;
    }
  }

  private levelOf(config: CampaignConfig, explicit: string | undefined): string {
    if (explicit !== undefined) {
      if (typeof explicit !== "string") throw new LdptelError("invalid_level", "level", "must be a string");
      config.reportingEpsilon(explicit); // the level rule: throws LevelError
      return explicit;
    }
    if (!config.hasLevels) return "";
    const level = this.settings.level ?? "";
    config.reportingEpsilon(level);
    return level;
  }

  private valueOf(config: CampaignConfig, value: unknown): Value {
    if (config.range !== null) {
      if (typeof value !== "number" || Number.isNaN(value)) {
        throw new LdptelError("invalid_value", "value", "must be a number (not NaN)");
      }
      return value;
    }
    if (typeof value !== "string") throw new LdptelError("invalid_value", "value", `must be a string, got ${typeof value}`);
    if (config.maxLength !== null) {
      const checked = openValue(value, config.maxLength);
      if ("reason" in checked) throw new LdptelError("invalid_value", "value", checked.reason);
      return checked.text;
    }
    let index = config.indexOf(value);
    if (index < 0 && config.otherLabel !== null) index = config.indexOf(config.otherLabel);
    if (index < 0) throw new LdptelError("invalid_value", "value", "is not in the campaign's domain");
    return index;
  }

  private count(status: ReportStatus): ReportStatus {
    this.notSpooled[status] = (this.notSpooled[status] ?? 0) + 1;
    return status;
  }

  private refused(raw: unknown, what: string): ReportStatus {
    const error = Reporter.asError(raw);
    // A delivery error met by a first config fetch: no config, so nothing was spooled.
    const status = error.status === "delivery" ? "campaign_unavailable" : error.status;
    this.count(status);
    this.log(status, `ldptel: ${what}: ${error.message}`, status === "budget_exhausted" ? "info" : "warn");
    this.callOnError(error);
    return status;
  }

  private static asError(raw: unknown): LdptelError {
    if (raw instanceof LdptelError) return raw;
    if (raw instanceof BudgetExhausted) return new LdptelError("budget_exhausted", raw.field, raw.reason, { cause: raw });
    if (raw instanceof LevelError) return new LdptelError("invalid_level", "level", raw.reason, { cause: raw });
    if (raw instanceof StoreError) return new LdptelError(raw.kind, "state", raw.reason, { cause: raw });
    return new LdptelError("internal_error", "ldptel", `a bug in ldptel: ${String(raw)}`.slice(0, 300), { cause: raw });
  }

  private callOnError(error: LdptelError): void {
    if (!this.onError) return;
    try {
      this.onError(error);
    } catch {
      this.log("on_error", "ldptel: the onError callback threw", "warn");
    }
  }

  /** Once per kind at warn, then silent: messages name campaigns and fields, never values. */
  private log(kind: string, message: string, level: "warn" | "info"): void {
    if (this.logged.has(kind)) return;
    this.logged.add(kind);
    if (level === "warn") console.warn(message);
  }

  // -- campaigns -----------------------------------------------------------------------------
  /** The campaign's active config (null if retired): fetched on first use if none is
   * cached, revalidated in the background when older than configRefresh. */
  private async campaign(name: string): Promise<CampaignConfig | null> {
    if (typeof name !== "string" || !NAME.test(name)) {
      throw new LdptelError("unknown_campaign", "campaign", "must match [a-z0-9][a-z0-9_-]{0,63}");
    }
    const known = this.active.get(name);
    if (known) {
      if (now() - known.fetchedAt > this.settings.configRefresh) void this.refresh(name);
      return known.config;
    }
    if (this.retired.has(name)) return null;
    if (now() - (this.unknown.get(name) ?? -Infinity) < UNKNOWN_CAMPAIGN_SECONDS) {
      throw new LdptelError("unknown_campaign", "campaign", `the collector does not know ${name}`);
    }
    const store = await this.openStore();
    const cached = await store.transact((tx) => tx.get<CachedConfig>(`config/${name}`));
    if (cached) {
      if (cached.status === "retired") {
        this.retired.add(name);
        return null;
      }
      try {
        const config = new CampaignConfig(cached.answer);
        this.active.set(name, { config, fetchedAt: cached.fetchedAt });
        return this.campaign(name);
      } catch {
        // a cached config this version refuses: ask the collector
      }
    }
    const waiting = this.unavailable.get(name);
    if (waiting && waiting.retryAt > now()) {
      throw new LdptelError("campaign_unavailable", "campaign", `${waiting.reason} (asking again later)`);
    }
    try {
      await this.fetchConfig(name, null);
    } catch (error) {
      if (error instanceof LdptelError && (error.status === "campaign_unavailable" || error instanceof DeliveryError)) {
        const failures = (waiting?.failures ?? 0) + 1;
        const delay = Math.min(this.settings.backoffCap, this.settings.backoffBase * 2 ** Math.min(failures - 1, 62));
        this.unavailable.set(name, { retryAt: now() + delay, failures, reason: error.reason });
      }
      throw error;
    }
    this.unavailable.delete(name);
    if (this.retired.has(name)) return null;
    return this.active.get(name)?.config ?? null;
  }

  private async refresh(name: string): Promise<void> {
    if (this.refreshing.has(name)) return;
    this.refreshing.add(name);
    try {
      await this.fetchConfig(name, this.active.get(name)?.config ?? null);
    } catch {
      // keep the cached config; asked again after configRefresh
      const known = this.active.get(name);
      if (known) known.fetchedAt = now();
    } finally {
      this.refreshing.delete(name);
    }
  }

  private headers(): Record<string, string> {
    return { Authorization: `Bearer ${this.token}` };
  }

  /** One call to the collector under the total deadline (transport.exchange). */
  private exchange(path: string, init: RequestInit): Promise<Answer | Problem> {
    const observe = (date: string | null): void => this.clock.observe(date);
    return exchange(this.fetcher, this.collectorUrl, `${this.collectorUrl}${path}`, init, this.settings.timeout, observe);
  }

  /** GET /v1/campaigns/<name> (conditional on the current config's id); adopts the answer
   * or throws unknown_campaign / campaign_unavailable (a DeliveryError for an answer
   * retrying alone will not get past). */
  private async fetchConfig(name: string, current: CampaignConfig | null): Promise<void> {
    const headers = this.headers();
    if (current) headers["If-None-Match"] = `"${current.configId}"`;
    const unavailable = (why: string, cause?: unknown): LdptelError =>
      new LdptelError("campaign_unavailable", "campaign", `no config for ${name} yet: ${why}`, { cause });
    let answer: Answer | Problem;
    try {
      answer = await this.exchange(`/v1/campaigns/${name}`, { headers });
    } catch (error) {
      throw unavailable(networkReason(error, this.settings.timeout), error);
    }
    if ("kind" in answer) throw new DeliveryError(answer);
    if (answer.status === 304 && current) {
      await this.adopt(name, { status: "active", answer: null, fetchedAt: now() }, current);
      return;
    }
    if (answer.status === 410) {
      await this.adopt(name, { status: "retired", answer: null, fetchedAt: now() }, null);
      return;
    }
    if (answer.status !== 200) {
      const problem = problemOf(answer);
      if (problem) throw new DeliveryError(problem);
      if (answer.status === 404) {
        this.unknown.set(name, now());
        throw new LdptelError("unknown_campaign", "campaign", `the collector does not know ${name}`);
      }
      throw unavailable(reasonOf(answer));
    }
    let config: CampaignConfig;
    try {
      config = new CampaignConfig(answer.json);
    } catch (error) {
      throw unavailable(error instanceof ConfigError ? `config invalid (${error.message})` : "not the collector's answer", error);
    }
    if (config.name !== name) throw unavailable("the collector answered another campaign");
    await this.adopt(name, { status: "active", answer: answer.json, fetchedAt: now() }, config);
  }

  private async adopt(name: string, cached: CachedConfig, config: CampaignConfig | null): Promise<void> {
    const store = await this.openStore();
    if (cached.status === "retired" || !config) {
      this.retired.add(name);
      this.active.delete(name);
      await store.transact(async (tx) => tx.put(`config/${name}`, cached));
      return;
    }
    this.retired.delete(name);
    this.active.set(name, { config, fetchedAt: cached.fetchedAt });
    await store.transact(async (tx) => {
      const stored = cached.answer ?? (await tx.get<CachedConfig>(`config/${name}`))?.answer;
      tx.put(`config/${name}`, { ...cached, answer: stored });
    });
  }

  // -- windows -------------------------------------------------------------------------------
  private margin(): number {
    return this.settings.timeout + WINDOW_MARGIN_EXTRA;
  }

  /** The collector's window a report made now is charged to: the current one, or the next
   * when the current ends within the margin (it could not be posted in time). */
  private chargedWindow(config: CampaignConfig): number {
    return chargedWindow(config, this.clock.now(), this.margin());
  }

  /** How a campaign's reports at `level` may be posted now; null: held (no config, clock
   * not set in this process, or a level the config no longer reports at); "refused": a
   * retired campaign, whose reports are posted to be dead-lettered. */
  private rule(campaign: string, level: string): { window: number; postable: boolean; nextIn: number; config: CampaignConfig } | "refused" | null {
    if (this.retired.has(campaign)) return "refused";
    if (!this.clock.synced) return null;
    const config = this.active.get(campaign)?.config;
    if (!config) return null;
    try {
      if (config.reportingEpsilon(level) === null) return null;
    } catch {
      return null;
    }
    const t = this.clock.now();
    const window = config.windowOf(t);
    const nextIn = window + config.windowSeconds - t;
    return { window, postable: nextIn > this.margin(), nextIn, config };
  }

  /** Charge `count` reports to `window` (not for life: they were), all or none. */
  private async move(tx: Tx, campaign: string, level: string, window: number, count: number, config: CampaignConfig): Promise<boolean> {
    const budget = config.budget(level);
    const cost = config.reportingEpsilon(level) ?? 0;
    const key = `ledger/${campaign}/${pad(window)}`;
    const before = await tx.get(key);
    try {
      for (let i = 0; i < count; i++) await charge(tx, campaign, window, config.windowSeconds, cost, budget, false);
      return true;
    } catch (error) {
      if (!(error instanceof BudgetExhausted)) throw error;
      if (before === undefined) tx.delete(key);
      else tx.put(key, before);
      return false;
    }
  }

  // -- sending -------------------------------------------------------------------------------
  /** Run the sender in `delayMs` (or sooner if already due sooner; never before the
   * backoff ends). */
  private wake(delayMs: number): void {
    if (this.closed && !this.flushing) return;
    const at = Date.now() + Math.max(delayMs, (this.holdUntil - now()) * 1000, 0);
    if (this.timer !== null) {
      if (this.timerAt <= at) return; // already due by then
      clearTimeout(this.timer);
    }
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.running) this.again = true;
      else void this.runSender();
    }, at - Date.now());
    (this.timer as { unref?: () => void }).unref?.();
  }

  private runSender(): Promise<void> {
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
    const store = this.store;
    if (!store || now() < this.holdUntil) {
      if (store) this.wake(0);
      return false;
    }
    if (!this.clock.synced) await this.syncClock(store);
    if (!this.clock.synced) return false;
    const batch = await store.transact((tx) => this.nextBatch(tx));
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
    await this.refresh(first.c);
    if (!this.active.has(first.c) && !this.retired.has(first.c)) {
      await this.campaign(first.c).catch(() => undefined);
    }
  }

  private async nextBatch(tx: Tx): Promise<[string, BatchRow] | null> {
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
    // A batch already formed (a retry), due and not claimed by another tab.
    for (const [key, batch] of await tx.entries<BatchRow>("batch/")) {
      const full = batch.open && batch.rows.length >= this.batchLimit;
      if (batch.nextAt > t && !(batch.open && (this.flushing > 0 || full))) {
        later(batch.nextAt);
        continue;
      }
      if (batch.claim && batch.claim !== this.claim && (batch.claimedUntil ?? 0) > t) continue;
      const rule = this.rule(batch.c, batch.l);
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
    // Else a new batch from the spool: one campaign, config and level, in spool order.
    const rows = await tx.entries<SpoolRow>("spool/");
    let pending = 0;
    let oldest = Infinity;
    let group: { c: string; id: string; l: string } | null = null;
    const chosen: string[] = [];
    for (const [key, row] of rows) {
      if (row.b) continue;
      const rule = this.rule(row.c, row.l);
      if (rule === null || (rule !== "refused" && !rule.postable)) continue;
      if (rule !== "refused" && row.w !== rule.window) {
        if (!(await this.move(tx, row.c, row.l, rule.window, 1, rule.config))) continue; // held
        row.w = rule.window;
        tx.put(key, row);
      }
      pending += 1;
      oldest = Math.min(oldest, row.t);
      group ??= { c: row.c, id: row.id, l: row.l };
      if (chosen.length < this.batchLimit && row.c === group.c && row.id === group.id && row.l === group.l) {
        chosen.push(key);
      }
    }
    const due = this.flushing > 0 || pending >= this.batchLimit || t - oldest >= this.settings.maxBatchAge;
    if (!group || !chosen.length || !due) {
      if (Number.isFinite(oldest)) later(oldest + this.settings.maxBatchAge);
      if (rows.length || soonest < t + MAX_NAP) this.wake(Math.max(0, (soonest - t) * 1000));
      return null;
    }
    const batchKey = `batch/${pad(Math.floor(t * 1000))}-${hex(this.rng.bytes(4))}`;
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
  private async settleBatchWindow(tx: Tx, batch: BatchRow, rule: { window: number; postable: boolean; config: CampaignConfig }): Promise<boolean> {
    if (!rule.postable) return false;
    const rows: [string, SpoolRow][] = [];
    for (const key of batch.rows) {
      const row = await tx.get<SpoolRow>(key);
      if (row && row.w !== rule.window) rows.push([key, row]);
    }
    if (!rows.length) return true;
    if (!(await this.move(tx, batch.c, batch.l, rule.window, rows.length, rule.config))) return false;
    for (const [key, row] of rows) tx.put(key, { ...row, w: rule.window });
    return true;
  }

  private async post(batch: BatchRow, reports: string[], keepalive: boolean): Promise<Outcome> {
    const envelope: Record<string, string> = { campaign: batch.c, config_id: batch.id };
    if (batch.l) envelope["level"] = batch.l;
    const head = JSON.stringify(envelope);
    const text = `${head.slice(0, -1)},"reports":[${reports.join(",")}]}`;
    const headers: Record<string, string> = {
      ...this.headers(),
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
      answer = await this.exchange("/v1/reports", { method: "POST", headers, body, keepalive });
    } catch (error) {
      return { verdict: "retry", status: null, reason: networkReason(error, this.settings.timeout), retryAfter: null, problem: null };
    }
    if ("kind" in answer) return { verdict: "retry", status: answer.httpStatus, reason: answer.reason, retryAfter: null, problem: answer };
    return classify(answer, reports.length);
  }

  private async settle(store: Store, key: string, batch: BatchRow, outcome: Outcome): Promise<void> {
    const t = now();
    let verdict = outcome.verdict;
    let problem = outcome.problem;
    await store.transact(async (tx) => {
      const meta = await this.meta(tx);
      const current = await tx.get<BatchRow>(key);
      if (!current) {
        verdict = "delivered"; // another tab settled it: nothing to tell
        problem = null;
        return;
      }
      if (verdict === "token") {
        // A fixed token could deliver it: retried for authWait from its first refusal.
        const since = current.refusedAt ?? t;
        current.refusedAt = since;
        if (t - since < this.settings.authWait) {
          verdict = "retry";
        } else {
          verdict = "reject";
          problem = { ...(problem as Problem), reason: `${outcome.reason}; reports of campaign ${batch.c} were dead-lettered after waiting authWait = ${this.settings.authWait} s for a fixed token` };
        }
      }
      if (verdict === "retry") {
        this.failures += 1;
        const cap = Math.min(this.settings.backoffCap, this.settings.backoffBase * 2 ** Math.min(this.failures, 62));
        let delay = (this.rng.below(2 ** 32) / 2 ** 32) * cap; // full jitter
        if (outcome.retryAfter !== null) delay = Math.max(delay, Math.min(outcome.retryAfter, MAX_RETRY_AFTER));
        // One backoff for the whole sender, in memory: a new process asks at once.
        this.holdUntil = t + delay;
        tx.put(key, { ...current, claim: undefined });
      } else {
        for (const id of current.rows) {
          const row = await tx.get<SpoolRow>(id);
          if (!row) continue;
          if (verdict === "too_large") {
            const { b: _batch, ...rest } = row;
            tx.put(id, rest);
            continue;
          }
          tx.delete(id);
          meta.spooled -= 1;
          if (verdict === "delivered") meta.delivered += 1;
          else meta.deadLettered += 1;
        }
        tx.delete(key);
        if (verdict === "reject") tx.put(`dead/${key.slice(6)}`, { c: batch.c, status: outcome.status, reason: outcome.reason, reports: current.rows.length });
        tx.put("meta", meta);
      }
      tx.put("clock", this.clock.save());
    });
    const known = this.prepared.get(key);
    if (known) known.inflight = false;
    if (verdict !== "retry") this.prepared.delete(key);
    if (verdict === "delivered") {
      this.failures = 0;
      this.lastError = null;
      this.told = null;
      return;
    }
    this.lastError = `HTTP ${outcome.status ?? "-"}: ${outcome.reason}`;
    if (verdict === "too_large") this.batchLimit = Math.max(1, Math.floor(batch.rows.length / 2));
    if (verdict === "reject") {
      problem ??= {
        kind: "reports_refused",
        field: "reports",
        reason: `the collector refused reports of campaign ${batch.c} for good (${this.lastError}); they are kept as dead letters`,
        httpStatus: outcome.status,
      };
      this.log(`rejected-${outcome.status}`, `ldptel: a batch of ${batch.c} was refused: ${this.lastError}`, "warn");
      if (outcome.status === 409) {
        this.active.delete(batch.c);
        void this.campaign(batch.c).catch(() => undefined);
      }
    }
    if (problem) this.tell(new DeliveryError(problem));
    if (verdict === "retry") this.wake(0);
  }

  /** A delivery error to onError (and the console, once per kind), once until it changes or
   * a batch is delivered: a retry of the same answer tells nothing new. */
  private tell(error: DeliveryError): void {
    if (error.message === this.told) return;
    this.told = error.message;
    if (error.kind !== "reports_refused") this.log(error.kind, `ldptel: reports wait in the spool: ${error.message}`, "warn");
    this.callOnError(error);
  }

  /** Send everything spooled now (batch size and age ignored); true once none of it is
   * left in the spool (delivered, dead-lettered or dropped), false if `timeoutMs` passes
   * first (the rest stays spooled). */
  async flush(timeoutMs = 10_000): Promise<boolean> {
    if (!this.settings.enabled) return true;
    const deadline = now() + timeoutMs / 1000;
    let store: Store;
    try {
      store = await this.openStore();
    } catch {
      return false;
    }
    const waiting = new Set((await store.transact((tx) => tx.entries<SpoolRow>("spool/"))).map(([k]) => k));
    this.flushing += 1;
    try {
      for (;;) {
        await this.runSender();
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
      this.flushing -= 1;
    }
  }

  /** Deliver the spool for up to `timeoutMs`, then stop; what is not delivered stays in the
   * spool for the next Reporter on this state. */
  async close(timeoutMs = 2000): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const undo of this.detach) undo();
    if (timeoutMs > 0 && this.store) await this.flush(timeoutMs).catch(() => false);
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running?.catch(() => undefined);
    const store = this.store;
    this.store = null;
    await store?.close().catch(() => undefined);
  }

  /** Spool and delivery counters (persisted), and this session's report() calls that
   * spooled nothing, by status. */
  async stats(): Promise<Stats> {
    let meta: Meta = { seq: 0, spooled: 0, delivered: 0, deadLettered: 0, dropped: 0 };
    let pendingBatches = 0;
    let awaitingToken = 0;
    let firstRefused = Infinity;
    try {
      const store = this.settings.enabled ? await this.openStore() : null;
      if (store) {
        const batches = await store.transact(async (tx) => {
          meta = await this.meta(tx);
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
      lastError: this.lastError,
      notSpooled: { ...this.notSpooled },
      awaitingToken,
      awaitingTokenUntil: Number.isFinite(firstRefused) ? firstRefused + this.settings.authWait : null,
    };
  }

  /** What this install spent on `campaign`: in the collector's current window, and for life. */
  async privacySpent(campaign: string): Promise<Spent> {
    const store = await this.openStore();
    const config = await this.campaign(campaign);
    const window = config ? this.chargedWindow(config) : 0;
    return store.transact((tx) => spent(tx, campaign, window));
  }

  /** The longitudinal guarantee the ledger enforces for `campaign` (null if retired). */
  async guarantee(campaign: string): Promise<Guarantee | null> {
    const config = await this.campaign(campaign);
    return config ? guarantee(config) : null;
  }

  // -- exit ----------------------------------------------------------------------------------
  private attachExitHooks(): void {
    if (!this.settings.deliverOnExit) return;
    if (typeof document !== "undefined" && typeof addEventListener === "function") {
      // Page hide: what is spooled goes out with fetch keepalive, which outlives the page
      // (each body within its 64 KiB limit); the rest stays in IndexedDB for the next visit.
      const onHide = (): void => {
        if (document.visibilityState === "hidden") this.deliverOnHide();
      };
      const onPageHide = (): void => this.deliverOnHide();
      document.addEventListener("visibilitychange", onHide);
      addEventListener("pagehide", onPageHide);
      this.detach.push(() => document.removeEventListener("visibilitychange", onHide));
      this.detach.push(() => removeEventListener("pagehide", onPageHide));
      return;
    }
    if (typeof process !== "undefined" && typeof process.once === "function") {
      // Node: at the event loop's end, deliver what is spooled for up to 2 s (once).
      const onExit = (): void => {
        if (!this.closed) void this.close(2000);
      };
      atExit(onExit);
      this.detach.push(() => cancelAtExit(onExit));
    }
  }

  /** The page is being hidden (maybe unloaded): post this session's batches now with
   * fetch keepalive (each within its size limit; not compressed: CompressionStream might
   * not finish). Their keys are durable, so one the page never hears back from is resent,
   * under the same key, on the next visit. Reports not in a batch wait for that visit. */
  private deliverOnHide(): void {
    const store = this.store;
    if (this.closed || !store) return;
    for (const [key, known] of this.prepared) {
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

// One shared `beforeExit` listener for every live Reporter (one each would trip Node's
// MaxListeners warning past 10); it is removed when the last Reporter closes.
const exitHooks = new Set<() => void>();

function runExitHooks(): void {
  const hooks = [...exitHooks];
  exitHooks.clear(); // each hook runs once, as with process.once
  process.removeListener("beforeExit", runExitHooks);
  for (const hook of hooks) hook();
}

function atExit(hook: () => void): void {
  if (exitHooks.size === 0) process.on("beforeExit", runExitHooks);
  exitHooks.add(hook);
}

function cancelAtExit(hook: () => void): void {
  if (exitHooks.delete(hook) && exitHooks.size === 0) {
    process.removeListener("beforeExit", runExitHooks);
  }
}
