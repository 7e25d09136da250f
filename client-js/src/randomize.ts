/**
 * What a report sends and what it costs, per memoization mode (client/memo.py): under
 * "none" a fresh draw of the one-report law, charged its epsilon; under
 * "exact_discloses_changes" a value's report is drawn once per (config, level, value) and
 * resent (RAPPOR: its permanent response from HMAC(secret, value), a fresh instantaneous
 * one), the r-th report of a value costing min(r eps_1, eps_inf) - min((r-1) eps_1, eps_inf).
 * Memo keys are keyed hashes (HMAC-SHA256 with the install's memo secret), so the state
 * holds no value in clear.
 */

import { type Built, type CampaignConfig, MEMO_EXACT } from "./config.js";
import { fromHex, hex, hmacSha256, itemKey, utf8 } from "./hash.js";
import { alphaPointLevel } from "./numeric.js";
import type { RapporClient, WireReport } from "./oracles.js";
import type { Randomness } from "./random.js";
import type { Tx } from "./store.js";
import type { TreeShape, TreeState } from "./tree.js";

/** A value as the oracle takes it: a label's index, a number, or an NFC text. */
export type Value = number | string;

interface MemoRow {
  report: string | null;
  spent: number;
}

function fresh(built: Built, value: Value, rng: Randomness, client: RapporClient | null): WireReport {
  switch (built.kind) {
    case "index":
      return built.oracle.perturbIndex(value as number, rng);
    case "key":
      return built.oracle.perturbKey(itemKey(value as string), rng);
    case "pem":
      return built.oracle.perturbText(value as string, rng);
    case "numeric":
      return built.oracle.perturbNumber(value as number, rng);
    case "rappor":
      return built.oracle.perturb(value as number, client as RapporClient, rng, false);
    case "tree":
      throw new Error("a tree report needs its window (treeReport)");
  }
}

async function rapporClient(tx: Tx, built: Built, scope: string, rng: Randomness): Promise<RapporClient | null> {
  if (built.kind !== "rappor") return null;
  const key = `rappor/${scope}`;
  const saved = await tx.get<{ secret: string; cohort: number }>(key);
  if (saved) return { secret: fromHex(saved.secret), cohort: saved.cohort };
  const client = { secret: rng.bytes(32), cohort: rng.below(built.oracle.m) };
  tx.put(key, { secret: hex(client.secret), cohort: client.cohort });
  return client;
}

/** Memoization "tree" (tree.ts): the report of window index `w` and its cost, epsilon for
 * a horizon's first report (its draws are made then, once), nothing after; the install's
 * horizon state is written in the caller's transaction with the charge and the spool row. */
async function treeReport(tx: Tx, shape: TreeShape, scope: string, value: number, w: number, rng: Randomness): Promise<{ wire: string; cost: number }> {
  const horizon = Math.floor(w / shape.horizonWindows);
  const t = w % shape.horizonWindows;
  const prefix = `tree/${scope}/`;
  const key = `${prefix}${String(horizon).padStart(12, "0")}`;
  let state = await tx.get<TreeState>(key);
  let cost = 0;
  if (!state) {
    state = shape.newState(rng);
    cost = shape.epsilon;
    for (const [old] of await tx.entries(prefix)) if (old < key) tx.delete(old);
  }
  state = shape.observe(state, t, shape.indicator(state, value));
  tx.put(key, state);
  return { wire: JSON.stringify(shape.report(state, t, rng)), cost };
}

/** The report to spool for `value` at `level` and the epsilon it costs, its memo written
 * in the caller's transaction under exact memoization. */
export async function spend(
  tx: Tx,
  config: CampaignConfig,
  level: string,
  value: Value,
  memoSecret: Uint8Array,
  rng: Randomness,
  window: number,
): Promise<{ wire: string; cost: number }> {
  const built = config.mechanism(level);
  const scope = level ? `${config.configId}:${level}` : config.configId;
  if (built.kind === "tree") return treeReport(tx, built.oracle, scope, value as number, window / config.windowSeconds, rng);
  const client = await rapporClient(tx, built, scope, rng);
  const perReport = built.oracle.epsilon;
  if (config.memoization !== MEMO_EXACT) {
    return { wire: JSON.stringify(fresh(built, value, rng, client)), cost: perReport };
  }
  const digest = (message: string): Uint8Array => hmacSha256(memoSecret, utf8(message)).slice(0, 16);
  let index: Value = value;
  if (built.kind === "numeric") {
    // One alpha per install and config: a value maps to a grid level deterministically.
    const alphaBytes = digest(`alpha:${scope}`).slice(0, 8);
    const alpha = new DataView(alphaBytes.buffer, alphaBytes.byteOffset, 8).getBigUint64(0, true);
    const mech = built.oracle;
    index = alphaPointLevel(value as number, alpha, mech.low, mech.high, mech.resolution);
  }
  const key = `memo/${hex(digest(`${scope}:${typeof index === "string" ? `s:${index}` : index}`))}`;
  const row = await tx.get<MemoRow>(key);
  const spent = row?.spent ?? 0;
  let wire: string;
  if (built.kind === "rappor") {
    wire = JSON.stringify(built.oracle.perturb(index as number, client as RapporClient, rng, true));
  } else if (row?.report) {
    wire = row.report;
  } else if (built.kind === "numeric") {
    wire = JSON.stringify(built.oracle.perturbLevel(index as number, rng));
  } else {
    wire = JSON.stringify(fresh(built, index, rng, client));
  }
  const cost = Math.max(Math.min(spent + perReport, built.oracle.permanentEpsilon) - spent, 0);
  if (!row) tx.put(key, { report: built.kind === "rappor" ? null : wire, spent: cost });
  else if (cost > 0) tx.put(key, { ...row, spent: spent + cost });
  return { wire, cost };
}
