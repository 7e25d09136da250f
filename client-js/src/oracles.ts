/**
 * The frequency oracles' client side (docs/protocol.md, "Oracles"): each is built from a
 * config's served parameters, checks them (each probability in its open range, and the
 * guarantee computed from them at most the reporting epsilon), and draws reports with the
 * exact samplers of random.ts. A report is the JSON object the collector takes.
 */

import { hmacSha256, itemKey, localHash, utf8 } from "./hash.js";
import { type Randomness, uniformSubset } from "./random.js";
import { packBits } from "./wire.js";

export type WireReport = Record<string, number | string | number[]>;

/** A served config the client cannot use: the field and why (a logged "config invalid"). */
export class ConfigError extends Error {
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {
    super(`${field}: ${reason}`);
    this.name = "ConfigError";
  }
}

export type Params = Record<string, unknown>;

export function num(params: Params, name: string): number {
  const v = params[name];
  if (typeof v !== "number" || !Number.isFinite(v)) {
    throw new ConfigError(`params.${name}`, "is required (a number served with the config)");
  }
  return v;
}

export function int(params: Params, name: string, low: number, high = Number.MAX_SAFE_INTEGER): number {
  const v = num(params, name);
  if (!Number.isInteger(v) || v < low || v > high) {
    throw new ConfigError(`params.${name}`, `must be an integer in [${low}, ${high}]`);
  }
  return v;
}

export function probability(params: Params, name: string): number {
  const v = num(params, name);
  if (!(v > 0 && v < 1)) throw new ConfigError(`params.${name}`, "must be in (0, 1)");
  return v;
}

/** The served values must not promise more than the reporting epsilon (protocol "Checks"). */
export function checkGuarantee(epsilon: number, allowed: number, field = "params"): number {
  if (!(epsilon <= allowed * (1 + 1e-9) + 1e-12)) {
    throw new ConfigError(field, `guarantee ${epsilon} exceeds epsilon ${allowed}`);
  }
  return epsilon;
}

/** What every oracle offers: its guarantee, and one report of a value. */
export interface Mechanism {
  readonly epsilon: number;
  /** eps_inf for RAPPOR (all reports of one value); the same as epsilon otherwise. */
  readonly permanentEpsilon: number;
}

export interface IndexOracle extends Mechanism {
  perturbIndex(index: number, rng: Randomness): WireReport;
}

/** Oracles whose report depends on a value only through its item key (open domains). */
export interface KeyedOracle extends IndexOracle {
  perturbKey(key: bigint, rng: Randomness): WireReport;
}

const unaryEpsilon = (p: number, q: number): number => Math.log((p * (1 - q)) / ((1 - p) * q));

function unaryProbabilities(params: Params): [number, number] {
  const p = probability(params, "p");
  const q = probability(params, "q");
  if (!(q < p)) throw new ConfigError("params.q", "must be below p");
  return [p, q];
}

/** Bits 0..size-1, bit `hot` 1 with probability p and every other with q (exact coins). */
export function unaryBits(rng: Randomness, size: number, hot: number, p: number, q: number): number[] {
  const bits = new Array<number>(size);
  for (let i = 0; i < size; i++) bits[i] = rng.bernoulli(i === hot ? p : q) ? 1 : 0;
  return bits;
}

/** Uniform among [0, size) without `skip`: draw below size - 1 and step over it. */
function otherThan(rng: Randomness, size: number, skip: number): number {
  const other = rng.below(size - 1);
  return other + (other >= skip ? 1 : 0);
}

export const popcount = (x: number): number => {
  let n = 0;
  for (let v = x >>> 0; v; v &= v - 1) n++;
  return n;
};

// -- oracles over a domain of d labels ------------------------------------------------------

