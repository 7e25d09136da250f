/** Scripted randomness for the vectors: each draw is taken from a queue and, for uniform
 * integers, checked against the bound the vector names. */

import assert from "node:assert/strict";
import type { Randomness } from "../src/random.js";

export type Draw =
  | { below: number; u: number }
  | { bernoulli: boolean }
  | { big: bigint };

export class Script implements Randomness {
  private at = 0;
  constructor(private readonly draws: Draw[]) {}
  private next(): Draw {
    const draw = this.draws[this.at++];
    assert.ok(draw !== undefined, `draw ${this.at - 1} was not scripted`);
    return draw;
  }
  below(upper: number): number {
    if (upper === 1) return 0; // no randomness is needed (and Python draws none)
    const draw = this.next();
    assert.ok("below" in draw, `expected a uniform draw below ${upper}, got ${JSON.stringify(draw)}`);
    assert.equal(upper, draw.below, "uniform bound");
    return draw.u;
  }
  belowBig(_upper: bigint): bigint {
    const draw = this.next();
    assert.ok("big" in draw, "expected a big uniform draw");
    return draw.big;
  }
  bernoulli(_prob: number): boolean {
    const draw = this.next();
    assert.ok("bernoulli" in draw, `expected a coin, got ${JSON.stringify(draw)}`);
    return draw.bernoulli;
  }
  bytes(size: number): Uint8Array {
    return new Uint8Array(size);
  }
  done(): void {
    assert.equal(this.at, this.draws.length, "every scripted draw is used");
  }
}

export const coin = (b: boolean): Draw => ({ bernoulli: b });
