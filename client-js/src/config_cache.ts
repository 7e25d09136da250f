/**
 * The campaigns' configs (client/config_cache.py): the active config per campaign, loaded
 * from the store's cache or fetched on first use, revalidated in the background when older
 * than configRefresh; retired, unknown and unavailable campaigns (the first-fetch backoff).
 */

import { CampaignConfig } from "./config.js";
import { DeliveryError, LdptelError } from "./errors.js";
import type { Link } from "./link.js";
import { ConfigError } from "./oracles.js";
import type { Settings } from "./settings.js";
import { now } from "./spool.js";
import type { State } from "./state.js";
import { type Answer, type Problem, networkReason, problemOf, reasonOf } from "./transport.js";

const UNKNOWN_CAMPAIGN_SECONDS = 60;
const NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;

interface CachedConfig {
  status: "active" | "retired";
  answer: unknown;
  fetchedAt: number;
}

export class ConfigCache {
  readonly active = new Map<string, { config: CampaignConfig; fetchedAt: number }>();
  readonly retired = new Set<string>();
  private readonly unknown = new Map<string, number>();
  private readonly unavailable = new Map<string, { retryAt: number; failures: number; reason: string }>();
  private readonly refreshing = new Set<string>();

  constructor(
    private readonly state: State,
    private readonly link: Link,
    private readonly settings: Settings,
  ) {}

  /** The campaign's active config (null if retired): fetched on first use if none is
   * cached, revalidated in the background when older than configRefresh. */
  async campaign(name: string): Promise<CampaignConfig | null> {
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
    const cached = await this.fromDisk(name);
    if (cached === "retired") return null;
    if (cached === "active") return this.campaign(name);
    await this.firstFetch(name);
    if (this.retired.has(name)) return null;
    return this.active.get(name)?.config ?? null;
  }

  /** The store's cached answer for `name` adopted in memory; null if none this version
   * takes (then the collector is asked). */
  private async fromDisk(name: string): Promise<"active" | "retired" | null> {
    const store = await this.state.open();
    const cached = await store.transact((tx) => tx.get<CachedConfig>(`config/${name}`));
    if (!cached) return null;
    if (cached.status === "retired") {
      this.retired.add(name);
      return "retired";
    }
    try {
      const config = new CampaignConfig(cached.answer);
      this.active.set(name, { config, fetchedAt: cached.fetchedAt });
      return "active";
    } catch {
      return null; // a cached config this version refuses: ask the collector
    }
  }

  /** A campaign's first fetch, backed off per campaign while it is unavailable. */
  private async firstFetch(name: string): Promise<void> {
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
  }

  /** Revalidate the campaign's config (one request per campaign at a time). */
  async refresh(name: string): Promise<void> {
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

  /** GET /v1/campaigns/<name> (conditional on the current config's id); adopts the answer
   * or throws unknown_campaign / campaign_unavailable (a DeliveryError for an answer
   * retrying alone will not get past). */
  private async fetchConfig(name: string, current: CampaignConfig | null): Promise<void> {
    const headers = this.link.headers();
    if (current) headers["If-None-Match"] = `"${current.configId}"`;
    const unavailable = (why: string, cause?: unknown): LdptelError =>
      new LdptelError("campaign_unavailable", "campaign", `no config for ${name} yet: ${why}`, { cause });
    let answer: Answer | Problem;
    try {
      answer = await this.link.exchange(`/v1/campaigns/${name}`, { headers });
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
    const store = await this.state.open();
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

  /** Forget the active config (the collector answered 409: it changed) and fetch anew. */
  forget(name: string): void {
    this.active.delete(name);
    void this.campaign(name).catch(() => undefined);
  }
}