export class DirectEncoding implements IndexOracle {
  readonly epsilon: number;
  readonly permanentEpsilon: number;
  readonly p: number;
  constructor(readonly d: number, params: Params, allowed: number) {
    this.p = probability(params, "p");
    const q = probability(params, "q");
    if (!(q < this.p)) throw new ConfigError("params.q", "must be below p");
    if (Math.abs(this.p + (d - 1) * q - 1) > 1e-9) {
      throw new ConfigError("params.q", "p + (d - 1) q must be 1");
    }
    this.epsilon = this.permanentEpsilon = checkGuarantee(Math.log(this.p / q), allowed);
  }
  perturbIndex(v: number, rng: Randomness): WireReport {
    return { y: rng.bernoulli(this.p) ? v : otherThan(rng, this.d, v) };
  }
}

/** SUE (basic one-time RAPPOR) and OUE: the same report, their own p and q. */
export class UnaryEncoding implements IndexOracle {
  readonly epsilon: number;
  readonly permanentEpsilon: number;
  readonly p: number;
  readonly q: number;
  constructor(readonly d: number, params: Params, allowed: number) {
    [this.p, this.q] = unaryProbabilities(params);
    this.epsilon = this.permanentEpsilon = checkGuarantee(unaryEpsilon(this.p, this.q), allowed);
  }
  perturbIndex(v: number, rng: Randomness): WireReport {
    return { bits: packBits(unaryBits(rng, this.d, v, this.p, this.q)) };
  }
}

const SEED_LIMIT = 2 ** 32;

/** OLH (g served) and BLH (g = 2). */
export class LocalHashing implements KeyedOracle {
  readonly epsilon: number;
  readonly permanentEpsilon: number;
  readonly g: number;
  readonly p: number;
  constructor(readonly keys: bigint[], params: Params, allowed: number, binary: boolean) {
    this.g = binary ? 2 : int(params, "g", 2, 2 ** 32 - 1);
    this.p = probability(params, "p");
    if (!(this.p > 1 / this.g)) throw new ConfigError("params.p", "must be above 1/g");
    const other = (1 - this.p) / (this.g - 1);
    this.epsilon = this.permanentEpsilon = checkGuarantee(Math.log(this.p / other), allowed);
  }
  perturbIndex(v: number, rng: Randomness): WireReport {
    return this.perturbKey(this.keys[v] as bigint, rng);
  }
  perturbKey(key: bigint, rng: Randomness): WireReport {
    const seed = rng.below(SEED_LIMIT);
    const x = localHash(key, seed) % this.g;
    return { seed, y: rng.bernoulli(this.p) ? x : otherThan(rng, this.g, x) };
  }
}

export class HadamardResponse implements IndexOracle {
  readonly epsilon: number;
  readonly permanentEpsilon: number;
  readonly K: number;
  readonly p: number;
  constructor(readonly d: number, params: Params, allowed: number) {
    let K = 1;
    while (K < d + 1) K *= 2;
    this.K = K;
    this.p = probability(params, "p");
    if (!(this.p > 0.5)) throw new ConfigError("params.p", "must be above 1/2");
    this.epsilon = this.permanentEpsilon = checkGuarantee(Math.log(this.p / (1 - this.p)), allowed);
  }
  perturbIndex(v: number, rng: Randomness): WireReport {
    const row = v + 1;
    let y = rng.below(this.K);
    const inside = popcount(row & y) % 2 === 0;
    // XOR with the row's lowest set bit flips H[row, y]: a bijection between the two sides.
    if (inside !== rng.bernoulli(this.p)) y ^= row & -row;
    return { y };
  }
}

export class SubsetSelection implements IndexOracle {
  readonly epsilon: number;
  readonly permanentEpsilon: number;
  readonly k: number;
  readonly p: number;
  constructor(readonly d: number, params: Params, allowed: number) {
    this.k = int(params, "k", 1, d - 1);
    this.p = probability(params, "p");
    if (!(this.p > this.k / d)) throw new ConfigError("params.p", "must be above k/d");
    const eps = Math.log((this.p / (1 - this.p)) * ((d - this.k) / this.k));
    this.epsilon = this.permanentEpsilon = checkGuarantee(eps, allowed);
  }
  perturbIndex(v: number, rng: Randomness): WireReport {
    const include = rng.bernoulli(this.p);
    const bits = new Array<number>(this.d).fill(0);
    // A uniform subset of the d - 1 other items: [0, d - 1) with v's place skipped.
    for (const t of uniformSubset(rng, this.d - 1, this.k - (include ? 1 : 0))) {
      bits[t + (t >= v ? 1 : 0)] = 1;
    }
    if (include) bits[v] = 1;
    return { bits: packBits(bits) };
  }
}

