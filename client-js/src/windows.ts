/**
 * The collector's windows (client/windows.py): the window a report is charged to, the rule
 * by which the sender posts a (campaign, level)'s reports, and moving reports' charges into
 * the window they are posted in.
 */

import type { ServerClock } from "./clock.js";
import type { CampaignConfig } from "./config.js";
import type { ConfigCache } from "./config_cache.js";
import { BudgetExhausted, charge, chargedWindow } from "./ledger.js";
import type { Settings } from "./settings.js";
import { pad } from "./spool.js";
import type { Tx } from "./store.js";

/** A batch is not posted in the last timeout + this many seconds of its window. */
const WINDOW_MARGIN_EXTRA = 2;

/** How a (campaign, level)'s reports may be posted now (see `Windows.rule`). */
export interface Rule {
  window: number;
  postable: boolean;
  nextIn: number;
  config: CampaignConfig;
}

export class Windows {
  constructor(
    private readonly clock: ServerClock,
    private readonly settings: Settings,
    private readonly cache: ConfigCache,
  ) {}

  private margin(): number {
    return this.settings.timeout + WINDOW_MARGIN_EXTRA;
  }

  /** The collector's window a report made now is charged to: the current one, or the next
   * when the current ends within the margin (it could not be posted in time). */
  chargedWindow(config: CampaignConfig): number {
    return chargedWindow(config, this.clock.now(), this.margin());
  }

  /** How a campaign's reports at `level` may be posted now; null: held (no config, clock
   * not set in this process, or a level the config no longer reports at); "refused": a
   * retired campaign, whose reports are posted to be dead-lettered. */
  rule(campaign: string, level: string): Rule | "refused" | null {
    if (this.cache.retired.has(campaign)) return "refused";
    if (!this.clock.synced) return null;
    const config = this.cache.active.get(campaign)?.config;
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
  async move(tx: Tx, campaign: string, level: string, window: number, count: number, config: CampaignConfig): Promise<boolean> {
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
}
