/**
 * Histogram encoding (SHE, THE; Wang et al., USENIX Security 2017, Sec. 4.3) on ldptel's
 * integer grid (docs/protocol.md, "Noise table"): the client rebuilds the integer weights
 * from the served `a`, `W(0)` and `M` by integer arithmetic alone, checks their sum against
 * the served total and their guarantee against epsilon, and draws each coordinate's noise
 * from one exact uniform integer below the total.
 */

import { ConfigError, type IndexOracle, type Params, type WireReport, checkGuarantee, int } from "./oracles.js";
import { type Randomness, dyadic } from "./random.js";
import { packInt32 } from "./wire.js";

const TOTAL_BITS = 61n;
const MAX_CLAMP = 2 ** 18;
const DECIMAL = /^[1-9][0-9]{0,18}$/;

export interface NoiseTable {
  a: number;
  center: bigint;
  clamp: number;
  total: bigint;
}

function decimal(value: unknown, name: string): bigint {
  if (typeof value !== "string" || !DECIMAL.test(value) || BigInt(value) >> TOTAL_BITS) {
    throw new ConfigError("params.noise", `${name} must be a decimal string of an integer < 2^61`);
  }
  return BigInt(value);
}

export function parseNoise(value: unknown, resolution: number): NoiseTable {
  if (typeof value !== "object" || value === null) {
    throw new ConfigError("params.noise", "must be an object of a, center, clamp and total");
  }
  const v = value as Record<string, unknown>;
  const keys = Object.keys(v).sort().join(",");
  if (keys !== "a,center,clamp,total") {
    throw new ConfigError("params.noise", "must be an object of a, center, clamp and total");
  }
  const a = v["a"];
  if (typeof a !== "number" || !(a > 0 && a < 1)) {
    throw new ConfigError("params.noise", "a must be a number in (0, 1)");
  }
  const clamp = v["clamp"];
  if (typeof clamp !== "number" || !Number.isInteger(clamp) || clamp < resolution + 1 || clamp > MAX_CLAMP) {
    throw new ConfigError("params.noise", "clamp out of range");
  }
  return { a, center: decimal(v["center"], "center"), clamp, total: decimal(v["total"], "total") };
}

/** W(0) ... W(L), L = M + R: W(j+1) = ceil(W(j) num / den), the tail cell
 * ceil(W(L-1) num / (den - num)); a = num / den exactly. */
export function halfTable(table: NoiseTable, resolution: number): bigint[] {
  const [mantissa, exponent] = dyadic(table.a);
  const num = mantissa;
  const den = 1n << exponent;
  const ceilDiv = (x: bigint, y: bigint): bigint => (x + y - 1n) / y; // x, y > 0
  const weights = [table.center];
  for (let i = 0; i < table.clamp + resolution - 1; i++) {
    weights.push(ceilDiv((weights[weights.length - 1] as bigint) * num, den));
  }
  weights.push(ceilDiv((weights[weights.length - 1] as bigint) * num, den - num));
  return weights;
}

/** SHE and THE's report: z_i = clamp(R [i = v] + N_i, -M, M) as little-endian int32. */
export class HistogramEncoding implements IndexOracle {
  readonly epsilon: number;
  readonly permanentEpsilon: number;
  readonly resolution: number;
  readonly clamp: number;
  readonly halfWidth: number;
  /** cdf[i]: the weights of noise -L .. -L + i summed. */
  private readonly cdf: bigint[];
  readonly total: bigint;

  constructor(readonly d: number, params: Params, allowed: number) {
    this.resolution = int(params, "resolution", 1, 4096);
    const table = parseNoise(params["noise"], this.resolution);
    const half = halfTable(table, this.resolution);
    this.clamp = table.clamp;
    this.halfWidth = half.length - 1;
    const weights = [...half.slice(1).reverse(), ...half];
    this.cdf = [];
    let sum = 0n;
    for (const w of weights) this.cdf.push((sum += w));
    this.total = sum;
    if (sum !== table.total || sum <= 1n << (TOTAL_BITS - 1n)) {
      throw new ConfigError("params.noise", "total is not the sum of the table's weights");
    }
    this.epsilon = this.permanentEpsilon = checkGuarantee(this.loss(weights), allowed, "params.noise");
  }

  /** The largest privacy loss over outputs: two coordinates change (R -> 0, 0 -> R). */
  private loss(weights: bigint[]): number {
    const up = this.masses(weights, this.resolution);
    const down = this.masses(weights, 0);
    let most = -Infinity;
    let least = Infinity;
    for (let i = 0; i < up.length; i++) {
      const l = Math.log(Number(up[i])) - Math.log(Number(down[i]));
      most = Math.max(most, l);
      least = Math.min(least, l);
    }
    return most - least;
  }

  /** Masses of clamp(x + noise, -M, M) over -M..M. */
  private masses(weights: bigint[], x: number): bigint[] {
    const M = this.clamp;
    const L = this.halfWidth;
    const low = this.cdf[L - M - x] as bigint;
    const high = this.total - (this.cdf[L + M - x - 1] as bigint);
    return [low, ...weights.slice(L - M + 1 - x, L + M - x), high];
  }

  /** One noise draw: the cell holding a uniform u below the total (binary search). */
  noise(rng: Randomness): number {
    const u = rng.belowBig(this.total);
    let lo = 0;
    let hi = this.cdf.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.cdf[mid] as bigint) > u) hi = mid;
      else lo = mid + 1;
    }
    return lo - this.halfWidth;
  }

  perturbIndex(v: number, rng: Randomness): WireReport {
    const z = new Array<number>(this.d);
    for (let i = 0; i < this.d; i++) {
      const raw = (i === v ? this.resolution : 0) + this.noise(rng);
      z[i] = Math.min(Math.max(raw, -this.clamp), this.clamp);
    }
    return { z: packInt32(z) };
  }
}
