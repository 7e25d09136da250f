/** ldptel: local-differential-privacy telemetry for browsers and Node (docs/client-js.md). */

export { Reporter, LdptelError, parseRetryAfter } from "./reporter.js";
export type { ReportStatus, ReporterOptions, Stats } from "./reporter.js";
export type { Guarantee, Spent } from "./ledger.js";
export { CampaignConfig } from "./config.js";
