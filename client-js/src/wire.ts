/** Wire encodings (docs/protocol.md): bit vectors, base64, canonical JSON (RFC 8785),
 * config ids, and the label rules for free text. */

import { hex, sha256, utf8 } from "./hash.js";

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/** Standard base64 with `=` padding. */
export function base64(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const a = bytes[i] as number;
    const b = bytes[i + 1];
    const c = bytes[i + 2];
    const n = (a << 16) | ((b ?? 0) << 8) | (c ?? 0);
    out += ALPHABET[n >> 18];
    out += ALPHABET[(n >> 12) & 63];
    out += b === undefined ? "=" : ALPHABET[(n >> 6) & 63];
    out += c === undefined ? "=" : ALPHABET[n & 63];
  }
  return out;
}

/** `d` bits packed 8 per byte, most significant bit first (np.packbits), as base64. */
export function packBits(bits: ArrayLike<number | boolean>): string {
  const bytes = new Uint8Array(Math.ceil(bits.length / 8));
  for (let i = 0; i < bits.length; i++) {
    if (bits[i]) bytes[i >> 3] = (bytes[i >> 3] as number) | (128 >> (i & 7));
  }
  return base64(bytes);
}

/** Little-endian signed 32-bit integers as base64 (histogram encoding's `z`). */
export function packInt32(values: ArrayLike<number>): string {
  const bytes = new Uint8Array(4 * values.length);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < values.length; i++) view.setInt32(4 * i, values[i] as number, true);
  return base64(bytes);
}

/** RFC 8785 canonical JSON: sorted members (UTF-16 order), ECMAScript number and string
 * forms, no whitespace. */
export function canonicalJson(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new RangeError("JCS: not a finite number");
    return Object.is(value, -0) ? "0" : String(value);
  }
  if (typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).filter(
      ([, v]) => v !== undefined,
    );
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  throw new TypeError("JCS: not a JSON value");
}

/** The config id: the first 16 hex digits of SHA-256 over the canonical JSON. */
export function configId(config: Record<string, unknown>): string {
  const { config_id: _ignored, ...stored } = config;
  return hex(sha256(utf8(canonicalJson(stored)))).slice(0, 16);
}

/** Why `text` is not a valid label or free-text value ("" when it is): non-empty, no
 * control character (Unicode Cc), well-formed UTF-16 (no lone surrogate). */
export function labelProblem(text: string): string {
  if (text.length === 0) return "must not be empty";
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c <= 0x1f || (c >= 0x7f && c <= 0x9f)) return "must not contain control characters";
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return "must be valid Unicode (unpaired surrogate)";
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return "must be valid Unicode (unpaired surrogate)";
    }
  }
  return "";
}

/** The form an open-domain campaign reports: NFC, checked, at most maxLength UTF-8 bytes;
 * or a reason it is refused. */
export function openValue(value: string, maxLength: number): { text: string } | { reason: string } {
  const text = value.normalize("NFC");
  const problem = labelProblem(text);
  if (problem) return { reason: problem };
  const size = utf8(text).length;
  if (size > maxLength) {
    return { reason: `is ${size} UTF-8 bytes, longer than max_length ${maxLength}` };
  }
  return { text };
}
