/** ldptel: local-differential-privacy telemetry for browsers and Node (docs/client-js.md). */

export { DeliveryError, LdptelError } from "./errors.js";
export { Reporter } from "./reporter.js";
export { parseRetryAfter } from "./transport.js";
export type { DeliveryKind } from "./transport.js";
export type { ReportStatus } from "./errors.js";
export type { ReporterOptions } from "./settings.js";
export type { Stats } from "./stats.js";
export type { Guarantee, Spent } from "./ledger.js";
export { CampaignConfig } from "./config.js";
