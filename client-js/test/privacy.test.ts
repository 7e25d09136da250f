/**
 * The privacy loss of this client's own code, computed exactly: every oracle's report is
 * run on every path of its draws (each coin both ways, each uniform integer every value;
 * draws independent of the value, OLH's seed and the sketches' row, are conditioned on a
 * few values, which leaves the likelihood ratios unchanged), giving the exact law of the
 * report for each input. For one report (neighbouring inputs: any two values of the
 * domain), max_o |ln P(o | v) / P(o | v')| must be at most the oracle's stated epsilon
 * (Dwork & Roth 2014, Def. 2.4, local form), and equal to it where the mechanism is tight.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { itemKey } from "../src/hash.js";
import {
  CountMeanSketch,
  DirectEncoding,
  HadamardCountMeanSketch,
  HadamardResponse,
  type IndexOracle,
  LocalHashing,
  SubsetSelection,
  UnaryEncoding,
} from "../src/oracles.js";
import type { Randomness } from "../src/random.js";
import { VECTORS } from "./paths.js";

// biome-ignore lint: vector JSON
type J = any;
const load = (name: string): J => JSON.parse(readFileSync(new URL(name, VECTORS), "utf8"));

interface Decision {
  probs: number[];
  chosen: number;
}

/** Follows a path of choices, then the first choice of every later draw, recording them;
 * `fixed` answers uniform draws above `branchLimit` (value-independent ones) instead. */
class Path implements Randomness {
  readonly decisions: Decision[] = [];
  constructor(
    private readonly prefix: number[],
    private readonly fixed: number[],
    private readonly branchLimit = 1 << 12,
  ) {}
  private choose(probs: number[]): number {
    const i = this.decisions.length;
    const chosen = i < this.prefix.length ? (this.prefix[i] as number) : 0;
    this.decisions.push({ probs, chosen });
    return chosen;
  }
  private fixedAt = 0;
  below(upper: number): number {
    if (upper === 1) return 0;
    if (upper > this.branchLimit) return this.fixed[this.fixedAt++ % this.fixed.length] as number;
    return this.choose(new Array<number>(upper).fill(1 / upper));
  }
  bernoulli(prob: number): boolean {
    if (prob >= 1) return true;
    return this.choose([prob, 1 - prob]) === 0;
  }
  belowBig(): bigint {
    throw new Error("not enumerable");
  }
  bytes(size: number): Uint8Array {
    return new Uint8Array(size);
  }
}

/** The exact law of `run`'s output over every path of its draws. */
function law(run: (rng: Randomness) => string, fixed: number[] = [], branchLimit?: number): Map<string, number> {
  const out = new Map<string, number>();
  const stack: number[][] = [[]];
  while (stack.length) {
    const prefix = stack.pop() as number[];
    const rng = new Path(prefix, fixed, branchLimit);
    const output = run(rng);
    let prob = 1;
    rng.decisions.forEach((d, i) => {
      prob *= d.probs[d.chosen] as number;
      if (i < prefix.length) return;
      const taken = rng.decisions.slice(0, i).map((x) => x.chosen);
      for (let a = 1; a < d.probs.length; a++) stack.push([...taken, a]);
    });
    out.set(output, (out.get(output) ?? 0) + prob);
  }
  const total = [...out.values()].reduce((s, p) => s + p, 0);
  assert.ok(Math.abs(total - 1) < 1e-9, `a law sums to ${total}`);
  return out;
}

/** max over outputs and ordered pairs of values of ln P(o | v) / P(o | v'). */
function loss(laws: Map<string, number>[]): number {
  let worst = 0;
  for (const a of laws) {
    for (const b of laws) {
      for (const output of new Set([...a.keys(), ...b.keys()])) {
        const ratio = Math.log((a.get(output) ?? 0) / (b.get(output) ?? 0));
        if (Number.isNaN(ratio)) continue; // 0 / 0: the output is impossible under both
        worst = Math.max(worst, ratio);
      }
    }
  }
  return worst;
}

