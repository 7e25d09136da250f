/**
 * Numeric mechanisms' client side (docs/protocol.md, "Numeric campaigns"): clip, round to a
 * grid level by alpha-point rounding (Ding, Kulkarni, Yekhanin, NeurIPS 2017, Sec. 3), then
 * the mechanism's law by exact integer weights: every draw is an integer uniform below a
 * served bound; no real number is sampled.
 */

import { ConfigError, type Mechanism, type Params, type WireReport, checkGuarantee, int } from "./oracles.js";
import { type Randomness, uniformSubset } from "./random.js";

const ALPHA_LIMIT = 1n << 64n;
const MIX_SCALE = 2 ** 32;

/** The grid level of `value` for a 64-bit alpha: s + 1 iff alpha < ceil(f 2^64). */
export function alphaPointLevel(value: number, alpha: bigint, low: number, high: number, resolution: number): number {
  const clipped = Math.min(Math.max(value, low), high);
  const scaled = Math.min(Math.max(((clipped - low) / (high - low)) * resolution, 0), resolution);
  const below = Math.min(Math.floor(scaled), resolution - 1);
  const threshold = BigInt(Math.ceil((scaled - below) * 2 ** 64));
  return below + (alpha < threshold ? 1 : 0);
}

interface Law {
  readonly epsilon: number;
  draw(level: number, rng: Randomness): WireReport;
}

/** Duchi et al.'s bit: u below T = 2A + BK, y = 1 iff u < A + B s. */
class DuchiLaw implements Law {
  readonly epsilon: number;
  readonly total: number;
  constructor(readonly K: number, readonly step: number, readonly base: number, readonly offset = 0) {
    this.total = 2 * base + step * K;
    this.epsilon = Math.log((base + step * K) / base);
  }
  bit(level: number, rng: Randomness): number {
    return rng.below(this.total) < this.base + this.step * level ? 1 : 0;
  }
  draw(level: number, rng: Randomness): WireReport {
    return { y: this.bit(level, rng) };
  }
}

/** PM / SW's band: weight P on [s, s + w), Q elsewhere, over N = K + w codes. */
class BandLaw implements Law {
  readonly epsilon: number;
  readonly total: number;
  readonly gap: number;
  constructor(readonly K: number, readonly heavy: number, readonly light: number, readonly band: number) {
    this.gap = heavy - light;
    this.total = (K + band) * light + band * this.gap;
    this.epsilon = Math.log(heavy / light);
  }
  code(level: number, rng: Randomness): number {
    const u = rng.below(this.total);
    const inBand = this.band * this.gap;
    return u < inBand ? level + Math.floor(u / this.gap) : Math.floor((u - inBand) / this.light);
  }
  draw(level: number, rng: Randomness): WireReport {
    return { y: this.code(level, rng) };
  }
}

/** HM: PM's law with probability mix / 2^32, else Duchi's bit as code N + b. */
class HybridLaw implements Law {
  readonly epsilon: number;
  constructor(readonly band: BandLaw, readonly duchi: DuchiLaw, readonly mix: number) {
    this.epsilon = Math.max(band.epsilon, duchi.epsilon);
  }
  draw(level: number, rng: Randomness): WireReport {
    if (rng.below(MIX_SCALE) < this.mix) return { y: this.band.code(level, rng) };
    return { y: this.band.K + this.band.band + this.duchi.bit(level, rng) };
  }
}

/** dBitFlip: d' of the d = K + 1 buckets, each sampled bucket's bit 1 with weight P (its
 * own) or Q (another) out of P + Q. */
class BitFlipLaw implements Law {
  readonly epsilon: number;
  constructor(readonly K: number, readonly sampled: number, readonly heavy: number, readonly light: number) {
    this.epsilon = 2 * Math.log(heavy / light);
  }
  draw(level: number, rng: Randomness): WireReport {
    const d = this.K + 1;
    const chosen = this.sampled === d ? [...Array(d).keys()] : uniformSubset(rng, d, this.sampled);
    const b = chosen.map((t) => (rng.below(this.heavy + this.light) < (t === level ? this.heavy : this.light) ? 1 : 0));
    return { j: chosen, b };
  }
}

export class NumericMechanism implements Mechanism {
  readonly epsilon: number;
  readonly permanentEpsilon: number;
  readonly resolution: number;
  private readonly law: Law;
  constructor(oracle: string, readonly low: number, readonly high: number, params: Params, allowed: number) {
    const K = int(params, "resolution", 1, 2 ** 16);
    this.resolution = K;
    const weight = (name: string): number => int(params, name, 1, 2 ** 40);
    if (oracle === "duchi" || oracle === "1bitmean") {
      this.law = new DuchiLaw(K, weight("step"), weight("base"));
    } else if (oracle === "pm" || oracle === "sw") {
      this.law = new BandLaw(K, weight("heavy"), weight("light"), int(params, "band", 1, 2 ** 16));
    } else if (oracle === "hm") {
      const band = new BandLaw(K, weight("heavy"), weight("light"), int(params, "band", 1, 2 ** 16));
      this.law = new HybridLaw(band, new DuchiLaw(K, weight("step"), weight("base")), int(params, "mix", 0, MIX_SCALE));
    } else if (oracle === "dbitflip") {
      this.law = new BitFlipLaw(K, int(params, "sampled", 1, K + 1), weight("heavy"), weight("light"));
    } else {
      throw new ConfigError("oracle", `unknown numeric mechanism ${oracle}`);
    }
    this.epsilon = this.permanentEpsilon = checkGuarantee(this.law.epsilon, allowed);
  }

  level(value: number, alpha: bigint): number {
    return alphaPointLevel(value, alpha, this.low, this.high, this.resolution);
  }

  /** A fresh report: a fresh alpha, then the level's law. */
  perturbNumber(value: number, rng: Randomness): WireReport {
    return this.perturbLevel(this.level(value, rng.belowBig(ALPHA_LIMIT)), rng);
  }

  perturbLevel(level: number, rng: Randomness): WireReport {
    return this.law.draw(level, rng);
  }
}
