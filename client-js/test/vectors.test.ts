/**
 * Every file of tests/vectors/ (the wire protocol's shared vectors, docs/protocol.md) run
 * against this client: hashes, encodings, config ids, parameter checks, and reports drawn
 * from the vectors' own draws. The directory is enumerated, so a new vector file fails
 * here until it has a handler.
 */

import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { test } from "node:test";
import { CampaignConfig } from "../src/config.js";
import { itemKey, localHash, utf8, hex } from "../src/hash.js";
import { HistogramEncoding, halfTable, parseNoise } from "../src/histogram.js";
import { NumericMechanism } from "../src/numeric.js";
import {
  CountMeanSketch,
  DirectEncoding,
  HadamardCountMeanSketch,
  HadamardResponse,
  LocalHashing,
  PrefixExtending,
  Rappor,
  SubsetSelection,
  UnaryEncoding,
  popcount,
} from "../src/oracles.js";
import { BudgetExhausted, charge, chargedWindow } from "../src/ledger.js";
import { SecureRandom } from "../src/random.js";
import { spend } from "../src/randomize.js";
import { MemoryStore } from "../src/store.js";
import { type TreeState, TreeShape } from "../src/tree.js";
import { canonicalJson, configId, openValue, packBits, packInt32 } from "../src/wire.js";
import { type Draw, Script, coin } from "./script.js";

import { VECTORS } from "./paths.js";
// biome-ignore lint: vectors are untyped JSON
type J = any;
// 64-bit alphas exceed a double's exact integers: read them as decimal strings.
const load = (name: string): J =>
  JSON.parse(readFileSync(new URL(name, VECTORS), "utf8").replace(/"alpha": (\d+)/g, '"alpha": "$1"'));

const close = (a: number, b: number, rel = 1e-9): void =>
  assert.ok(Math.abs(a - b) <= rel * Math.max(Math.abs(a), Math.abs(b)) + 1e-12, `${a} != ${b}`);

const unpack = (text: string, size: number): number[] => {
  const bytes = Buffer.from(text, "base64");
  return Array.from({ length: size }, (_, i) => ((bytes[i >> 3] as number) >> (7 - (i & 7))) & 1);
};

/** The coins unaryBits draws (i = 0..size-1) to produce `bits`. */
const bitCoins = (bits: number[]): Draw[] => bits.map((b) => coin(b === 1));

function checkKeyedReports(make: (keys: bigint[], c: J) => LocalHashing, c: J): void {
  const keys = (c.domain as string[]).map(itemKey);
  const oracle = make(keys, c);
  close(oracle.epsilon, c.epsilon);
  for (const r of c.reports) {
    assert.equal(itemKey(r.value).toString(), r.item_key);
    assert.equal(localHash(BigInt(r.item_key), r.seed), r.hash);
    assert.equal(r.hash % oracle.g, r.bucket);
    const keep = r.report.y === r.bucket;
    const draws: Draw[] = [{ below: 2 ** 32, u: r.seed }, coin(keep)];
    if (!keep && oracle.g > 2) draws.push({ below: oracle.g - 1, u: r.report.y - (r.report.y > r.bucket ? 1 : 0) });
    const script = new Script(draws);
    assert.deepEqual(oracle.perturbIndex(r.index, script), r.report);
    script.done();
    const supports = keys.flatMap((k, w) => (localHash(k, r.seed) % oracle.g === r.report.y ? [w] : []));
    assert.deepEqual(supports, r.supports);
  }
}

function checkUnary(file: J): void {
  for (const c of file.parameters) {
    close(new UnaryEncoding(4, c, c.epsilon).epsilon, c.epsilon);
  }
  for (const r of file.reports) {
    assert.equal(packBits(r.bits), r.report.bits);
    // The report of these bits: each coin drawn in item order.
    const oracle = new UnaryEncoding(r.domain_size, file.parameters[0], 10);
    const script = new Script(bitCoins(r.bits));
    assert.deepEqual(oracle.perturbIndex(0, script), r.report);
    script.done();
  }
}

