/**
 * Memoization "tree" (docs/protocol.md, "Tree reports"; client/tree.py): change tracking over
 * a horizon of T windows (Erlingsson et al., "Amplification by Shuffling", SODA 2019, Sec. 3).
 * An install draws once per horizon an item, a level of the dyadic tree and the index j of
 * the change it reports; every window it sends (item, level), plus, where a node of its level
 * ends, randomized response at epsilon of its j-th change's sign if that change lies in the
 * node, else a fair coin. All of a horizon's reports together are epsilon-LDP between any two
 * histories (given the draws, at most the two nodes holding the j-th changes differ, their
 * ratio together at most p / (1 - p) = e^epsilon), so only a horizon's first report is charged.
 */

import type { WireReport } from "./oracles.js";
import type { Randomness } from "./random.js";

export interface TreeState {
  item: number;
  level: number;
  change: number;
  last: number;
  changes: number;
  sampled: number;
  sign: number;
}

export const trailingZeros = (n: number): number => {
  let z = 0;
  for (let v = n; v % 2 === 0; v /= 2) z++;
  return z;
};

export class TreeShape {
  readonly levels: number;
  readonly keep: number;
  /** All of a horizon's reports together: epsilon (charged once, at its first report). */
  readonly permanentEpsilon: number;
  constructor(
    readonly horizonWindows: number,
    readonly maxChanges: number,
    readonly epsilon: number,
    readonly items: number,
  ) {
    this.levels = horizonWindows.toString(2).length; // floor(log2 T) + 1
    this.keep = 1 / (1 + Math.exp(-epsilon));
    this.permanentEpsilon = epsilon;
  }

  readLevel(t: number): number {
    return trailingZeros(t + 1);
  }

  /** The nodes (level, start) partitioning [0, t], highest level first. */
  decomposition(t: number): [number, number][] {
    const nodes: [number, number][] = [];
    let start = 0;
    for (let level = this.levels - 1; level >= 0; level--) {
      if (Math.floor((t + 1) / 2 ** level) % 2 === 1) {
        nodes.push([level, start]);
        start += 2 ** level;
      }
    }
    return nodes;
  }

  newState(rng: Randomness): TreeState {
    const item = rng.below(this.items);
    const level = rng.below(this.levels);
    const change = rng.below(this.maxChanges) + 1;
    return { item, level, change, last: 0, changes: 0, sampled: -1, sign: 0 };
  }

  indicator(state: TreeState, value: number): number {
    return value === (this.items === 1 ? 1 : state.item) ? 1 : 0;
  }

  /** The state after seeing the tracked indicator in window t. */
  observe(state: TreeState, t: number, indicator: number): TreeState {
    if (indicator === state.last) return state;
    const changes = Math.min(state.changes + 1, this.maxChanges + 1);
    const seen = { ...state, last: indicator, changes };
    return changes === state.change ? { ...seen, sampled: t, sign: indicator ? 1 : -1 } : seen;
  }

  /** null: no node of the state's level is read in t; else the sign in the node ending at t. */
  nodeSign(state: TreeState, t: number): number | null {
    if (state.level !== this.readLevel(t)) return null;
    const start = t + 1 - 2 ** state.level;
    return start <= state.sampled && state.sampled <= t ? state.sign : 0;
  }

  report(state: TreeState, t: number, rng: Randomness): WireReport {
    const sign = this.nodeSign(state, t);
    if (sign === null) return { item: state.item, level: state.level };
    const bit = sign === 0 ? rng.below(2) : rng.bernoulli(this.keep) === sign > 0 ? 1 : 0;
    return { item: state.item, level: state.level, bit };
  }
}
