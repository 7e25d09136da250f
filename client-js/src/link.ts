/**
 * The Reporter's line to its collector: the token's header, and each call under the
 * total deadline (transport.exchange), every answer's Date observed by the clock.
 */

import type { ServerClock } from "./clock.js";
import { type Answer, type Problem, exchange } from "./transport.js";

export class Link {
  constructor(
    readonly collectorUrl: string,
    private readonly token: string,
    private readonly fetcher: typeof fetch,
    private readonly clock: ServerClock,
    private readonly timeout: number,
  ) {}

  headers(): Record<string, string> {
    return { Authorization: `Bearer ${this.token}` };
  }

  /** One call to the collector under the total deadline (transport.exchange). */
  exchange(path: string, init: RequestInit): Promise<Answer | Problem> {
    const observe = (date: string | null): void => this.clock.observe(date);
    return exchange(this.fetcher, this.collectorUrl, `${this.collectorUrl}${path}`, init, this.timeout, observe);
  }
}