/** Apple's count mean sketch: row j, then SUE's bits around h_j(value). */
export class CountMeanSketch implements KeyedOracle {
  readonly epsilon: number;
  readonly permanentEpsilon: number;
  readonly k: number;
  readonly m: number;
  readonly p: number;
  readonly q: number;
  constructor(readonly keys: bigint[], params: Params, allowed: number) {
    this.k = int(params, "k", 1, 65536);
    this.m = int(params, "m", 2, 65536);
    [this.p, this.q] = unaryProbabilities(params);
    this.epsilon = this.permanentEpsilon = checkGuarantee(unaryEpsilon(this.p, this.q), allowed);
  }
  perturbIndex(v: number, rng: Randomness): WireReport {
    return this.perturbKey(this.keys[v] as bigint, rng);
  }
  perturbKey(key: bigint, rng: Randomness): WireReport {
    const j = rng.below(this.k);
    const hot = localHash(key, j) % this.m;
    return { j, bits: packBits(unaryBits(rng, this.m, hot, this.p, this.q)) };
  }
}

/** The one-bit Hadamard count mean sketch: row j, column l, the sign H[l, h_j] flipped
 * with probability f. */
export class HadamardCountMeanSketch implements KeyedOracle {
  readonly epsilon: number;
  readonly permanentEpsilon: number;
  readonly k: number;
  readonly m: number;
  readonly f: number;
  constructor(readonly keys: bigint[], params: Params, allowed: number) {
    this.k = int(params, "k", 1, 65536);
    this.m = int(params, "m", 2, 65536);
    if (this.m & (this.m - 1)) throw new ConfigError("params.m", "must be a power of two");
    this.f = probability(params, "f");
    if (!(this.f < 0.5)) throw new ConfigError("params.f", "must be below 1/2");
    this.epsilon = this.permanentEpsilon = checkGuarantee(Math.log((1 - this.f) / this.f), allowed);
  }
  perturbIndex(v: number, rng: Randomness): WireReport {
    return this.perturbKey(this.keys[v] as bigint, rng);
  }
  perturbKey(key: bigint, rng: Randomness): WireReport {
    const j = rng.below(this.k);
    const l = rng.below(this.m);
    const positive = popcount(l & (localHash(key, j) % this.m)) % 2 === 0;
    const flipped = rng.bernoulli(this.f);
    return { j, l, bit: positive !== flipped ? 1 : 0 };
  }
}

// -- RAPPOR ---------------------------------------------------------------------------------

const PRR_SCALE = 2 ** 31;

/** One install's RAPPOR secret and cohort for a config (and level), persisted. */
export interface RapporClient {
  secret: Uint8Array;
  cohort: number;
}

/** Full RAPPOR (Erlingsson, Pihur, Korolova, CCS 2014). */
export class Rappor implements Mechanism {
  readonly epsilon: number;
  readonly permanentEpsilon: number;
  readonly k: number;
  readonly h: number;
  readonly m: number;
  readonly f: number;
  readonly p: number;
  readonly q: number;
  readonly threshold: number;
  constructor(readonly labels: string[], params: Params, allowed: number) {
    this.k = int(params, "k", 1, 4096);
    this.h = int(params, "h", 1, this.k);
    this.m = int(params, "m", 1, 2 ** 16);
    this.f = probability(params, "f");
    this.p = probability(params, "p");
    this.q = probability(params, "q");
    if (!(this.p < this.q)) throw new ConfigError("params.q", "must be above p");
    this.threshold = Math.round(this.f * PRR_SCALE);
    const pStar = (this.f / 2) * this.q + (1 - this.f / 2) * this.p;
    const qStar = (1 - this.f / 2) * this.q + (this.f / 2) * this.p;
    const eps = this.h * Math.log((qStar * (1 - pStar)) / (pStar * (1 - qStar)));
    this.epsilon = checkGuarantee(eps, allowed);
    this.permanentEpsilon = 2 * this.h * Math.log((1 - this.f / 2) / (this.f / 2));
  }

