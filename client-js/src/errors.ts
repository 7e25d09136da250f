/**
 * What the app sees (docs/client-js.md, "What the app sees"): the status a `report()`
 * resolves to, the errors passed to `onError`, and every exception mapped to a status
 * (client/status.py and client/errors.py in the Python SDK).
 */

import { LevelError } from "./config.js";
import { BudgetExhausted } from "./ledger.js";
import { StoreError } from "./store.js";
import type { DeliveryKind, Problem } from "./transport.js";

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

/** Any exception as the LdptelError the app is told (a bug in ldptel: internal_error). */
export function asError(raw: unknown): LdptelError {
  if (raw instanceof LdptelError) return raw;
  if (raw instanceof BudgetExhausted) return new LdptelError("budget_exhausted", raw.field, raw.reason, { cause: raw });
  if (raw instanceof LevelError) return new LdptelError("invalid_level", "level", raw.reason, { cause: raw });
  if (raw instanceof StoreError) return new LdptelError(raw.kind, "state", raw.reason, { cause: raw });
  return new LdptelError("internal_error", "ldptel", `a bug in ldptel: ${String(raw)}`.slice(0, 300), { cause: raw });
}
