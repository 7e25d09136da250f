/**
 * The protocol's hashes (docs/protocol.md): item keys `xxh64(utf8(value), 0)`, the local
 * hash `xxh32(le64(item_key), seed)` (Collet, xxHash specification), and SHA-256 / HMAC for
 * config ids, RAPPOR's permanent response and memo keys. Pure code: no platform crypto API
 * is needed (crypto.subtle is absent on plain-http pages and is asynchronous).
 */

const P32_1 = 0x9e3779b1;
const P32_2 = 0x85ebca77;
const P32_3 = 0xc2b2ae3d;
const P32_4 = 0x27d4eb2f;
const P32_5 = 0x165667b1;

const rotl32 = (x: number, r: number): number => ((x << r) | (x >>> (32 - r))) >>> 0;
const mul32 = (a: number, b: number): number => Math.imul(a, b) >>> 0;

/** XXH32 of `data` with a 32-bit seed. */
export function xxh32(data: Uint8Array, seed: number): number {
  const len = data.length;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let i = 0;
  let acc: number;
  if (len >= 16) {
    let v1 = (seed + P32_1 + P32_2) >>> 0;
    let v2 = (seed + P32_2) >>> 0;
    let v3 = seed >>> 0;
    let v4 = (seed - P32_1) >>> 0;
    const round = (v: number, lane: number): number =>
      mul32(rotl32((v + mul32(lane, P32_2)) >>> 0, 13), P32_1);
    for (; i + 16 <= len; i += 16) {
      v1 = round(v1, view.getUint32(i, true));
      v2 = round(v2, view.getUint32(i + 4, true));
      v3 = round(v3, view.getUint32(i + 8, true));
      v4 = round(v4, view.getUint32(i + 12, true));
    }
    acc = (rotl32(v1, 1) + rotl32(v2, 7) + rotl32(v3, 12) + rotl32(v4, 18)) >>> 0;
  } else {
    acc = (seed + P32_5) >>> 0;
  }
  acc = (acc + len) >>> 0;
  for (; i + 4 <= len; i += 4) {
    acc = mul32(rotl32((acc + mul32(view.getUint32(i, true), P32_3)) >>> 0, 17), P32_4);
  }
  for (; i < len; i++) {
    acc = mul32(rotl32((acc + mul32(data[i] as number, P32_5)) >>> 0, 11), P32_1);
  }
  acc = mul32(acc ^ (acc >>> 15), P32_2);
  acc = mul32(acc ^ (acc >>> 13), P32_3);
  return (acc ^ (acc >>> 16)) >>> 0;
}

const M64 = (1n << 64n) - 1n;
const P64_1 = 0x9e3779b185ebca87n;
const P64_2 = 0xc2b2ae3d27d4eb4fn;
const P64_3 = 0x165667b19e3779f9n;
const P64_4 = 0x85ebca77c2b2ae63n;
const P64_5 = 0x27d4eb2f165667c5n;

const rotl64 = (x: bigint, r: bigint): bigint => ((x << r) | (x >> (64n - r))) & M64;
const round64 = (acc: bigint, lane: bigint): bigint =>
  (rotl64((acc + lane * P64_2) & M64, 31n) * P64_1) & M64;
const merge64 = (acc: bigint, v: bigint): bigint =>
  (((acc ^ round64(0n, v)) * P64_1 + P64_4) & M64);

/** XXH64 of `data` with seed 0..2^64-1, as an unsigned bigint. */
export function xxh64(data: Uint8Array, seed = 0n): bigint {
  const len = data.length;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let i = 0;
  let acc: bigint;
  if (len >= 32) {
    let v1 = (seed + P64_1 + P64_2) & M64;
    let v2 = (seed + P64_2) & M64;
    let v3 = seed;
    let v4 = (seed - P64_1) & M64;
    for (; i + 32 <= len; i += 32) {
      v1 = round64(v1, view.getBigUint64(i, true));
      v2 = round64(v2, view.getBigUint64(i + 8, true));
      v3 = round64(v3, view.getBigUint64(i + 16, true));
      v4 = round64(v4, view.getBigUint64(i + 24, true));
    }
    acc = (rotl64(v1, 1n) + rotl64(v2, 7n) + rotl64(v3, 12n) + rotl64(v4, 18n)) & M64;
    acc = merge64(merge64(merge64(merge64(acc, v1), v2), v3), v4);
  } else {
    acc = (seed + P64_5) & M64;
  }
  acc = (acc + BigInt(len)) & M64;
  for (; i + 8 <= len; i += 8) {
    acc = (rotl64(acc ^ round64(0n, view.getBigUint64(i, true)), 27n) * P64_1 + P64_4) & M64;
  }
  if (i + 4 <= len) {
    acc = (rotl64(acc ^ ((BigInt(view.getUint32(i, true)) * P64_1) & M64), 23n) * P64_2 + P64_3) & M64;
    i += 4;
  }
  for (; i < len; i++) {
    acc = (rotl64(acc ^ ((BigInt(data[i] as number) * P64_5) & M64), 11n) * P64_1) & M64;
  }
  acc = ((acc ^ (acc >> 33n)) * P64_2) & M64;
  acc = ((acc ^ (acc >> 29n)) * P64_3) & M64;
  return acc ^ (acc >> 32n);
}

