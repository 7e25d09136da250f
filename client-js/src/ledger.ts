/**
 * The privacy ledger (client/ledger.py, the same decisions): per campaign, the reports and
 * epsilon charged to each of the collector's windows and the epsilon spent for life, added
 * by sequential composition (Dwork & Roth 2014, Thm. 3.16), checked before every report.
 * Under memoization "none" every report is a fresh draw charged its epsilon; a resent memo
 * (exact memoization) costs 0 and is counted in its window's reports only.
 */

import { type Budget, type CampaignConfig, MEMO_EXACT } from "./config.js";
import type { Tx } from "./store.js";

/** Relative slack for floating-point sums of epsilons (never enough to matter). */
const SLACK = 1 + 1e-9;
/** Window rows are kept this long after their window ended (the lifetime row stays). */
export const KEEP_WINDOWS_SECONDS = 7 * 86_400;

export type BudgetField = "window_reports" | "window_epsilon" | "lifetime_epsilon";

export class BudgetExhausted extends Error {
  constructor(
    readonly field: BudgetField,
    readonly reason: string,
  ) {
    super(`${field}: ${reason}`);
    this.name = "BudgetExhausted";
  }
}

interface WindowRow {
  reports: number;
  epsilon: number;
  end: number;
}

const windowKey = (campaign: string, window: number): string =>
  `ledger/${campaign}/${String(window).padStart(12, "0")}`;
const lifetimeKey = (campaign: string): string => `ledger/${campaign}/life`;

/** Record one report costing `cost` in `window` (and for life unless `lifetime` is false:
 * a report already charged for life moving into another window); throws BudgetExhausted,
 * the caller's transaction then writes nothing. */
export async function charge(
  tx: Tx,
  campaign: string,
  window: number,
  windowSeconds: number,
  cost: number,
  budget: Budget,
  lifetime = true,
): Promise<void> {
  const key = windowKey(campaign, window);
  const row = (await tx.get<WindowRow>(key)) ?? { reports: 0, epsilon: 0, end: window + windowSeconds };
  const reports = row.reports + 1;
  const spent = row.epsilon + cost;
  const windowCap = cost > 0 ? budget.windowEpsilon * SLACK : Infinity;
  if (reports > budget.reportsPerWindow) {
    throw new BudgetExhausted("window_reports", `at most ${budget.reportsPerWindow} reports per window`);
  }
  if (spent > windowCap) {
    throw new BudgetExhausted("window_epsilon", `window budget of epsilon ${budget.windowEpsilon} is spent`);
  }
  tx.put(key, { reports, epsilon: spent, end: row.end });
  if (cost <= 0 || !lifetime) return;
  const life = (await tx.get<{ epsilon: number }>(lifetimeKey(campaign)))?.epsilon ?? 0;
  if (life + cost > budget.lifetimeEpsilon * SLACK) {
    throw new BudgetExhausted("lifetime_epsilon", `lifetime budget of epsilon ${budget.lifetimeEpsilon} is spent`);
  }
  tx.put(lifetimeKey(campaign), { epsilon: life + cost });
}

/** The collector's window a report made at `now` (its clock) is charged to: the current
 * one, or the next when the current ends within `margin` seconds (it could not be posted
 * in time). */
export function chargedWindow(config: CampaignConfig, now: number, margin: number): number {
  const window = config.windowOf(now);
  return window + config.windowSeconds - now <= margin ? window + config.windowSeconds : window;
}

export interface Spent {
  windowReports: number;
  windowEpsilon: number;
  lifetimeEpsilon: number;
}

export async function spent(tx: Tx, campaign: string, window: number): Promise<Spent> {
  const row = await tx.get<WindowRow>(windowKey(campaign, window));
  const life = await tx.get<{ epsilon: number }>(lifetimeKey(campaign));
  return { windowReports: row?.reports ?? 0, windowEpsilon: row?.epsilon ?? 0, lifetimeEpsilon: life?.epsilon ?? 0 };
}

/** Forget window rows long past (the lifetime totals are kept). */
export async function prune(tx: Tx, now: number): Promise<void> {
  for (const [key, row] of await tx.entries<WindowRow>("ledger/")) {
    if (!key.endsWith("/life") && row.end < now - KEEP_WINDOWS_SECONDS) tx.delete(key);
  }
}

/** What one install's reports to a campaign promise (client/ledger.py, `Guarantee`). */
export interface Guarantee {
  memoization: string;
  perReportEpsilon: number;
  windowEpsilon: number;
  lifetimeEpsilon: number;
  holdsFor: string;
  discloses: string;
  statement: string;
}

export const ANY_HISTORIES = "any two value histories";
export const SAME_PATTERN = "value histories with the same change pattern only";
export const CHANGE_PATTERN = "the change pattern (which reports carry the same value) is disclosed";

/** Python's `%g` for the statement's numbers (6 significant digits, no trailing zeros). */
export function formatG(x: number): string {
  if (x === 0) return "0";
  const exponent = Math.floor(Math.log10(Math.abs(x)));
  if (exponent < -4 || exponent >= 6) {
    const [m, e] = x.toExponential(5).split("e") as [string, string];
    const mantissa = m.includes(".") ? m.replace(/\.?0+$/, "") : m;
    const sign = e.startsWith("-") ? "-" : "+";
    return `${mantissa}e${sign}${e.replace(/^[+-]/, "").padStart(2, "0")}`;
  }
  const fixed = x.toFixed(Math.max(0, 5 - exponent));
  return fixed.includes(".") ? fixed.replace(/\.?0+$/, "") : fixed;
}

export function guarantee(config: CampaignConfig): Guarantee {
  const budget = config.budget(null);
  // With levels, each level's oracle has its own epsilon (and its budgets scale with it).
  const perReport = config.hasLevels ? config.epsilon : config.mechanism("").oracle.epsilon;
  const exact = config.memoization === MEMO_EXACT;
  const numeric = config.range !== null;
  const holdsFor = exact ? SAME_PATTERN : ANY_HISTORIES;
  let discloses = exact ? CHANGE_PATTERN : "";
  if (exact && numeric) {
    discloses = "the change pattern of the rounded grid level (which reports share one) is disclosed";
  }
  const distinct = numeric ? "grid level" : "value";
  const charged = exact ? `each distinct ${distinct}'s first reports` : "every report";
  let statement =
    `Per install, between ${holdsFor}: privacy loss <= epsilon ${formatG(budget.windowEpsilon)} ` +
    `in any window and <= ${formatG(budget.lifetimeEpsilon)} over its lifetime (${charged} ` +
    "charged by sequential composition).";
  if (exact) statement += ` Memoization ${MEMO_EXACT}: ${discloses}.`;
  return {
    memoization: config.memoization,
    perReportEpsilon: perReport,
    windowEpsilon: budget.windowEpsilon,
    lifetimeEpsilon: budget.lifetimeEpsilon,
    holdsFor,
    discloses,
    statement,
  };
}