  /** Bloom bits of a label in a cohort: H(item_key, c h + j) mod k, j < h. */
  bloom(index: number, cohort: number): Set<number> {
    const key = itemKey(this.labels[index] as string);
    const bits = new Set<number>();
    for (let j = 0; j < this.h; j++) bits.add(localHash(key, cohort * this.h + j) % this.k);
    return bits;
  }

  /** The permanent response's coins, HMAC-SHA256(secret, be32(i) || utf8(value)) as words. */
  coins(secret: Uint8Array, index: number): number[] {
    const value = utf8(this.labels[index] as string);
    const words: number[] = [];
    for (let i = 0; words.length < this.k; i++) {
      const message = new Uint8Array(4 + value.length);
      new DataView(message.buffer).setUint32(0, i);
      message.set(value, 4);
      const digest = hmacSha256(secret, message);
      const view = new DataView(digest.buffer);
      for (let w = 0; w < 8 && words.length < this.k; w++) words.push(view.getUint32(4 * w));
    }
    return words;
  }

  /** PRR bit from a coin: 1 below t, 0 below 2t, else the Bloom bit. */
  prrBit(coin: number, bloom: boolean): number {
    return coin < this.threshold ? 1 : coin < 2 * this.threshold ? 0 : bloom ? 1 : 0;
  }

  /** `memoized`: the PRR from the install's secret (exact memoization); else fresh coins. */
  perturb(index: number, client: RapporClient, rng: Randomness, memoized: boolean): WireReport {
    const bloom = this.bloom(index, client.cohort);
    const coins = memoized ? this.coins(client.secret, index) : null;
    const irr = new Array<number>(this.k);
    for (let b = 0; b < this.k; b++) {
      const coin = coins ? (coins[b] as number) : rng.below(2 ** 32);
      const prr = this.prrBit(coin, bloom.has(b));
      irr[b] = rng.bernoulli(prr ? this.q : this.p) ? 1 : 0;
    }
    return { cohort: client.cohort, bits: packBits(irr) };
  }
}

// -- PEM ------------------------------------------------------------------------------------

/** The Prefix Extending Method's client (Wang, Li, Jha, IEEE TDSC 2019, Sec. 5): a uniform
 * group g, then the group sketch's report of the value's s_g-bit prefix label. */
export class PrefixExtending implements Mechanism {
  readonly epsilon: number;
  readonly permanentEpsilon: number;
  readonly lengths: number[];
  readonly sketch: CountMeanSketch | HadamardCountMeanSketch;
  constructor(readonly maxLength: number, params: Params, allowed: number) {
    const topK = int(params, "top_k", 1, 2 ** 20);
    const step = int(params, "step_bits", 1, 64);
    const kind = params["sketch"];
    if (kind === "cms") this.sketch = new CountMeanSketch([], params, allowed);
    else if (kind === "hcms") this.sketch = new HadamardCountMeanSketch([], params, allowed);
    else throw new ConfigError("params.sketch", "must be cms or hcms");
    const total = 8 * maxLength;
    const gamma = Math.ceil(Math.log2(topK));
    this.lengths = [];
    for (let g = 0; ; g++) {
      const s = Math.min(total, gamma + (g + 1) * step);
      this.lengths.push(s);
      if (s === total) break;
    }
    this.epsilon = this.permanentEpsilon = this.sketch.epsilon;
  }

  /** The labels of a value's prefixes, one per group (NFC text already checked). */
  labels(text: string): string[] {
    let bits = "";
    for (const byte of utf8(text)) bits += byte.toString(2).padStart(8, "0");
    bits = bits.padEnd(8 * this.maxLength, "0");
    return this.lengths.map((s) => bits.slice(0, s));
  }

  perturbText(text: string, rng: Randomness): WireReport {
    const group = rng.below(this.lengths.length);
    const label = this.labels(text)[group] as string;
    return { group, ...this.sketch.perturbKey(itemKey(label), rng) };
  }
}
