/**
 * Exact samplers on the platform CSPRNG (`crypto.getRandomValues`), with the laws of the
 * Python client's client/samplers.py: uniform integers by rejection, coins of probability
 * exactly a double's value (compared one random byte at a time), uniform subsets by Floyd's
 * algorithm. No floating-point value is ever sampled (Mironov, CCS 2012), and `Math.random`
 * is never used.
 */

/** Where every random draw of an oracle comes from (tests substitute scripted draws). */
export interface Randomness {
  /** One integer uniform on [0, upper), 1 <= upper <= 2^53. */
  below(upper: number): number;
  /** One integer uniform on [0, upper), any size (noise tables, 64-bit alphas). */
  belowBig(upper: bigint): bigint;
  /** 1 with probability exactly `prob` (the double's value). */
  bernoulli(prob: number): boolean;
  /** `size` uniform bytes (secrets). */
  bytes(size: number): Uint8Array;
}

const POOL_BYTES = 4096;

/** The OS CSPRNG, read through a pool; each byte is used once. */
export class SecureRandom implements Randomness {
  private readonly pool = new Uint8Array(POOL_BYTES);
  private used = POOL_BYTES;

  private byte(): number {
    if (this.used === POOL_BYTES) {
      globalThis.crypto.getRandomValues(this.pool);
      this.used = 0;
    }
    return this.pool[this.used++] as number;
  }

  bytes(size: number): Uint8Array {
    const out = new Uint8Array(size);
    for (let i = 0; i < size; i++) out[i] = this.byte();
    return out;
  }

  /** `bits` uniform bits (bits <= 53): ceil(bits / 8) fresh bytes, the first one masked. */
  private bits(bits: number): number {
    const bytes = Math.ceil(bits / 8);
    let value = this.byte() & ((1 << (bits - 8 * (bytes - 1))) - 1);
    for (let i = 1; i < bytes; i++) value = value * 256 + this.byte();
    return value;
  }

  below(upper: number): number {
    if (!Number.isInteger(upper) || upper < 1 || upper > 2 ** 53) {
      throw new RangeError("below: bad bound");
    }
    if (upper === 1) return 0;
    const bits = bitLength(upper - 1);
    // Plain rejection, as Python's secrets.randbelow: every value has probability 1/upper.
    for (;;) {
      const u = this.bits(bits);
      if (u < upper) return u;
    }
  }

  belowBig(upper: bigint): bigint {
    if (upper < 1n) throw new RangeError("belowBig: bad bound");
    if (upper === 1n) return 0n;
    const bits = (upper - 1n).toString(2).length;
    const bytes = Math.ceil(bits / 8);
    const mask = (1n << BigInt(bits)) - 1n;
    for (;;) {
      let u = 0n;
      for (let i = 0; i < bytes; i++) u = (u << 8n) | BigInt(this.byte());
      u &= mask;
      if (u < upper) return u;
    }
  }

  bernoulli(prob: number): boolean {
    if (prob >= 1) return true;
    // [U < prob] for U = 0.B1 B2 ... in base 256, digit by digit (samplers.bernoulli_one):
    // equality through prob's last digit means U >= prob.
    for (const digit of base256Digits(Math.max(prob, 0))) {
      const b = this.byte();
      if (b !== digit) return b < digit;
    }
    return false;
  }
}

export function bitLength(n: number): number {
  let bits = 0;
  for (let v = n; v >= 1; v = Math.floor(v / 2)) bits++;
  return bits;
}

const digitCache = new Map<number, Uint8Array>();

/** The base-256 digits after the point of prob in [0, 1), exactly: a double is a dyadic
 * rational M / 2^E, so there are at most 135. */
export function base256Digits(prob: number): Uint8Array {
  const cached = digitCache.get(prob);
  if (cached) return cached;
  const [mantissa, exponent] = dyadic(prob);
  const digits: number[] = [];
  const mask = (1n << exponent) - 1n;
  for (let num = mantissa; num !== 0n; num &= mask) {
    num *= 256n;
    digits.push(Number(num >> exponent));
  }
  const result = Uint8Array.from(digits);
  if (digitCache.size >= 256) digitCache.clear();
  digitCache.set(prob, result);
  return result;
}

/** A finite non-negative double as M / 2^E exactly (M, E as bigints, E >= 0). */
export function dyadic(x: number): [bigint, bigint] {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const hi = view.getUint32(0);
  const lo = view.getUint32(4);
  const biased = (hi >>> 20) & 0x7ff;
  let mantissa = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
  let exponent = 1074n;
  if (biased !== 0) {
    mantissa |= 1n << 52n;
    exponent = BigInt(1075 - biased);
  }
  if (exponent < 0n) return [mantissa << -exponent, 0n];
  return [mantissa, exponent];
}

/** A uniform subset of [0, n) of `size` items, ascending (Floyd's algorithm, Bentley &
 * Floyd, CACM 1987: for j = n - size .. n - 1 add a uniform t in [0, j], or j if t is in). */
export function uniformSubset(rng: Randomness, n: number, size: number): number[] {
  const chosen = new Set<number>();
  for (let j = n - size; j < n; j++) {
    const t = rng.below(j + 1);
    chosen.add(chosen.has(t) ? j : t);
  }
  return [...chosen].sort((a, b) => a - b);
}
