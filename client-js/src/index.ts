/** ldptel: local-differential-privacy telemetry for browsers and Node (docs/client-js.md). */

export { DeliveryError, LdptelError, Reporter } from "./reporter.js";
export { parseRetryAfter } from "./transport.js";
export type { DeliveryKind } from "./transport.js";
export type { ReportStatus, ReporterOptions, Stats } from "./reporter.js";
export type { Guarantee, Spent } from "./ledger.js";
export { CampaignConfig } from "./config.js";
