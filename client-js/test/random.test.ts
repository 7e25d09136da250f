/** The CSPRNG samplers' laws: exact digits, uniform integers and coins within their
 * sampling error (6 standard deviations: a false alarm once in ~10^9 runs). */

import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { test } from "node:test";
import { SecureRandom, base256Digits, dyadic, uniformSubset } from "../src/random.js";

test("a double's base-256 digits are its exact value", () => {
  for (const p of [0.5, 0.1, 1 / 3, 0.7310585786300049, 2 ** -1074, 0.999999999]) {
    const [m, e] = dyadic(p);
    const digits = base256Digits(p);
    let value = 0n;
    for (const d of digits) value = value * 256n + BigInt(d);
    // value / 256^len == m / 2^e exactly
    assert.equal(value * (1n << e), m * 256n ** BigInt(digits.length), String(p));
  }
});

test("coins are 1 with probability p", () => {
  const rng = new SecureRandom();
  const n = 200_000;
  for (const p of [0.5, 0.11920292202211755, 0.003]) {
    let ones = 0;
    for (let i = 0; i < n; i++) ones += rng.bernoulli(p) ? 1 : 0;
    const sd = Math.sqrt(n * p * (1 - p));
    assert.ok(Math.abs(ones - n * p) < 6 * sd, `p=${p}: ${ones}`);
  }
  assert.equal(rng.bernoulli(0), false);
  assert.equal(rng.bernoulli(1), true);
});

test("uniform integers below a bound, small and large", () => {
  const rng = new SecureRandom();
  const n = 120_000;
  for (const upper of [3, 7, 56, 1000]) {
    const counts = new Array<number>(upper).fill(0);
    for (let i = 0; i < n; i++) {
      const u = rng.below(upper);
      assert.ok(Number.isInteger(u) && u >= 0 && u < upper);
      counts[u] = (counts[u] as number) + 1;
    }
    const expected = n / upper;
    const chi2 = counts.reduce((s, c) => s + (c - expected) ** 2 / expected, 0);
    // chi-square with upper - 1 degrees of freedom: mean k, sd sqrt(2k)
    assert.ok(chi2 < upper - 1 + 6 * Math.sqrt(2 * (upper - 1)), `upper ${upper}: chi2 ${chi2}`);
  }
  // The top bit of bounds above 2^32 and bigints is used half the time.
  let high = 0;
  for (let i = 0; i < 20_000; i++) high += rng.below(2 ** 53) >= 2 ** 52 ? 1 : 0;
  assert.ok(Math.abs(high - 10_000) < 6 * 71);
  let big = 0;
  for (let i = 0; i < 20_000; i++) big += rng.belowBig(1n << 64n) >= 1n << 63n ? 1 : 0;
  assert.ok(Math.abs(big - 10_000) < 6 * 71);
});

test("uniform subsets have the size asked and every item equally often", () => {
  const rng = new SecureRandom();
  const counts = new Array<number>(10).fill(0);
  const n = 30_000;
  for (let i = 0; i < n; i++) {
    const s = uniformSubset(rng, 10, 3);
    assert.equal(new Set(s).size, 3);
    for (const t of s) counts[t] = (counts[t] as number) + 1;
  }
  const p = 0.3;
  for (const c of counts) assert.ok(Math.abs(c - n * p) < 6 * Math.sqrt(n * p * (1 - p)));
});

test("no source file uses Math.random", () => {
  const src = new URL("../../src/", import.meta.url);
  for (const file of readdirSync(src)) {
    if (file.endsWith(".ts")) assert.ok(!readFileSync(new URL(file, src), "utf8").includes("Math.random("), file);
  }
});