function checkHistogram(file: J, which: string): void {
  for (const c of file.cases) {
    const served = which === "she" ? c.noise.served : null;
    const noise = served ?? null;
    const params = { resolution: c.resolution, noise: noise ?? undefined };
    if (!noise) continue; // the.json cases name the table by its epsilon and R (see she.json)
    const oracle = new HistogramEncoding(c.domain_size, params, c.epsilon);
    assert.equal(oracle.clamp, Number(c.noise.clamp));
    assert.equal(oracle.halfWidth, Number(c.noise.half_width));
    assert.equal(oracle.total.toString(), c.noise.total);
    close(oracle.epsilon, Number(c.noise.epsilon_guaranteed), 1e-9);
    const half = halfTable(parseNoise(noise, c.resolution), c.resolution);
    const first = c.noise.weights_from_0 as string[];
    assert.deepEqual(half.slice(0, first.length).map(String), first);
    assert.equal(String(half[half.length - 2]), c.noise.weight_last_cell);
    assert.equal(String(half[half.length - 1]), c.noise.weight_tail_cell);
  }
}

/** The noise draw (a uniform below the total) that lands in noise value `n`. */
function noiseDraw(half: bigint[], n: number): Draw {
  const L = half.length - 1;
  let start = 0n;
  for (let j = -L; j < n; j++) start += half[Math.abs(j)] as bigint;
  return { big: start };
}

/** ledger.json: the report() decisions (level rule, charged window, memo cost, ledger)
 * through this client's own functions, each step one transaction. */
async function checkLedger(file: J): Promise<void> {
  const margin = file.timeout_seconds + 2;
  for (const c of file.cases) {
    const config = new CampaignConfig(c.config);
    const store = new MemoryStore();
    const secret = new Uint8Array(32).fill(7);
    const rng = new SecureRandom();
    for (const step of c.steps) {
      const eps = config.reportingEpsilon(step.level);
      if (eps === null) {
        assert.equal(step.status, "level_not_collected", c.title);
        continue;
      }
      const window = chargedWindow(config, step.now, margin);
      assert.equal(window, step.window, `${c.title}: ${JSON.stringify(step)}`);
      const index = config.domain.indexOf(step.value);
      try {
        const cost = await store.transact(async (tx) => {
          const { cost } = await spend(tx, config, step.level, index, secret, rng, window);
          await charge(tx, config.name, window, config.windowSeconds, cost, config.budget(step.level));
          return cost;
        });
        assert.equal(step.status, "spooled", `${c.title}: ${JSON.stringify(step)}`);
        close(cost, step.charged, 1e-12);
      } catch (error) {
        if (!(error instanceof BudgetExhausted)) throw error;
        assert.deepEqual([step.status, step.field], ["budget_exhausted", error.field], `${c.title}: ${JSON.stringify(step)}`);
      }
    }
  }
}