function check(oracle: IndexOracle, values: number[], tight: boolean, fixed: number[][] = [[]], branchLimit?: number): void {
  let measured = 0;
  for (const f of fixed) {
    const laws = values.map((v) => law((rng) => JSON.stringify(oracle.perturbIndex(v, rng)), f, branchLimit));
    measured = Math.max(measured, loss(laws));
  }
  assert.ok(Number.isFinite(measured), "an output possible under one value only: an infinite loss");
  assert.ok(measured <= oracle.epsilon * (1 + 1e-9), `measured ${measured} > stated ${oracle.epsilon}`);
  if (tight) assert.ok(measured >= oracle.epsilon * (1 - 1e-9), `measured ${measured} < stated ${oracle.epsilon}`);
}

const range = (n: number): number[] => [...Array(n).keys()];

test("DE: the exact loss of the code's reports is its epsilon", () => {
  for (const c of load("de.json").cases) check(new DirectEncoding(c.domain_size, c, c.epsilon), range(c.domain_size), true);
});

test("SUE and OUE: the exact loss of the code's reports is their epsilon", () => {
  for (const file of ["sue.json", "oue.json"]) {
    for (const c of load(file).parameters) check(new UnaryEncoding(4, c, c.epsilon), range(4), true);
  }
});

test("OLH and BLH: given any seed, the loss is at most epsilon, and reaches it", () => {
  for (const file of ["olh.json", "blh.json"]) {
    for (const c of load(file).cases) {
      const oracle = new LocalHashing((c.domain as string[]).map(itemKey), c, c.epsilon, file === "blh.json");
      check(oracle, range(c.domain.length), true, [[3090441204], [1404335234], [7], [123456789]]);
    }
  }
});

test("HR: the exact loss of the code's reports is its epsilon", () => {
  for (const c of load("hr.json").cases) check(new HadamardResponse(c.domain_size, c, c.epsilon), range(c.domain_size), true);
});

test("SS: the exact loss of the code's reports is its epsilon", () => {
  for (const c of load("ss.json").cases.filter((x: J) => x.domain_size <= 16)) {
    check(new SubsetSelection(c.domain_size, c, c.epsilon), range(Math.min(c.domain_size, 4)), true);
  }
});

test("CMS and HCMS: given the row, the loss is at most epsilon", () => {
  const cms = load("cms.json").cases[0];
  const keys = (cms.domain as string[]).slice(0, 3).map(itemKey);
  // The row j is drawn independently of the value: conditioned on (branchLimit 2 < k).
  check(new CountMeanSketch(keys, cms, cms.epsilon), range(3), false, [[0], [1]], 2);
  for (const c of load("hcms.json").cases) {
    const oracle = new HadamardCountMeanSketch((c.domain as string[]).map(itemKey), { ...c, f: c.flip }, c.epsilon);
    check(oracle, range(4), true, [[0, 1], [1, 3], [2, 5]], 1);
  }
});

test("tree: a horizon's first report costs epsilon, the rest of the horizon nothing", async () => {
  const { CampaignConfig } = await import("../src/config.js");
  const { spend } = await import("../src/randomize.js");
  const { MemoryStore } = await import("../src/store.js");
  const { SecureRandom } = await import("../src/random.js");
  const served = load("config_ids.json").cases.find((c: J) => c.created.memoization === "tree");
  const config = new CampaignConfig({ ...served.created, config_id: served.config_id });
  const store = new MemoryStore();
  const rng = new SecureRandom();
  const costs: number[] = [];
  const day = config.windowSeconds;
  for (const w of [0, 1, 2, 3, 364, 365, 366]) {
    const { wire, cost } = await store.transact((tx) => spend(tx, config, "", w % 2, new Uint8Array(32), rng, w * day));
    costs.push(cost);
    const report = JSON.parse(wire) as Record<string, number>;
    assert.ok(report["item"] === 0 && Number.isInteger(report["level"]));
  }
  assert.deepEqual(costs, [1, 0, 0, 0, 0, 1, 0]); // horizons of 365 windows
});