const encoder = new TextEncoder();

export function utf8(text: string): Uint8Array {
  return encoder.encode(text);
}

/** The 64-bit item key of a value: xxh64 of its UTF-8 bytes, seed 0. */
export function itemKey(value: string): bigint {
  return xxh64(utf8(value));
}

/** H(item_key, seed) = xxh32(le64(item_key), seed): the local hash. */
export function localHash(key: bigint, seed: number): number {
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, key, true);
  return xxh32(bytes, seed);
}

// -- SHA-256 (FIPS 180-4) and HMAC (RFC 2104) -------------------------------------------

const K256 = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

export function sha256(data: Uint8Array): Uint8Array {
  const h = new Uint32Array([
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
  ]);
  const padded = new Uint8Array(Math.ceil((data.length + 9) / 64) * 64);
  padded.set(data);
  padded[data.length] = 0x80;
  const view = new DataView(padded.buffer);
  view.setUint32(padded.length - 4, (data.length * 8) >>> 0);
  view.setUint32(padded.length - 8, Math.floor((data.length * 8) / 2 ** 32));
  const w = new Uint32Array(64);
  const rotr = (x: number, r: number): number => (x >>> r) | (x << (32 - r));
  for (let off = 0; off < padded.length; off += 64) {
    for (let t = 0; t < 16; t++) w[t] = view.getUint32(off + 4 * t);
    for (let t = 16; t < 64; t++) {
      const a = w[t - 15] as number;
      const b = w[t - 2] as number;
      const s0 = rotr(a, 7) ^ rotr(a, 18) ^ (a >>> 3);
      const s1 = rotr(b, 17) ^ rotr(b, 19) ^ (b >>> 10);
      w[t] = ((w[t - 16] as number) + s0 + (w[t - 7] as number) + s1) >>> 0;
    }
    let [a, b, c, d, e, f, g, hh] = h as unknown as number[] as [
      number, number, number, number, number, number, number, number,
    ];
    for (let t = 0; t < 64; t++) {
      const s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      const ch = (e & f) ^ (~e & g);
      const t1 = (hh + s1 + ch + (K256[t] as number) + (w[t] as number)) >>> 0;
      const s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      const maj = (a & b) ^ (a & c) ^ (b & c);
      const t2 = (s0 + maj) >>> 0;
      hh = g;
      g = f;
      f = e;
      e = (d + t1) >>> 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) >>> 0;
    }
    const out = [a, b, c, d, e, f, g, hh];
    for (let i = 0; i < 8; i++) h[i] = ((h[i] as number) + (out[i] as number)) >>> 0;
  }
  const digest = new Uint8Array(32);
  const dv = new DataView(digest.buffer);
  for (let i = 0; i < 8; i++) dv.setUint32(4 * i, h[i] as number);
  return digest;
}

export function hmacSha256(key: Uint8Array, message: Uint8Array): Uint8Array {
  const block = new Uint8Array(64);
  block.set(key.length > 64 ? sha256(key) : key);
  const inner = new Uint8Array(64 + message.length);
  const outer = new Uint8Array(64 + 32);
  for (let i = 0; i < 64; i++) {
    inner[i] = (block[i] as number) ^ 0x36;
    outer[i] = (block[i] as number) ^ 0x5c;
  }
  inner.set(message, 64);
  outer.set(sha256(inner), 64);
  return sha256(outer);
}

export function fromHex(text: string): Uint8Array {
  const out = new Uint8Array(text.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = Number.parseInt(text.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export function hex(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}