const handlers: Record<string, (file: J) => void | Promise<void>> = {
  "tree.json": (file) => {
    // The client's part of memoization "tree": levels, read levels, prefix decompositions,
    // and the node signs an install randomizes; `estimate` and `storage` are the
    // aggregator's (not part of a client).
    for (const h of file.horizons) {
      const shape = new TreeShape(h.horizon_windows, 1, 1, 1);
      assert.equal(shape.levels, h.levels);
      (h.read_level as number[]).forEach((level, t) => assert.equal(shape.readLevel(t), level));
      assert.deepEqual(shape.decomposition(h.horizon_windows - 1), h.decomposition_of_last);
    }
    for (const install of file.installs) {
      const history = install.history as number[];
      const shape = new TreeShape(history.length, Math.max(install.change, 2), 1, 1);
      let state: TreeState = { item: 0, level: install.level, change: install.change, last: 0, changes: 0, sampled: -1, sign: 0 };
      const signs: Record<string, number> = {};
      history.forEach((value, t) => {
        state = shape.observe(state, t, shape.indicator(state, value));
        const sign = shape.nodeSign(state, t);
        if (sign !== null) signs[String(t)] = sign;
        // The report: item and level, and a bit exactly in the read windows.
        const bitDraw: Draw = sign === 0 ? { below: 2, u: 1 } : coin(true);
        const report = shape.report(state, t, new Script(sign === null ? [] : [bitDraw]));
        assert.deepEqual(Object.keys(report).sort(), sign === null ? ["item", "level"] : ["bit", "item", "level"]);
        if (sign) assert.equal(report.bit, sign > 0 ? 1 : 0); // kept: the change's sign
      });
      assert.deepEqual(signs, install.signs, JSON.stringify(install));
    }
  },
  "ledger.json": checkLedger,
  // Breakdowns (docs/breakdowns.md) are not yet a campaign kind the collector serves, so this
  // client sends none; what a client will send is checked here (a report's cell lies in the
  // joint domain of the attributes, or in its pair's; a split report holds every attribute's
  // value index; a hadamard report a coefficient index and a bit), the estimates are the
  // aggregator's.
  "breakdowns.json": (file) => {
    const attributes = file.attributes as Record<string, string[]>;
    const sizes = Object.values(attributes).map((v) => v.length);
    const joint = sizes.reduce((a, b) => a * b, 1);
    assert.ok(sizes.length >= 2 && (file.cases as J[]).length > 0);
    for (const c of file.cases as J[]) {
      for (const r of c.reports as J[]) {
        if (c.mechanism === "joint" && "y" in r) assert.ok(r.y >= 0 && r.y < joint, "y in the joint domain");
        if ("pair" in r) assert.ok(Number.isInteger(r.pair) && r.pair >= 0, "a pair index");
        if (c.mechanism === "split") {
          assert.deepEqual(Object.keys(r).sort(), Object.keys(attributes).map((name) => `${name}.y`).sort());
          for (const [name, labels] of Object.entries(attributes)) assert.ok(r[`${name}.y`] < labels.length);
        }
        if (c.mechanism === "hadamard") {
          assert.ok(Number.isInteger(r.coef) && r.coef >= 0 && r.coef < c.masks.length, "a coefficient");
          assert.ok(r.bit === 0 || r.bit === 1, "a bit");
        }
      }
    }
  },
  "hashing.json": (file) => {
    for (const c of file.item_keys) {
      assert.equal(hex(utf8(c.value)), c.utf8_hex);
      assert.equal(itemKey(c.value).toString(), c.item_key);
    }
    for (const c of file.local_hash) {
      assert.equal(itemKey(c.value).toString(), c.item_key);
      const bytes = Buffer.alloc(8);
      bytes.writeBigUInt64LE(BigInt(c.item_key));
      assert.equal(bytes.toString("hex"), c.input_hex);
      assert.equal(localHash(BigInt(c.item_key), c.seed), c.hash);
      for (const [g, bucket] of Object.entries(c.mod)) assert.equal(c.hash % Number(g), bucket);
    }
  },
  "config_ids.json": (file) => {
    for (const c of file.cases) {
      assert.equal(canonicalJson(c.created), c.canonical, c.title);
      assert.equal(configId(c.created), c.config_id, c.title);
      // The served answer (config + id) parses, every level's oracle passing its checks.
      const parsed = new CampaignConfig({ ...c.created, config_id: c.config_id });
      assert.equal(parsed.configId, c.config_id);
      // ... and a legacy id is refused (this client cannot recompute it: docs/client-js.md).
      if (c.legacy_config_id !== c.config_id) {
        assert.throws(() => new CampaignConfig({ ...c.created, config_id: c.legacy_config_id }));
      }
    }
  },
  "de.json": (file) => {
    for (const c of file.cases) {
      const oracle = new DirectEncoding(c.domain_size, c, c.epsilon);
      close(oracle.epsilon, c.epsilon);
      for (let v = 0; v < c.domain_size; v++) {
        assert.deepEqual(oracle.perturbIndex(v, new Script([coin(true)])), { y: v });
        for (let u = 0; u < c.domain_size - 1; u++) {
          const y = oracle.perturbIndex(v, new Script([coin(false), { below: c.domain_size - 1, u }])).y;
          assert.equal(y, u + (u >= v ? 1 : 0));
        }
      }
      // A tampered q (p + (d-1) q != 1, or a weaker guarantee) is refused.
      assert.throws(() => new DirectEncoding(c.domain_size, { p: c.p, q: c.q * 1.01 }, c.epsilon));
      assert.throws(() => new DirectEncoding(c.domain_size, c, c.epsilon * 0.99));
    }
  },
  "sue.json": checkUnary,
  "oue.json": checkUnary,
  "olh.json": (file) => {
    for (const c of file.cases) checkKeyedReports((keys) => new LocalHashing(keys, c, c.epsilon, false), c);
  },
  "blh.json": (file) => {
    for (const c of file.cases) checkKeyedReports((keys) => new LocalHashing(keys, c, c.epsilon, true), c);
  },
  "hr.json": (file) => {
    for (const c of file.cases) {
      const oracle = new HadamardResponse(c.domain_size, c, c.epsilon);
      assert.equal(oracle.K, c.K);
      close(oracle.epsilon, c.epsilon);
      for (const m of c.membership) assert.equal(popcount((m.value + 1) & m.y) % 2 === 0, m.in_set);
      for (const r of c.reports) {
        // From the report's y: drawing y then keeping its side gives y.
        for (let v = 0; v < c.domain_size; v++) {
          const inside = popcount((v + 1) & r.y) % 2 === 0;
          const script = new Script([{ below: c.K, u: r.y }, coin(inside)]);
          assert.deepEqual(oracle.perturbIndex(v, script), r);
          const moved = oracle.perturbIndex(v, new Script([{ below: c.K, u: r.y }, coin(!inside)])).y as number;
          assert.equal(popcount((v + 1) & moved) % 2 === 0, !inside);
        }
      }
    }
  },
  "ss.json": (file) => {
    for (const c of file.cases) {
      const oracle = new SubsetSelection(c.domain_size, c, c.epsilon);
      close(oracle.epsilon, c.epsilon);
      const bits = Array.from({ length: c.domain_size }, (_, i) => (c.items.includes(i) ? 1 : 0));
      assert.equal(packBits(bits), c.report.bits);
      // v = items[0] included, the others by Floyd's draws (t = j each time: j itself).
      const v = c.items[0];
      const others = (c.items as number[]).slice(1).map((i) => i - (i > v ? 1 : 0));
      const n = c.domain_size - 1;
      const draws: Draw[] = [coin(true)];
      const size = c.k - 1;
      for (let s = 0; s < size; s++) draws.push({ below: n - size + s + 1, u: others[s] as number });
      const script = new Script(draws);
      assert.deepEqual(oracle.perturbIndex(v, script), c.report);
      script.done();
    }
  },
  "cms.json": (file) => {
    for (const c of file.cases) {
      const keys = (c.domain as string[]).map(itemKey);
      const oracle = new CountMeanSketch(keys, c, c.epsilon);
      close(oracle.epsilon, c.epsilon);
      for (const [label, hashes] of Object.entries(c.hashes as Record<string, number[]>)) {
        hashes.forEach((h, j) => assert.equal(localHash(itemKey(label), j) % c.m, h));
      }
      for (const r of c.reports) {
        assert.equal(localHash(itemKey(r.value), r.report.j) % c.m, r.bucket);
        const script = new Script([{ below: c.k, u: r.report.j }, ...bitCoins(unpack(r.report.bits, c.m))]);
        assert.deepEqual(oracle.perturbIndex(r.index, script), r.report);
        script.done();
      }
    }
  },
  "hcms.json": (file) => {
    for (const c of file.cases) {
      const keys = (c.domain as string[]).map(itemKey);
      const oracle = new HadamardCountMeanSketch(keys, { ...c, f: c.flip }, c.epsilon);
      close(oracle.epsilon, c.epsilon);
      for (const r of c.reports) {
        assert.equal(localHash(itemKey(r.value), r.report.j) % c.m, r.bucket);
        assert.equal(popcount(r.report.l & r.bucket) % 2 === 0 ? 1 : -1, r.true_sign);
        const script = new Script([{ below: c.k, u: r.report.j }, { below: c.m, u: r.report.l }, coin(r.flipped)]);
        assert.deepEqual(oracle.perturbIndex(r.index, script), r.report);
        script.done();
      }
    }
  },
  "she.json": (file) => {
    checkHistogram(file, "she");
    for (const c of file.cases) {
      const oracle = new HistogramEncoding(c.domain_size, { resolution: c.resolution, noise: c.noise.served }, c.epsilon);
      assert.equal(packInt32(c.z), c.report.z);
      const half = halfTable(parseNoise(c.noise.served, c.resolution), c.resolution);
      // Draws whose noise gives the vector's z (clamped values: the noise at the clamp).
      const draws = (c.z as number[]).map((z, i) => noiseDraw(half, z - (i === c.value ? c.resolution : 0)));
      const script = new Script(draws);
      assert.deepEqual(oracle.perturbIndex(c.value, script), c.report);
      script.done();
      assert.throws(() => new HistogramEncoding(c.domain_size, { resolution: c.resolution, noise: { ...c.noise.served, total: "12345" } }, c.epsilon));
    }
  },
  "the.json": (file) => {
    // THE's report is SHE's (its own threshold is the aggregator's): the same encoding.
    for (const c of file.cases) {
      assert.equal(packInt32(c.z), c.report.z);
      if (c.theta !== null) assert.equal(Math.floor(c.theta * c.resolution), c.threshold);
    }
  },
  "rappor.json": (file) => {
    const oracle = new Rappor(file.labels, file.params, 20);
    for (const c of file.cases) {
      const index = (file.labels as string[]).indexOf(c.value);
      const bloom = oracle.bloom(index, c.cohort);
      assert.deepEqual([...bloom].sort((a, b) => a - b), [...new Set(c.bloom_bits as number[])].sort((a, b) => a - b));
      const secret = Buffer.from(c.secret_hex, "hex");
      assert.deepEqual(oracle.coins(secret, index), c.prr_coins);
      const prr = (c.prr_coins as number[]).map((u, b) => oracle.prrBit(u, bloom.has(b)));
      assert.deepEqual(prr, c.prr);
      assert.equal(packBits(c.irr), c.report.bits);
      const script = new Script(bitCoins(c.irr));
      assert.deepEqual(oracle.perturb(index, { secret, cohort: c.cohort }, script, true), c.report);
      script.done();
    }
  },
  "numeric.json": (file) => {
    for (const mech of file.mechanisms) {
      const { oracle, epsilon, range, ...params } = mech.config;
      const numeric = new NumericMechanism(oracle, range[0], range[1], params, epsilon);
      for (const c of mech.cases) {
        assert.equal(numeric.level(c.value, BigInt(c.alpha)), c.level, `${oracle} ${c.value}`);
        const script = new Script((c.draws as { below: number; u: number }[]).map((d) => ({ below: d.below, u: d.u })));
        assert.deepEqual(numeric.perturbLevel(c.level, script), c.report);
        script.done();
        const fresh = new Script([{ big: BigInt(c.alpha) }, ...c.draws.map((d: J) => ({ below: d.below, u: d.u }))]);
        assert.deepEqual(numeric.perturbNumber(c.value, fresh), c.report);
      }
    }
  },
  "open_domain.json": (file) => {
    for (const v of file.values) {
      const checked = openValue(v.input, file.max_length);
      assert.equal("text" in checked, v.accepted, JSON.stringify(v.input));
      if (!("text" in checked)) continue;
      assert.equal(checked.text, v.nfc);
      assert.equal(utf8(checked.text).length, v.utf8_bytes);
      assert.equal(itemKey(checked.text).toString(), v.item_key);
      (v.hashes as number[]).forEach((h, j) => assert.equal(localHash(itemKey(checked.text), j) % file.m, h));
    }
    assert.equal(canonicalJson(file.config), file.config_json);
    const config = new CampaignConfig({ ...file.config, config_id: file.config_id });
    assert.equal(config.mechanism("").kind, "key");
    const oracle = new CountMeanSketch([], file.config.params, file.release.epsilon);
    for (const [i, text] of (file.release.reported as string[]).entries()) {
      const r = file.release.reports[i];
      const script = new Script([{ below: file.release.k, u: r.j }, ...bitCoins(unpack(r.bits, file.release.m))]);
      assert.deepEqual(oracle.perturbKey(itemKey(text.normalize("NFC")), script), r);
    }
  },
  "open_domain_olh.json": (file) => {
    const config = new CampaignConfig({ ...file.config, config_id: file.config_id });
    const built = config.mechanism("");
    assert.equal(built.kind, "key");
    const oracle = built.oracle as LocalHashing;
    assert.equal(oracle.g, file.g);
    for (const r of file.reports) {
      assert.equal(localHash(itemKey(r.value), r.seed) % file.g, r.x);
      const draws: Draw[] = [{ below: 2 ** 32, u: r.seed }, coin(r.keep)];
      if (!r.keep) draws.push({ below: file.g - 1, u: r.other });
      assert.deepEqual(oracle.perturbKey(itemKey(r.value), new Script(draws)), { seed: r.seed, y: r.y });
    }
  },
  "pem.json": (file) => {
    for (const c of file.cases) {
      assert.equal(canonicalJson(c.config), c.config_json);
      const config = new CampaignConfig({ ...c.config, config_id: c.config_id });
      const pem = config.mechanism("").oracle as PrefixExtending;
      assert.deepEqual(pem.lengths, c.prefix_lengths);
      for (const v of c.values) {
        const checked = openValue(v.input, c.config.max_length);
        assert.equal("text" in checked, v.accepted, JSON.stringify(v.input));
        if ("text" in checked) assert.deepEqual(pem.labels(checked.text), v.labels);
      }
      for (const l of c.labels) {
        assert.equal(itemKey(l.label).toString(), l.item_key);
        (l.hashes as number[]).forEach((h, j) => assert.equal(localHash(itemKey(l.label), j) % c.config.params.m, h));
      }
      const { k, m } = c.config.params;
      for (const r of c.reports) {
        const draws: Draw[] = [{ below: pem.lengths.length, u: r.group }, { below: k, u: r.j }];
        if (c.config.params.sketch === "cms") {
          const flipped = new Set(r.flipped as number[]);
          for (let i = 0; i < m; i++) draws.push(coin(i === r.bucket ? !flipped.has(i) : flipped.has(i)));
        } else {
          draws.push({ below: m, u: r.l }, coin(r.flipped));
        }
        const script = new Script(draws);
        assert.deepEqual(pem.perturbText(r.value.normalize("NFC"), script), r.report);
        script.done();
      }
    }
  },
};

test("every vector file has a handler", () => {
  const files = readdirSync(VECTORS).filter((f) => f.endsWith(".json")).sort();
  assert.ok(files.length >= 18);
  const missing = files.filter((f) => !(f in handlers));
  assert.deepEqual(missing, [], "vector files without a handler in client-js/test/vectors.test.ts");
});

for (const name of Object.keys(handlers).sort()) {
  test(`vectors: ${name}`, async () => handlers[name]?.(load(name)));
}

