/**
 * The steps of one `report()` (client/pipeline.py): config, level rule, value, the charged
 * window, then in one transaction the randomized report drawn (`spend`, with the memo), the
 * ledger charged and the report spooled (in browsers, into this session's open batch). It
 * throws; `Reporter.report` turns every exception into a ReportStatus.
 */

import type { Batches, Joined } from "./batches.js";
import type { CampaignConfig } from "./config.js";
import type { ConfigCache } from "./config_cache.js";
import { LdptelError, type ReportStatus } from "./errors.js";
import { charge } from "./ledger.js";
import type { Randomness } from "./random.js";
import { spend } from "./randomize.js";
import type { Sender } from "./sender.js";
import { type Settings, isBrowser } from "./settings.js";
import { type SpoolRow, dropOldest, now, pad, readMeta } from "./spool.js";
import type { State } from "./state.js";
import type { Outcomes } from "./stats.js";
import { valueOf } from "./values.js";
import type { Windows } from "./windows.js";

export class Pipeline {
  /** Browsers: reports join an open batch in their own transaction (its idempotency key is
   * durable before any keepalive post of it). */
  private readonly eager = isBrowser();

  constructor(
    private readonly state: State,
    private readonly cache: ConfigCache,
    private readonly windows: Windows,
    private readonly batches: Batches,
    private readonly sender: Sender,
    private readonly settings: Settings,
    private readonly rng: Randomness,
    private readonly outcomes: Outcomes,
  ) {}

  async report(campaign: string, value: string | number, explicit: string | undefined): Promise<ReportStatus> {
    if (this.state.closed) throw new LdptelError("closed", "reporter", "closed; create a new Reporter");
    const store = await this.state.open();
    const config = await this.cache.campaign(campaign);
    if (config === null) return this.outcomes.count("retired");
    const level = this.levelOf(config, explicit);
    if (config.reportingEpsilon(level) === null) return this.outcomes.count("level_not_collected");
    const checked = valueOf(config, value);
    const window = this.windows.chargedWindow(config);
    const budget = config.budget(level);
    const memoSecret = this.state.memoSecret;
    const joined: { batch: Joined | null } = { batch: null };
    await store.transact(async (tx) => {
      const { wire, cost } = await spend(tx, config, level, checked, memoSecret, this.rng, window);
      await charge(tx, campaign, window, config.windowSeconds, cost, budget);
      const meta = await readMeta(tx);
      meta.seq += 1;
      meta.spooled += 1;
      const row: SpoolRow = { c: campaign, id: config.configId, l: level, w: window, r: wire, t: now() };
      const rowKey = `spool/${pad(meta.seq)}`;
      if (this.eager) joined.batch = await this.batches.joinOpen(tx, rowKey, row);
      tx.put(rowKey, row);
      if (meta.spooled > this.settings.maxSpoolRows) await dropOldest(tx, meta, this.settings.maxSpoolRows);
      tx.put("meta", meta);
    });
    if (joined.batch) this.batches.remember(joined.batch);
    this.sender.spooled();
    return "spooled";
  }

  /** The level a report is made at: the explicit one, else the Reporter's (checked by the
   * campaign's level rule: throws LevelError). */
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
}
