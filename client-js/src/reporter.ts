/**
 * The Reporter (docs/client-js.md): `report()` validates a value, charges the privacy
 * ledger, randomizes on the device and spools the report in one transaction; a sender in
 * the background batches the spool, posts it under an idempotency key, retries with
 * backoff, and never raises into the app. The same promises and ledger decisions as the
 * Python SDK (docs/client.md), in the platform's idiom: promises, IndexedDB or files.
 *
 * This is the app's API, built from one object per part (docs/architecture.md, "Clients in
 * other languages"): State, ConfigCache, Windows, Batches, Sender, Pipeline, Outcomes.
 */

import { Batches } from "./batches.js";
import { ServerClock } from "./clock.js";
import { ConfigCache } from "./config_cache.js";
import type { ReportStatus } from "./errors.js";
import { hex } from "./hash.js";
import { type Guarantee, type Spent, guarantee, spent } from "./ledger.js";
import { attachExitHooks } from "./lifecycle.js";
import { Link } from "./link.js";
import { Pipeline } from "./pipeline.js";
import { SecureRandom } from "./random.js";
import { Sender } from "./sender.js";
import { type ReporterOptions, type Settings, checkLevel, settingsOf } from "./settings.js";
import { State } from "./state.js";
import { Outcomes, type Stats, readStats } from "./stats.js";
import { Windows } from "./windows.js";

export class Reporter {
  readonly collectorUrl: string;
  private readonly settings: Settings;
  private readonly state: State;
  private readonly cache: ConfigCache;
  private readonly windows: Windows;
  private readonly sender: Sender;
  private readonly pipeline: Pipeline;
  private readonly outcomes: Outcomes;
  private readonly detach: (() => void)[] = [];

  constructor(collectorUrl: string, token: string, options: ReporterOptions = {}) {
    if (typeof collectorUrl !== "string" || !/^https?:\/\//.test(collectorUrl)) {
      throw new TypeError("ldptel: collectorUrl must be an http(s) URL");
    }
    if (typeof token !== "string" || !token) throw new TypeError("ldptel: token must be a non-empty string");
    this.collectorUrl = collectorUrl.replace(/\/+$/, "");
    const settings = settingsOf(options);
    this.settings = settings;
    const rng = new SecureRandom();
    const clock = new ServerClock();
    const platformFetch = options.fetch ?? globalThis.fetch;
    const link = new Link(this.collectorUrl, token, (input, init) => platformFetch(input, init), clock, settings.timeout);
    this.outcomes = new Outcomes(options.onError);
    this.state = new State(token, options.stateDir, rng, clock);
    this.cache = new ConfigCache(this.state, link, settings);
    this.windows = new Windows(clock, settings, this.cache);
    const claim = hex(new SecureRandom().bytes(8));
    const batches = new Batches(settings, this.windows, clock, rng, claim, (delayMs) => this.sender.wake(delayMs));
    this.sender = new Sender(this.state, this.cache, batches, link, settings, clock, rng, this.outcomes);
    this.pipeline = new Pipeline(this.state, this.cache, this.windows, batches, this.sender, settings, rng, this.outcomes);
    if (!settings.enabled) return;
    if (settings.deliverOnExit) {
      const onExit = (): void => {
        if (!this.state.closed) void this.close(2000); // deliver what is spooled for up to 2 s
      };
      this.detach.push(...attachExitHooks(() => this.sender.deliverOnHide(), onExit));
    }
    for (const name of options.campaigns ?? []) void this.cache.campaign(name).catch(() => undefined);
  }

  /** The default privacy level (campaigns without levels ignore it). */
  get level(): string | null {
    return this.settings.level;
  }
  set level(level: string | null) {
    this.settings.level = checkLevel(level);
  }

  /** Randomize `value` on the device and spool it for sending: a label of the campaign's
   * domain, any text of at most `max_length` UTF-8 bytes (open domains), or a number
   * (clipped into the range). Never rejects: resolves to "spooled" once the report is in
   * the spool, else to why not (docs/client-js.md, "What the app sees"). */
  async report(campaign: string, value: string | number, options: { level?: string } = {}): Promise<ReportStatus> {
    if (!this.settings.enabled) return this.outcomes.count("disabled");
    try {
      return await this.pipeline.report(campaign, value, options.level);
    } catch (error) {
      return this.outcomes.refused(error, `report to ${JSON.stringify(String(campaign)).slice(0, 80)}`);
    }
  }

  /** Send everything spooled now (batch size and age ignored); true once none of it is
   * left in the spool (delivered, dead-lettered or dropped), false if `timeoutMs` passes
   * first (the rest stays spooled). */
  async flush(timeoutMs = 10_000): Promise<boolean> {
    if (!this.settings.enabled) return true;
    return this.sender.flush(timeoutMs);
  }

  /** Deliver the spool for up to `timeoutMs`, then stop; what is not delivered stays in the
   * spool for the next Reporter on this state. */
  async close(timeoutMs = 2000): Promise<void> {
    if (this.state.closed) return;
    this.state.closed = true;
    for (const undo of this.detach) undo();
    if (timeoutMs > 0 && this.state.store) await this.flush(timeoutMs).catch(() => false);
    await this.sender.stop();
    await this.state.close();
  }

  /** Spool and delivery counters (persisted), and this session's report() calls that
   * spooled nothing, by status. */
  async stats(): Promise<Stats> {
    return readStats(this.state, this.settings, this.outcomes, () => this.sender.lastError);
  }

  /** What this install spent on `campaign`: in the collector's current window, and for life. */
  async privacySpent(campaign: string): Promise<Spent> {
    const store = await this.state.open();
    const config = await this.cache.campaign(campaign);
    const window = config ? this.windows.chargedWindow(config) : 0;
    return store.transact((tx) => spent(tx, campaign, window));
  }

  /** The longitudinal guarantee the ledger enforces for `campaign` (null if retired). */
  async guarantee(campaign: string): Promise<Guarantee | null> {
    const config = await this.cache.campaign(campaign);
    return config ? guarantee(config) : null;
  }
}
